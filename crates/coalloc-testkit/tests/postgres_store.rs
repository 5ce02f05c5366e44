//! The PostgreSQL journal against a real cluster (issue 32, item 1): the [`Store`] contract
//! that SQLite's and the in-memory journal pass; the fence (a deposed writer's append is
//! refused and leaves nothing); snapshots and the history in the database; the lease's
//! expiry (issue 32, item 2: a standby waits while the leader renews, takes over when it
//! stops, the same server takes it at once, a deposed leader hears of it). Skipped without
//! PostgreSQL's binaries unless COALLOC_REQUIRE_POSTGRES=1.

use coalloc_server::entry::Entry;
use coalloc_server::history::HistoryRead;
use coalloc_server::journal::{
    contract, JournalError, Leader, LeaseTerms, PgHistory, PgJournal, Record, Store,
};
use coalloc_testkit::postgres::Cluster;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One database per check.
struct Pg<'c>(&'c Cluster);

impl contract::Subject for Pg<'_> {
    fn fresh(&mut self, tag: &str) -> Box<dyn Store> {
        Box::new(PgJournal::open(&self.0.create_db(tag)).unwrap())
    }
    fn reopen(&mut self, tag: &str) -> Box<dyn Store> {
        Box::new(PgJournal::open(&self.0.url(tag)).unwrap())
    }
}

fn tick(at: i64) -> Record {
    Record {
        at,
        entry: Entry::Tick,
    }
}

#[test]
fn the_postgres_journal_keeps_the_store_contract_fences_deposed_writers_and_keeps_snapshots_and_history(
) {
    let Some(pg) = Cluster::start("store") else {
        return;
    };
    contract::all(&mut Pg(&pg));

    // The fence: a second server takes the lease; the first one's writes are refused and
    // leave nothing, and its reads still work.
    let url = pg.create_db("fence");
    let mut old = PgJournal::open(&url).unwrap();
    old.append(&[tick(1)], &[]).unwrap();
    old.append_unsynced(&[tick(2)], &[]).unwrap();
    let mut new = PgJournal::open(&url).unwrap();
    assert_eq!(new.epoch(), old.epoch() + 1);
    assert_eq!(new.last_seq(), 2);
    for (what, r) in [
        ("append", old.append(&[tick(3)], &[contract::row(9)])),
        ("unsynced append", old.append_unsynced(&[tick(3)], &[])),
        ("sync", old.sync()),
        ("compaction", old.compact_before(2).map(|_| ())),
    ] {
        match r {
            Err(JournalError::Fenced { mine, now, .. }) => {
                assert_eq!((mine, now), (old.epoch(), new.epoch()), "{what}")
            }
            other => panic!("{what} of a deposed writer: {other:?}"),
        }
    }
    assert_eq!(pg.psql("fence", "SELECT count(*) FROM journal"), "2");
    assert_eq!(pg.psql("fence", "SELECT count(*) FROM history"), "0");
    new.append(&[tick(3)], &[]).unwrap();
    assert_eq!(
        pg.psql(
            "fence",
            "SELECT string_agg(seq || ':' || epoch, ',' ORDER BY seq) FROM journal"
        ),
        format!("1:{e},2:{e},3:{n}", e = old.epoch(), n = new.epoch())
    );
    // The deposed one's snapshot is refused too; the leader's is kept, whole, and replaces
    // the one before it.
    let place = new.snapshot_place().expect("snapshots in the database");
    let old_place = old.snapshot_place().unwrap();
    assert!(place.load().unwrap().is_none());
    let tmp = pg.dir().join("snap.tmp");
    // Larger than one part (8 MiB), and not a multiple of it.
    let bytes: Vec<u8> = (0..(9 << 20) + 17).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&tmp, &bytes).unwrap();
    let e = old_place.publish(&tmp, 2).unwrap_err();
    assert!(e.contains("deposed"), "{e}");
    place.publish(&tmp, 2).unwrap();
    assert!(
        !tmp.exists(),
        "the temporary file is removed once published"
    );
    assert_eq!(&*place.load().unwrap().unwrap(), &bytes[..]);
    std::fs::write(&tmp, b"the next one").unwrap();
    place.publish(&tmp, 3).unwrap();
    assert_eq!(&*place.load().unwrap().unwrap(), b"the next one");
    assert_eq!(
        pg.psql("fence", "SELECT count(DISTINCT seq) FROM snapshot"),
        "1"
    );

    // The history: written with the journal's entries, read by the API's reader.
    let view = |id: u64, state: &str| {
        serde_json::json!({"id": id, "name": "sweep", "user": "ann", "state": state,
            "processors": 4, "submit": 5, "start": 7, "end": 9, "components": [],
            "placement_tries": 0, "claiming_tries": 0, "submit_failures": 0,
            "completion_failures": 0})
        .to_string()
    };
    let mut row = contract::row(41);
    row.state = "finished".into();
    row.name = Some("sweep".into());
    row.view = view(41, "finished");
    let mut other = contract::row(42);
    other.state = "failed".into();
    other.view = view(42, "failed");
    new.append(
        &[Record {
            at: 10,
            entry: Entry::Forget { jobs: vec![41] },
        }],
        &[row, other],
    )
    .unwrap();
    let h = PgHistory::open(&url).unwrap();
    match h.get(41) {
        Ok(Some(v)) => assert_eq!((v.id, v.state.as_str()), (41, "finished")),
        other => panic!("history of job 41: {other:?}"),
    }
    assert!(h.get(40).unwrap().is_none());
    let finished = coalloc_server::listing::STATES
        .iter()
        .position(|s| *s == "finished")
        .expect("a listing state `finished`");
    let mut f = coalloc_server::listing::JobFilter {
        user: Some("ann".into()),
        limit: 1,
        ..Default::default()
    };
    let page = h.page(&f).unwrap();
    let ids: Vec<u64> = page.jobs.iter().map(|j| j.id).collect();
    assert_eq!((ids, page.next), (vec![41], Some(41)));
    f.states = vec![finished];
    f.limit = 10;
    let page = h.page(&f).unwrap();
    assert_eq!(page.jobs.len(), 1);
    f.user = Some("bob".into());
    assert!(h.page(&f).unwrap().jobs.is_empty());
    drop((old, new, h));
}

