//! EASY and conservative backfilling (seed 003 §3.2.2), walked event by event with exact
//! numbers, against FCFS and FPFS.

use coalloc_core::model::*;
use coalloc_core::scheduler::*;
use std::collections::BTreeMap;

fn sites(sizes: &[u32]) -> Vec<Site> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &p)| Site::cluster(format!("s{i}"), p))
        .collect()
}

/// An unordered job of these component sizes with this runtime estimate (ms).
fn job(counts: &[u32], estimate: Millis) -> Job {
    let kind = if counts.len() == 1 {
        JobKind::Total
    } else {
        JobKind::Unordered
    };
    let mut j = Job::new(
        kind,
        counts
            .iter()
            .map(|&count| Component {
                count,
                ..Component::default()
            })
            .collect(),
    );
    j.runtime_estimate = Some(estimate);
    j
}

/// An ordered job: `(site name, processors)` per component.
fn ordered(parts: &[(&str, u32)], estimate: Millis) -> Job {
    let mut j = Job::new(
        JobKind::Ordered,
        parts
            .iter()
            .map(|&(site, count)| Component {
                count,
                site: Some(site.into()),
                ..Component::default()
            })
            .collect(),
    );
    j.runtime_estimate = Some(estimate);
    j
}

/// When a job started, and `(launch, site, processors)` per component.
type Started = (Time, Vec<(LaunchId, SiteId, u32)>);

/// A scheduler and what it started.
struct H {
    s: Scheduler,
    started: BTreeMap<JobId, Started>,
}

impl H {
    fn new(queue: QueueConfig, sizes: &[u32]) -> H {
        let config = SchedulerConfig {
            queue,
            ..SchedulerConfig::default()
        };
        H {
            s: Scheduler::new(config, sites(sizes)),
            started: BTreeMap::new(),
        }
    }

    fn at(&mut self, t: Time, e: Event) -> Reply {
        let reply = self.s.handle(t, e).expect("event accepted");
        while let Some(c) = self.s.poll_command() {
            if let Command::StartComponent(s) = c {
                let e = self.started.entry(s.job).or_insert((t, Vec::new()));
                e.1.push((s.launch, s.site, s.count));
            }
        }
        reply
    }

    fn submit(&mut self, t: Time, j: Job) -> JobId {
        match self.at(t, Event::Submit(Box::new(j))) {
            Reply::Submitted(id) => id,
            other => panic!("{other:?}"),
        }
    }

    /// Every component of the job finishes at `t` (nothing, if it has not started).
    fn finish(&mut self, t: Time, id: JobId) {
        let launches: Vec<LaunchId> = self
            .started
            .get(&id)
            .map_or(Vec::new(), |s| s.1.iter().map(|l| l.0).collect());
        for launch in launches {
            self.at(t, Event::ComponentFinished { launch });
        }
    }

    /// When the job started, if it did.
    fn start(&self, id: JobId) -> Option<Time> {
        self.started.get(&id).map(|s| s.0)
    }

    /// Processors per site the job took.
    fn took(&self, id: JobId) -> Vec<u32> {
        let mut v = vec![0; self.s.sites().len()];
        for &(_, site, n) in &self.started[&id].1 {
            v[site] += n;
        }
        v
    }

    fn idle(&self) -> Vec<u32> {
        (0..self.s.sites().len())
            .map(|i| self.s.site_state(i).unwrap().idle)
            .collect()
    }
}

#[test]
fn the_names_parse_and_build() {
    for (name, q) in [
        ("easy", QueueConfig::Easy),
        ("conservative", QueueConfig::Conservative),
    ] {
        assert!(QueueConfig::NAMES.contains(&name));
        assert_eq!(QueueConfig::from_name(name), Ok(q.clone()));
        assert_eq!(q.build().name(), name);
    }
    assert_eq!(
        QueueConfig::from_name("EASY"),
        Ok(QueueConfig::Easy),
        "names are case-insensitive"
    );
}

