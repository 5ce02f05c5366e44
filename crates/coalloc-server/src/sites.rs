//! Site workers: one thread per site between the driver and that site's backend, so that a
//! slow or dead resource manager holds up only its own site (an agent site has none: its
//! calls go over its link, [`crate::link::remote::AgentLink`]). A worker submits and cancels
//! on short-lived threads of their own (the components of one job go out in parallel, or,
//! for a backend that starts them one by one anyway, in order on one thread and reported
//! together, so that the driver journals them in one turn), and
//! every monitor interval it polls the backend: the site's load for the resource monitor
//! (seed 003 §4.3.2) and the states of the launches it watches.
//!
//! A poll that falls due within one interval of a submission to the site waits until one
//! interval after that submission, once (so a site that is sent launches without pause is
//! still polled at least every second interval). The launch is then being granted and its
//! processes are starting and checking in: a reading taken now would see half of it, and
//! the poll's commands (`sinfo`, `squeue` on a Slurm site) would compete with the launch for
//! the controller and the CPUs.

use crate::msg::{Msg, Report, ReserveCall, ReserveReport, SiteCall, SiteLink};
use coalloc_backends::provider::Provider;
use coalloc_backends::{Backend, BackendError, SubmitRequest};
use std::collections::BTreeMap;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the worker's thread takes: a call, or `None` to stop.
type Cmd = Option<SiteCall>;

/// How long a worker waits to try a cancel again after `attempt` failed tries (from 1):
/// 1 s, doubling up to 16 s, for as long as the resource manager does not take it (`None`:
/// give up; never). A cancel sent while the manager was down was first never tried again
/// (the simulation harness, seed 101497), then tried five times over 15 s, and a launch
/// whose manager was down for longer was left at the site for ever (seeds 108037, 113267).
/// The harness's site worker follows the same schedule.
pub fn cancel_retry_after(attempt: u32) -> Option<Duration> {
    Some(Duration::from_secs(1 << attempt.saturating_sub(1).min(4)))
}

/// Try a cancel on a thread of its own until the resource manager takes it, waiting
/// [`cancel_retry_after`] between tries; one the manager refuses (not one it cannot be
/// reached for) is not tried again.
fn cancel_until_taken(
    site: usize,
    what: String,
    cancel: impl Fn() -> Result<(), BackendError> + Send + 'static,
) {
    std::thread::spawn(move || {
        let mut attempt = 1;
        loop {
            match cancel() {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(site, attempt, "{what}: {e}");
                    if matches!(e, BackendError::Rejected(_)) {
                        return;
                    }
                }
            }
            match cancel_retry_after(attempt) {
                Some(wait) => std::thread::sleep(wait),
                None => return,
            }
            attempt += 1;
        }
    });
}