/// The lease term of these tests: long enough that a renewal (every quarter of it) starved
/// for a while by a loaded CI machine, running the suite's other tests and three database
/// clusters on two cores, still lands within it (600 ms did not, once); every wait below is
/// counted in terms.
const TERM: Duration = Duration::from_secs(2);

/// Lease terms of [`TERM`] for server `owner` (process `holder`).
fn terms(owner: &str, holder: &str) -> LeaseTerms {
    LeaseTerms {
        ttl: TERM,
        holder: holder.into(),
        owner: owner.into(),
        url: format!("http://{owner}"),
        name_tag: format!("tag-{owner}"),
    }
}

/// A journal that leads on `terms`, waiting as a standby meanwhile: it, the leaders it saw
/// while it waited, and where its loss is told.
fn lead(url: &str, t: &LeaseTerms) -> (PgJournal, Vec<Leader>, mpsc::Receiver<String>) {
    let (lost, losses) = mpsc::channel();
    let mut seen = Vec::new();
    let j = PgJournal::lead(
        url,
        t,
        &mut |l| seen.push(l.clone()),
        Box::new(move |why| {
            let _ = lost.send(why);
        }),
    )
    .unwrap();
    (j, seen, losses)
}

#[test]
fn a_standby_waits_while_the_leader_renews_and_takes_over_when_it_stops() {
    let Some(pg) = Cluster::start("lease") else {
        return;
    };
    let url = pg.create_db("lease");
    let (mut a, seen, a_lost) = lead(&url, &terms("a", "a:1"));
    assert!(seen.is_empty(), "a free lease is taken at once");
    assert_eq!(a.epoch(), 1);
    // B waits while A renews (well past a term), then takes over once A stops.
    let t = Instant::now();
    let (b, seen, b_lost) = std::thread::scope(|scope| {
        let b = scope.spawn(|| {
            let (b, seen, b_lost) = lead(&url, &terms("b", "b:2"));
            (b, seen, b_lost, Instant::now())
        });
        std::thread::sleep(TERM * 7 / 12);
        // The standby's connection is cut (the database restarted): it connects again.
        let cut = pg.psql(
            "lease",
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name = 'coalloc journal b:2'",
        );
        assert_eq!(cut, "1");
        std::thread::sleep(TERM * 2 / 3);
        assert!(!b.is_finished(), "the standby took a live lease");
        a.append(&[tick(1)], &[]).unwrap();
        let stopped = Instant::now();
        drop(a);
        let (b, seen, b_lost, led) = b.join().unwrap();
        let after = led - stopped;
        // It polls every tenth of a term.
        assert!(after < TERM / 2, "{after:?} after a release");
        (b, seen, b_lost)
    });
    assert!(t.elapsed() >= TERM);
    assert_eq!(
        seen,
        vec![Leader {
            epoch: 1,
            holder: "a:1".into(),
            url: "http://a".into()
        }]
    );
    assert_eq!((b.epoch(), b.last_seq()), (2, 1));
    // The first server's tag in launches' names is every server's.
    assert_eq!(b.name_tag(), Some("tag-a"));
    assert!(a_lost.try_recv().is_err(), "a clean stop is no loss");
    assert_eq!(pg.psql("lease", "SELECT holder FROM lease"), "b:2");

    // B's connections are cut (as by its host's death): its renewals fail, it hears of its
    // loss within a term, and C waits out the lease.
    let t = Instant::now();
    pg.psql(
        "lease",
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE datname = 'lease' AND pid <> pg_backend_pid()",
    );
    let (c, seen, c_lost) = lead(&url, &terms("c", "c:3"));
    let waited = t.elapsed();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(waited < TERM * 5 / 2, "{waited:?}");
    assert_eq!(c.epoch(), 3);
    let why = b_lost.recv_timeout(TERM * 3).unwrap();
    assert!(why.contains("lease lost: no renewal for 2s"), "{why}");
    drop(b);

    // The same server started again (owner c) takes its lease at once; the old process
    // hears it is deposed at its next renewal.
    let t = Instant::now();
    let (mut c2, seen, _) = lead(&url, &terms("c", "c:4"));
    assert!(seen.is_empty() && t.elapsed() < TERM / 2);
    assert_eq!(c2.epoch(), 4);
    let why = c_lost.recv_timeout(TERM * 3).unwrap();
    assert!(
        why.contains("deposed: c:4 took the journal's lease at epoch 4; this server's was epoch 3"),
        "{why}"
    );
    let mut c = c;
    assert!(matches!(
        c.append(&[tick(2)], &[]),
        Err(JournalError::Fenced {
            mine: 3,
            now: 4,
            ..
        })
    ));
    c2.append(&[tick(2)], &[]).unwrap();
    assert_eq!(
        pg.psql(
            "lease",
            "SELECT string_agg(seq || ':' || epoch, ',' ORDER BY seq) FROM journal"
        ),
        "1:1,2:4"
    );
    drop((c, c2));
}

