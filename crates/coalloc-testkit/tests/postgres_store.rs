//! The PostgreSQL journal against a real cluster (issue 32, item 1): the [`Store`] contract
//! that SQLite's and the in-memory journal pass; the fence (a deposed writer's append is
//! refused and leaves nothing); snapshots and the history in the database. Skipped without
//! PostgreSQL's binaries unless COALLOC_REQUIRE_POSTGRES=1.

use coalloc_server::entry::Entry;
use coalloc_server::history::HistoryRead;
use coalloc_server::journal::{contract, JournalError, PgHistory, PgJournal, Record, Store};
use coalloc_testkit::postgres::Cluster;

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