/// The driver's handle on one site's worker.
pub struct SiteWorker {
    tx: Sender<Cmd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SiteWorker {
    /// Start the worker of site `site`.
    pub fn spawn(
        site: usize,
        backend: Arc<dyn Backend>,
        provider: Option<Arc<dyn Provider>>,
        interval: Duration,
        driver: Sender<Msg>,
    ) -> SiteWorker {
        let (tx, rx) = channel();
        let thread = std::thread::Builder::new()
            .name(format!("site-{site}"))
            .spawn(move || {
                let mut watched: BTreeMap<u64, String> = BTreeMap::new();
                let mut next_poll = Instant::now();
                let parallel = backend.submits_in_parallel();
                // A command taken out of the channel while collecting a burst of submissions.
                let mut held: Option<Cmd> = None;
                // The last submission, and whether the due poll already waited for one.
                let (mut last_submit, mut postponed): (Option<Instant>, bool) = (None, false);
                loop {
                    let wait = next_poll.saturating_duration_since(Instant::now());
                    let cmd = match held.take() {
                        Some(c) => Ok(c),
                        None => rx.recv_timeout(wait),
                    };
                    if matches!(cmd, Ok(Some(SiteCall::Submit(_)))) {
                        last_submit = Some(Instant::now());
                    }
                    match cmd {
                        Ok(Some(SiteCall::Submit(req))) if !parallel => {
                            // The job's other components on this site are already waiting:
                            // one thread submits them in order and reports them together.
                            let mut burst = vec![req];
                            loop {
                                match rx.try_recv() {
                                    Ok(Some(SiteCall::Submit(r))) => burst.push(r),
                                    Ok(other) => {
                                        held = Some(other);
                                        break;
                                    }
                                    Err(_) => break,
                                }
                            }
                            let (b, d) = (backend.clone(), driver.clone());
                            std::thread::spawn(move || {
                                let burst: Vec<SubmitRequest> =
                                    burst.into_iter().map(|r| *r).collect();
                                let all = burst
                                    .iter()
                                    .map(|r| r.launch)
                                    .zip(b.submit_many(&burst))
                                    .collect();
                                let _ = d.send(Msg::Site(Report::SubmittedMany(site, all)));
                            });
                        }
                        Ok(Some(SiteCall::Submit(req))) => {
                            let (b, d) = (backend.clone(), driver.clone());
                            std::thread::spawn(move || {
                                let result = b.submit(&req);
                                let _ = d.send(Msg::Site(Report::Submitted {
                                    site,
                                    launch: req.launch,
                                    result,
                                }));
                            });
                        }
                        Ok(Some(SiteCall::Cancel(remote))) => {
                            // A launch left running beside its replacement, or holding the
                            // site after its job ended.
                            let b = backend.clone();
                            let what = format!("cancelling {remote} failed");
                            cancel_until_taken(site, what, move || b.cancel(&remote));
                        }
                        Ok(Some(SiteCall::CancelUnrecorded {
                            job,
                            component,
                            launch,
                        })) => {
                            // An orphan left running would run beside its replacement.
                            let b = backend.clone();
                            let what = format!(
                                "cancelling the unrecorded submission of launch {launch} failed"
                            );
                            cancel_until_taken(site, what, move || {
                                b.cancel_unrecorded(job, component, launch)
                            });
                        }
                        Ok(Some(SiteCall::Watch { launch, remote })) => {
                            watched.insert(launch, remote);
                        }
                        Ok(Some(SiteCall::Forget(launch))) => {
                            watched.remove(&launch);
                        }
                        // On this thread, before the submissions queued behind it: the room
                        // is made before the global job's components ask for it.
                        Ok(Some(SiteCall::KillLocal(processors))) => {
                            match backend.kill_local(processors) {
                                Ok(freed) => tracing::info!(
                                    site,
                                    processors,
                                    freed,
                                    "local jobs preempted for a global job (GP)"
                                ),
                                Err(e) => tracing::warn!(site, processors, "GP: {e}"),
                            }
                        }
                        Ok(Some(SiteCall::Discard(remote))) => backend.discard(&[remote]),
                        Ok(Some(SiteCall::Lease(vm))) => {
                            lease(site, vm, provider.clone(), driver.clone())
                        }
                        Ok(Some(SiteCall::Release { vm, node })) => {
                            release(site, vm, node, provider.clone(), driver.clone())
                        }
                        Ok(Some(SiteCall::Reserve(call))) => {
                            reserve(site, call, backend.clone(), driver.clone())
                        }
                        Ok(None) | Err(RecvTimeoutError::Disconnected) => return,
                        Err(RecvTimeoutError::Timeout) => {
                            let after_launch = last_submit.map(|t| t + interval);
                            if let Some(due) =
                                after_launch.filter(|d| !postponed && *d > Instant::now())
                            {
                                next_poll = due;
                                postponed = true;
                                continue;
                            }
                            postponed = false;
                            next_poll = Instant::now() + interval;
                            let load = backend.load().map_err(|e| e.to_string());
                            let (launches, remotes): (Vec<u64>, Vec<String>) =
                                watched.iter().map(|(l, r)| (*l, r.clone())).unzip();
                            // A resource manager that cannot say its load is down: asking
                            // it for states too would only wait out a second timeout.
                            let states = if remotes.is_empty()
                                || (load.is_err() && !backend.query_when_unhealthy())
                            {
                                Vec::new()
                            } else {
                                match backend.query(&remotes) {
                                    Ok(states) => launches.into_iter().zip(states).collect(),
                                    Err(e) => {
                                        tracing::warn!(site, "query failed: {e}");
                                        Vec::new()
                                    }
                                }
                            };
                            if driver
                                .send(Msg::Site(Report::Polled { site, load, states }))
                                .is_err()
                            {
                                return;
                            }
                        }
                    }
                }
            })
            .expect("a site worker thread starts");
        SiteWorker {
            tx,
            thread: Some(thread),
        }
    }
}

/// Carry out a reservation call on a thread of its own ([`Report::Reservation`]); a
/// deletion is tried again while the manager cannot be reached, as a cancel is.
pub(crate) fn reserve(site: usize, call: ReserveCall, b: Arc<dyn Backend>, d: Sender<Msg>) {
    let report = move |r: ReserveReport| {
        let _ = d.send(Msg::Site(Report::Reservation(r)));
    };
    let text = |e: BackendError| e.to_string();
    match call {
        ReserveCall::Delete(name) => {
            let what = format!("deleting reservation {name} failed");
            cancel_until_taken(site, what, move || b.unreserve(&name));
        }
        ReserveCall::Earliest {
            reservation,
            count,
            duration_ms,
            not_before_ms,
        } => {
            std::thread::spawn(move || {
                let earliest = b
                    .reserve_earliest(count, duration_ms, not_before_ms)
                    .map_err(text);
                report(ReserveReport::Offer {
                    reservation,
                    earliest,
                });
            });
        }
        ReserveCall::Make {
            reservation,
            name,
            count,
            start_ms,
            duration_ms,
        } => {
            std::thread::spawn(move || {
                let result = b.reserve(&name, count, start_ms, duration_ms).map_err(text);
                report(ReserveReport::Made {
                    reservation,
                    result,
                });
            });
        }
        // Tried again while the manager (or the agent) cannot be reached, as a deletion is:
        // a restart learns only from it what the site holds, and deletes what no live run
        // owns (simulation harness, seed 72: a site out of reach at a restart kept a
        // reservation of a job rolled back for ever).
        ReserveCall::List => {
            std::thread::spawn(move || {
                let mut attempt = 1;
                loop {
                    match b.reservations() {
                        Err(e @ BackendError::Unavailable(_)) => {
                            tracing::warn!(site, attempt, "listing the reservations failed: {e}");
                            match cancel_retry_after(attempt) {
                                Some(wait) => std::thread::sleep(wait),
                                None => {
                                    return report(ReserveReport::Found {
                                        site,
                                        names: Err(text(e)),
                                    })
                                }
                            }
                            attempt += 1;
                        }
                        names => {
                            let names = names.map_err(text);
                            return report(ReserveReport::Found { site, names });
                        }
                    }
                }
            });
        }
    }
}

/// Lease a VM through `site`'s provider on a thread of its own ([`Report::Leased`]).
pub(crate) fn lease(site: usize, vm: u64, p: Option<Arc<dyn Provider>>, d: Sender<Msg>) {
    std::thread::spawn(move || {
        let result = match p {
            Some(p) => p.lease(vm).map_err(|e| e.to_string()),
            None => Err("this site has no cloud provider".into()),
        };
        let _ = d.send(Msg::Site(Report::Leased { site, vm, result }));
    });
}

/// Release a VM through `site`'s provider on a thread of its own, until it is given back
/// ([`Report::Released`]).
pub(crate) fn release(
    site: usize,
    vm: u64,
    node: String,
    p: Option<Arc<dyn Provider>>,
    d: Sender<Msg>,
) {
    std::thread::spawn(move || {
        // A VM that is not given back goes on costing: retry.
        let mut wait = Duration::from_millis(200);
        while let Some(p) = &p {
            match p.release(vm, &node) {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(site, vm, "release failed: {e}");
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_secs(30));
                }
            }
        }
        let _ = d.send(Msg::Site(Report::Released { site, vm }));
    });
}