/// A write fenced by the lease holds the row `FOR KEY SHARE` until its commit, for seconds
/// when it is a million jobs' snapshot (held here two and a half terms by `psql`): the
/// leader's renewals go on meanwhile, but a server taking the lease waits for it (the fence).
#[test]
fn a_long_fenced_write_holds_back_no_renewal_but_a_takeover() {
    let Some(pg) = Cluster::start("longtx") else {
        return;
    };
    let url = pg.create_db("longtx");
    let (a, _, a_lost) = lead(&url, &terms("a", "a:1"));
    let (waited, lost_meanwhile) = std::thread::scope(|scope| {
        let write = scope.spawn(|| {
            let hold = (TERM * 5 / 2).as_secs_f64();
            pg.psql(
                "longtx",
                &format!(
                    "BEGIN; SELECT epoch FROM lease WHERE id = 1 FOR KEY SHARE;
                     SELECT pg_sleep({hold}); COMMIT"
                ),
            )
        });
        // Two terms into the write.
        std::thread::sleep(TERM * 2);
        let lost_meanwhile = a_lost.try_recv().ok();
        let t = Instant::now();
        let b = PgJournal::open(&url).unwrap();
        let waited = t.elapsed();
        write.join().unwrap();
        assert_eq!(b.epoch(), 2);
        (waited, lost_meanwhile)
    });
    assert_eq!(lost_meanwhile, None, "renewals were held back by the write");
    assert!(
        waited >= Duration::from_millis(150),
        "the takeover did not wait: {waited:?}"
    );
    let why = a_lost.recv_timeout(TERM * 3).unwrap();
    assert!(why.contains("deposed"), "{why}");
    drop(a);
}