/// One site of 12 processors. J1 (6, until 100) runs; the head J2 needs 10, so its shadow
/// time is 100, when 12 are free: 10 reserved, 2 extra.
/// - J3 (4 for 500) fits now but ends after the shadow and would take 4 > 2 extra: waits.
/// - J4 (4 for 50) ends by the shadow: backfilled.
/// - J5 (2 for 500) ends after the shadow but takes only the 2 extra: backfilled.
/// - J6 (1 for 10): nothing idle is left at 0; backfilled at 50, when J4 ends.
///
/// At 100 the head starts on time. FCFS starts none of J3–J6 at 0; FPFS starts J3 and the
/// head misses 100.
#[test]
fn easy_on_one_site_backfills_short_jobs_and_jobs_on_extra_processors() {
    let submit_all = |q: QueueConfig| {
        let mut h = H::new(q, &[12]);
        let ids = [
            h.submit(0, job(&[6], 100)),
            h.submit(0, job(&[10], 100)),
            h.submit(0, job(&[4], 500)),
            h.submit(0, job(&[4], 50)),
            h.submit(0, job(&[2], 500)),
            h.submit(0, job(&[1], 10)),
        ];
        (h, ids)
    };
    let (mut h, [j1, j2, j3, j4, j5, j6]) = submit_all(QueueConfig::Easy);
    assert_eq!(h.start(j1), Some(0));
    assert_eq!(h.start(j2), None);
    assert_eq!(h.start(j3), None, "a long job beyond the extra processors");
    assert_eq!(h.start(j4), Some(0), "ends by the shadow time");
    assert_eq!(h.start(j5), Some(0), "uses only extra processors");
    assert_eq!(h.start(j6), None);
    assert_eq!(h.idle(), [0]);
    assert_eq!(h.s.queued(), 3);

    // J4 ends at 50: 4 idle. The shadow is still 100 and J5 holds the 2 extra, so J3 still
    // waits; J6 (1 for 10, ending at 60 <= 100) is backfilled now.
    h.finish(50, j4);
    assert_eq!(h.start(j3), None);
    assert_eq!(h.start(j6), Some(50));
    assert_eq!(h.idle(), [3]);
    h.finish(60, j6);
    assert_eq!(h.start(j3), None);

    // At 100 J1 ends and the head starts on time with its 10.
    h.finish(100, j1);
    assert_eq!(h.start(j2), Some(100));
    assert_eq!(h.took(j2), [10]);

    // FCFS starts only J1 at 0: the head blocks every later job.
    let (h, [f1, _, f3, f4, f5, f6]) = submit_all(QueueConfig::Fcfs);
    assert_eq!(h.start(f1), Some(0));
    for id in [f3, f4, f5, f6] {
        assert_eq!(h.start(id), None, "FCFS never backfills job {id}");
    }
    // FPFS starts J3 (and J5) at 0 and the head is delayed past 100.
    let (mut h, [p1, p2, p3, p4, p5, _]) = submit_all(QueueConfig::Fpfs);
    assert_eq!(
        [p1, p3, p4, p5].map(|id| h.start(id)),
        [Some(0), Some(0), None, Some(0)]
    );
    h.finish(100, p1);
    assert_eq!(h.start(p2), None, "FPFS delays the head");
}