impl SiteLink for SiteWorker {
    fn send(&self, call: SiteCall) {
        let _ = self.tx.send(Some(call));
    }
}

impl Drop for SiteWorker {
    fn drop(&mut self) {
        let _ = self.tx.send(None);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coalloc_backends::{RemoteId, RemoteState, SiteLoad};
    use std::sync::Mutex;

    #[test]
    fn a_failed_cancel_is_tried_again_for_as_long_as_the_manager_is_down() {
        let waits: Vec<u64> = (1..=8)
            .map(|a| cancel_retry_after(a).map_or(0, |d| d.as_secs()))
            .collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 16, 16, 16, 16]);
        // Past the 15 s the five tries used to last, and much later still.
        assert_eq!(cancel_retry_after(1_000), Some(Duration::from_secs(16)));
    }

    /// A site that cannot be reached when a restart lists its reservations is asked again
    /// until it answers.
    #[test]
    fn a_list_of_reservations_is_tried_again_while_the_site_cannot_be_reached() {
        struct Down(Mutex<u32>);
        impl Backend for Down {
            fn submit(&self, _: &SubmitRequest) -> Result<RemoteId, BackendError> {
                unreachable!()
            }
            fn query(&self, _: &[RemoteId]) -> Result<Vec<RemoteState>, BackendError> {
                unreachable!()
            }
            fn cancel(&self, _: &RemoteId) -> Result<(), BackendError> {
                unreachable!()
            }
            fn load(&self) -> Result<SiteLoad, BackendError> {
                unreachable!()
            }
            fn reservations(&self) -> Result<Vec<String>, BackendError> {
                let mut tries = self.0.lock().unwrap();
                *tries += 1;
                match *tries {
                    1 => Err(BackendError::Unavailable("down".into())),
                    _ => Ok(vec!["coalloc-J1-c0-0".into()]),
                }
            }
        }
        let backend = Arc::new(Down(Mutex::new(0)));
        let (tx, rx) = channel();
        reserve(3, ReserveCall::List, backend.clone(), tx);
        match rx.recv_timeout(Duration::from_secs(10)).expect("a report") {
            Msg::Site(Report::Reservation(r)) => assert_eq!(
                r,
                ReserveReport::Found {
                    site: 3,
                    names: Ok(vec!["coalloc-J1-c0-0".into()])
                }
            ),
            _ => panic!("another report"),
        }
        assert_eq!(*backend.0.lock().unwrap(), 2);
    }

    /// A backend that records its submissions and answers at once.
    #[derive(Default)]
    struct Fake {
        parallel: bool,
        submitted: Mutex<Vec<u64>>,
        /// When each load reading was asked for.
        polls: Mutex<Vec<Instant>>,
    }

    impl Backend for Fake {
        fn submit(&self, r: &SubmitRequest) -> Result<RemoteId, BackendError> {
            self.submitted.lock().unwrap().push(r.launch);
            Ok(format!("R{}", r.launch))
        }
        fn query(&self, ids: &[RemoteId]) -> Result<Vec<RemoteState>, BackendError> {
            Ok(vec![RemoteState::Running; ids.len()])
        }
        fn cancel(&self, _: &RemoteId) -> Result<(), BackendError> {
            Ok(())
        }
        fn load(&self) -> Result<SiteLoad, BackendError> {
            self.polls.lock().unwrap().push(Instant::now());
            Ok(SiteLoad::default())
        }
        fn submits_in_parallel(&self) -> bool {
            self.parallel
        }
    }

    /// Submit launches 1..=n through a worker; the reports, as lists of launches.
    fn reports(parallel: bool, n: u64) -> Vec<(bool, Vec<u64>)> {
        let backend = Arc::new(Fake {
            parallel,
            ..Fake::default()
        });
        let (tx, rx) = channel();
        let w = SiteWorker::spawn(0, backend.clone(), None, Duration::from_secs(60), tx);
        for launch in 1..=n {
            w.submit(SubmitRequest {
                launch,
                ..SubmitRequest::default()
            });
        }
        let mut out: Vec<(bool, Vec<u64>)> = Vec::new();
        let mut seen = 0;
        while seen < n {
            match rx.recv_timeout(Duration::from_secs(10)).expect("a report") {
                Msg::Site(Report::Submitted { launch, result, .. }) => {
                    assert_eq!(result.unwrap(), format!("R{launch}"));
                    out.push((false, vec![launch]));
                    seen += 1;
                }
                Msg::Site(Report::SubmittedMany(_, all)) => {
                    let launches: Vec<u64> = all.iter().map(|(l, _)| *l).collect();
                    for (l, r) in all {
                        assert_eq!(r.unwrap(), format!("R{l}"));
                    }
                    seen += launches.len() as u64;
                    out.push((true, launches));
                }
                _ => {}
            }
        }
        drop(w);
        let mut all: Vec<u64> = backend.submitted.lock().unwrap().clone();
        all.sort();
        assert_eq!(all, (1..=n).collect::<Vec<_>>(), "each submitted once");
        out
    }

    #[test]
    fn a_backend_that_starts_launches_one_by_one_gets_bursts_in_order_reported_together() {
        let r = reports(false, 20);
        let mut launches: Vec<u64> = Vec::new();
        for (many, batch) in &r {
            assert!(*many, "one report per burst");
            assert!(batch.windows(2).all(|w| w[0] < w[1]), "in order: {batch:?}");
            launches.extend(batch);
        }
        launches.sort();
        assert_eq!(launches, (1..=20).collect::<Vec<_>>());
    }

    #[test]
    fn a_slow_resource_manager_gets_each_launch_on_a_thread_of_its_own() {
        let r = reports(true, 5);
        assert_eq!(r.len(), 5);
        assert!(r.iter().all(|(many, b)| !many && b.len() == 1));
    }

    /// Submit a launch to a worker polling every `interval` at each of `at` (from the start);
    /// the polls' times, from the start, until `until`.
    fn polls_around(interval: u64, at: &[u64], until: u64) -> Vec<u64> {
        let backend = Arc::new(Fake::default());
        let (tx, _rx) = channel();
        let ms = Duration::from_millis;
        let w = SiteWorker::spawn(0, backend.clone(), None, ms(interval), tx);
        let t0 = Instant::now();
        for (i, a) in at.iter().enumerate() {
            std::thread::sleep((t0 + ms(*a)).saturating_duration_since(Instant::now()));
            w.submit(SubmitRequest {
                launch: i as u64 + 1,
                ..SubmitRequest::default()
            });
        }
        std::thread::sleep((t0 + ms(until)).saturating_duration_since(Instant::now()));
        drop(w);
        let polls = backend.polls.lock().unwrap().clone();
        polls
            .iter()
            .map(|p| p.duration_since(t0).as_millis() as u64)
            .collect()
    }

    #[test]
    fn a_site_is_not_polled_within_an_interval_of_a_launch() {
        // Polls fall due at 0, 150, 300...; the launch at 60 moves the one of 150 to 210 at
        // the earliest (later on a busy machine, never earlier).
        let polls = polls_around(150, &[60], 700);
        assert!(
            !polls.iter().any(|p| (60..210).contains(p)),
            "a poll within 150 ms after the launch at 60: {polls:?}"
        );
        assert!(polls.iter().any(|p| *p >= 210), "polled again: {polls:?}");
    }

    #[test]
    fn a_site_sent_launches_without_pause_is_still_polled() {
        // A launch every 20 ms for a second: each poll waits once, then happens.
        let at: Vec<u64> = (0..50).map(|i| 10 + 20 * i).collect();
        let polls = polls_around(100, &at, 1100);
        let during = polls.iter().filter(|p| (10..1010).contains(*p)).count();
        assert!(during >= 2, "polls while launches flowed: {polls:?}");
    }
}