/// Two sites of 10. J1 takes 6 + 6 until 100; the head J2 needs 7 + 7, so at its shadow time
/// 100 it reserves 7 on each site and 3 + 3 are extra.
/// - J3 (4 for 500) fits now (on s0, 4 idle) but 4 > 3 extra there: waits, though 6 extra
///   processors exist over both sites.
/// - J4 (3 + 3 for 50) ends by the shadow time: backfilled.
/// - J5 (1 + 1 for 500) takes 1 extra on each site: backfilled.
#[test]
fn easy_on_two_sites_protects_a_two_component_reservation() {
    let submit_all = |q: QueueConfig| {
        let mut h = H::new(q, &[10, 10]);
        let ids = [
            h.submit(0, job(&[6, 6], 100)),
            h.submit(0, job(&[7, 7], 100)),
            h.submit(0, job(&[4], 500)),
            h.submit(0, job(&[3, 3], 50)),
            h.submit(0, job(&[1, 1], 500)),
        ];
        (h, ids)
    };
    let (mut h, [j1, j2, j3, j4, j5]) = submit_all(QueueConfig::Easy);
    assert_eq!(h.took(j1), [6, 6]);
    assert_eq!([j2, j3].map(|id| h.start(id)), [None, None]);
    assert_eq!([j4, j5].map(|id| h.start(id)), [Some(0), Some(0)]);
    assert_eq!((h.took(j4), h.took(j5)), (vec![3, 3], vec![1, 1]));
    assert_eq!(h.idle(), [0, 0]);

    h.finish(50, j4);
    assert_eq!(h.idle(), [3, 3]);
    assert_eq!(h.start(j3), None);

    // J1's first component ends at 100: s0 has 9 idle and J3 fits there now, but J1 is
    // past its estimate, so the shadow is now and s0 has only 9 - 7 = 2 extra.
    let first = h.started[&j1].1[0].0;
    h.at(100, Event::ComponentFinished { launch: first });
    assert_eq!(h.idle(), [9, 3]);
    assert_eq!(h.start(j3), None);
    // The second ends too: the head starts on time on its reservation.
    let second = h.started[&j1].1[1].0;
    h.at(100, Event::ComponentFinished { launch: second });
    assert_eq!(h.start(j2), Some(100));
    assert_eq!(h.took(j2), [7, 7]);
    assert_eq!(h.start(j3), None);

    // FCFS starts nothing after J1.
    let (h, [_, _, f3, f4, f5]) = submit_all(QueueConfig::Fcfs);
    assert_eq!([f3, f4, f5].map(|id| h.start(id)), [None, None, None]);
    // FPFS starts J3 at 0, and then the head cannot start at 100.
    let (mut h, [p1, p2, p3, _, _]) = submit_all(QueueConfig::Fpfs);
    assert_eq!(h.start(p3), Some(0));
    h.finish(100, p1);
    assert_eq!(h.start(p2), None);
}

/// One site of 10. J1 (6 until 100) runs. The queue: J2 (8 for 100), J3 (9 for 100),
/// J4 (2 for 1000), J5 (1 for 50).
///
/// EASY protects J2 only (shadow 100, 2 extra): it backfills J4 onto the 2 extra processors,
/// so at 200, when J2 ends, J3 finds 8 idle and waits until J4 ends at 1000.
///
/// Conservative reserves J2 at [100, 200) and J3 at [200, 300), leaving 1 processor at
/// 200: J4 gets [300, 1300) and J3 starts at 200. Both backfill J5 (1 for 50).
#[test]
fn conservative_does_not_delay_the_second_job_where_easy_does() {
    let run = |q: QueueConfig| {
        let mut h = H::new(q, &[10]);
        let ids = [
            h.submit(0, job(&[6], 100)),
            h.submit(0, job(&[8], 100)),
            h.submit(0, job(&[9], 100)),
            h.submit(0, job(&[2], 1000)),
            h.submit(0, job(&[1], 50)),
        ];
        let [j1, j2, j3, j4, j5] = ids;
        let at_0 = ids.map(|id| h.start(id));
        h.finish(50, j5);
        h.finish(100, j1);
        let at_100 = h.start(j2);
        h.finish(200, j2);
        let j3_at_200 = h.start(j3);
        (h, ids, at_0, at_100, j3_at_200, j4)
    };

    let (mut h, [_, _, j3, _, _], at_0, at_100, j3_at_200, j4) = run(QueueConfig::Easy);
    assert_eq!(at_0, [Some(0), None, None, Some(0), Some(0)]);
    assert_eq!(at_100, Some(100), "the head is not delayed");
    assert_eq!(j3_at_200, None, "J4 on the extra processors delays J3");
    assert_eq!(h.idle(), [8]);
    h.finish(1000, j4);
    assert_eq!(h.start(j3), Some(1000));

    let (mut h, [_, _, j3, _, _], at_0, at_100, j3_at_200, j4) = run(QueueConfig::Conservative);
    assert_eq!(at_0, [Some(0), None, None, None, Some(0)]);
    assert_eq!(at_100, Some(100));
    assert_eq!(j3_at_200, Some(200), "no earlier job is delayed");
    assert_eq!(h.start(j4), None);
    h.finish(300, j3);
    assert_eq!(h.start(j4), Some(300));

    // FCFS backfills neither J4 nor J5.
    let (_, _, at_0, ..) = run(QueueConfig::Fcfs);
    assert_eq!(at_0, [Some(0), None, None, None, None]);
}

/// Two sites of 10, s1 unusable. The head H needs 4 on s0 and 8 on s1 (ordered), so it fits
/// at no time: its shadow is infinite and it reserves 4 + 8, leaving 6 + 2 extra. J2 (6 on
/// s0, for 10) takes the 6 extra; J3 (1 for 10) would take a processor H needs and waits,
/// short as it is. When s1 comes back, H starts.
#[test]
fn a_head_that_fits_at_no_time_keeps_its_processors() {
    for q in [QueueConfig::Easy, QueueConfig::Conservative] {
        let mut h = H::new(q.clone(), &[10, 10]);
        h.at(
            0,
            Event::SetUsable {
                site: 1,
                usable: false,
            },
        );
        let head = h.submit(0, ordered(&[("s0", 4), ("s1", 8)], 100));
        let j2 = h.submit(0, job(&[6], 10));
        let j3 = h.submit(0, job(&[1], 10));
        assert_eq!(h.start(head), None, "{q:?}");
        assert_eq!(h.start(j2), Some(0), "{q:?}");
        assert_eq!(h.took(j2), [6, 0], "{q:?}");
        assert_eq!(h.start(j3), None, "{q:?}");
        h.at(
            5,
            Event::SetUsable {
                site: 1,
                usable: true,
            },
        );
        assert_eq!(h.start(head), Some(5), "{q:?}");
        assert_eq!(h.took(head), [4, 8], "{q:?}");
    }
    // FPFS starts J3 as well, and H cannot start when s1 comes back (3 idle on s0).
    let mut h = H::new(QueueConfig::Fpfs, &[10, 10]);
    h.at(
        0,
        Event::SetUsable {
            site: 1,
            usable: false,
        },
    );
    let head = h.submit(0, ordered(&[("s0", 4), ("s1", 8)], 100));
    h.submit(0, job(&[6], 10));
    let j3 = h.submit(0, job(&[1], 10));
    assert_eq!(h.start(j3), Some(0));
    h.at(
        5,
        Event::SetUsable {
            site: 1,
            usable: true,
        },
    );
    assert_eq!(h.start(head), None);
}

/// One site of 10, 5 of them busy with local jobs. The head H (8) fits at no time of the
/// profile; with the local processors free it would take 8 of 10, so 2 are extra. J2 (2 for
/// 1000) takes them; J3 (1 for 10) would take one H needs once the local jobs leave, and
/// waits, short as it is. When the local jobs leave, H starts.
#[test]
fn a_head_blocked_by_local_jobs_keeps_the_processors_it_needs_when_they_leave() {
    for q in [QueueConfig::Easy, QueueConfig::Conservative] {
        let mut h = H::new(q.clone(), &[10]);
        let status = |idle| Event::SiteStatus {
            site: 0,
            idle,
            total: 10,
            healthy: true,
            other: 0,
        };
        h.at(0, status(5));
        let head = h.submit(0, job(&[8], 100));
        let j2 = h.submit(0, job(&[2], 1000));
        let j3 = h.submit(0, job(&[1], 10));
        assert_eq!(
            [head, j2, j3].map(|id| h.start(id)),
            [None, Some(0), None],
            "{q:?}"
        );
        assert_eq!(h.idle(), [3], "{q:?}");
        let launch = h.started[&j2].1[0].0;
        h.at(1, Event::ComponentStarted { launch });
        h.at(5, status(8));
        assert_eq!(h.start(head), Some(5), "{q:?}");
    }
}
