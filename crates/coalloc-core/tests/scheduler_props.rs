//! Properties of the scheduling core under random sites, jobs, policies and event
//! interleavings.
//!
//! A small deterministic driver plays the resource managers: per site it keeps the capacity,
//! the processors of local (non-coalloc) jobs and the launches coalloc holds. It answers each
//! `StartComponent` later with an outcome taken from the generated case (started then ready,
//! failed before start, started then failed, ready then finished, ready then failed, or no
//! answer at all when a pending timeout is configured), drops a launch on
//! `CancelComponent` (and, for one the core keeps draining, answers `CancelTaken` later, as
//! one of its actions), answers transfers, and advances time to `next_wakeup()` when it has
//! nothing else to do. After every event it checks:
//!
//! - (a) no site is over-allocated: the processors of live launches plus local jobs never
//!   exceed the site's capacity, the scheduler's idle count never exceeds it, and the
//!   scheduler's count of processors it holds equals the driver's;
//! - (b) no component is started twice: launch ids are unique, a `(job, component)` never has
//!   two live launches, and every live launch is the scheduler's current one for its
//!   component (no orphan holds processors);
//! - (c) `ReleaseBarrier` comes only when every required (and interactive, unless deleted)
//!   component of the run has a launch that reported ready (and is live, or finished after
//!   it was ready), no input transfer of the run is still under way, at most once a run,
//!   and not while a cancelled launch of the job's stopped committed run waits for its
//!   `CancelTaken` (the core's `draining`; the simulation harness, seed 1391);
//! - (d) when a job ends or goes back to its queue, none of its launches is live any more
//!   (the cancels came before the notice), and nothing of it starts after it ended;
//! - (e) determinism: the same case played twice gives the same command sequence;
//! - (f) snapshots (issue 23, item 4): the state restored from a snapshot taken between two
//!   events (written to CBOR bytes and read back), then given the events after it, serializes
//!   to the same bytes as the state given every event from the first, at several cut points;
//!
//! and, at the end, once every site is made healthy, empty and error-free and every launch
//! succeeds: every accepted job ends (liveness). Submissions are checked too: a component
//! larger than its site (or than every site) is refused, an ordered job within its sites and
//! a total job are accepted (unless Close-to-Files finds no replica of its file), and a refused submission gives no command.
//!
//! Queue policies are every name of `QueueConfig::NAMES` that `QueueConfig::from_name`
//! accepts when the test runs; claiming is immediate or ICP with T = 0, 0.5 or 1.
//!
//! The bugs these properties found have minimal cases at the end of this file, kept as
//! regression tests. `PROPTEST_CASES` sets the number of cases (default 256),
//! `COALLOC_PROPS_LOG` the number of log lines a failure shows.

mod common;
use common::{drain as drain_cmds, launches, submit};

use coalloc_core::model::*;
use coalloc_core::placement::Fit;
use coalloc_core::scheduler::jobs::Phase;
use coalloc_core::scheduler::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

// ---------------------------------------------------------------------------------------
// The generated case.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct SiteGen {
    cap: u32,
    /// Holds a replica of the input file `data`.
    file: bool,
}

#[derive(Debug, Clone)]
struct Cfg {
    /// Index into the policy names `QueueConfig::from_name` accepts.
    policy: usize,
    /// 0: immediate; 1, 2, 3: ICP with T = 0, 0.5, 1.
    claiming: u8,
    fit: usize,
    pending_timeout: Option<Millis>,
    interactive_delete: bool,
}

#[derive(Debug, Clone)]
struct CompGen {
    size: u32,
    site: usize,
    start: u8,
    oversize: bool,
}

#[derive(Debug, Clone)]
struct JobGen {
    /// 0: ordered, 1: unordered, 2: total.
    kind: u8,
    comps: Vec<CompGen>,
    high: bool,
    file: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Started, ready, and finished once the barrier is released.
    Ok,
    FailBeforeStart,
    StartedThenFailed,
    /// Ready, then finished without waiting for the barrier.
    ReadyThenFinished,
    /// Started, ready, then failed (before or after the commit).
    ReadyThenFailed,
    /// Never answers (the pending timeout cancels it); `Ok` without a pending timeout.
    Silent,
}

#[derive(Debug, Clone)]
enum Move {
    Submit(JobGen),
    /// Perform the k-th available driver action (a launch's next report or a transfer's end).
    Step(usize),
    /// Let this much time pass.
    Wait(Millis),
    /// Jump to `next_wakeup()`.
    Tick,
    /// Cancel the k-th accepted job.
    Cancel(usize),
    /// Local jobs take this percentage of a site (as far as coalloc leaves room).
    Local(usize, u8),
    Health(usize, bool),
    Usable(usize, bool),
}

#[derive(Debug, Clone)]
struct Case {
    sites: Vec<SiteGen>,
    /// `links[i * n + j]`: bandwidth from site i to site j, bytes per second.
    links: Vec<Option<u64>>,
    cfg: Cfg,
    moves: Vec<Move>,
    /// Launch outcomes, used in turn.
    outcomes: Vec<Outcome>,
    /// Transfer outcomes, used in turn.
    transfers_ok: Vec<bool>,
}

fn policies() -> Vec<&'static str> {
    QueueConfig::NAMES
        .iter()
        .copied()
        .filter(|n| QueueConfig::from_name(n).is_ok())
        .collect()
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        4 => Just(Outcome::Ok),
        1 => Just(Outcome::FailBeforeStart),
        1 => Just(Outcome::StartedThenFailed),
        1 => Just(Outcome::ReadyThenFinished),
        1 => Just(Outcome::ReadyThenFailed),
        1 => Just(Outcome::Silent),
    ]
}

fn job_gen() -> impl Strategy<Value = JobGen> {
    let comp = (1u32..=64, 0usize..6, 0u8..6, prop::bool::weighted(0.05)).prop_map(
        |(size, site, start, oversize)| CompGen {
            size,
            site,
            // Required half the time, interactive and optional a quarter each.
            start: start / 2 % 3,
            oversize,
        },
    );
    (
        0u8..3,
        prop::collection::vec(comp, 1..=4),
        any::<bool>(),
        prop::bool::weighted(0.5),
    )
        .prop_map(|(kind, mut comps, high, file)| {
            if kind == 2 {
                comps.truncate(1);
            }
            JobGen {
                kind,
                comps,
                high,
                file,
            }
        })
}

fn move_gen() -> impl Strategy<Value = Move> {
    prop_oneof![
        3 => job_gen().prop_map(Move::Submit),
        10 => any::<usize>().prop_map(Move::Step),
        2 => prop_oneof![Just(0), 1..2_000i64, 1_000..40_000i64].prop_map(Move::Wait),
        1 => Just(Move::Tick),
        1 => any::<usize>().prop_map(Move::Cancel),
        1 => (0usize..6, 0u8..=100).prop_map(|(s, p)| Move::Local(s, p)),
        1 => (0usize..6, prop::bool::weighted(0.7)).prop_map(|(s, h)| Move::Health(s, h)),
        1 => (0usize..6, prop::bool::weighted(0.7)).prop_map(|(s, u)| Move::Usable(s, u)),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    let n_policies = policies().len();
    (1usize..=6)
        .prop_flat_map(move |n| {
            (
                prop::collection::vec(
                    (1u32..=64, prop::bool::weighted(0.5))
                        .prop_map(|(cap, file)| SiteGen { cap, file }),
                    n,
                ),
                prop::collection::vec(
                    prop::option::weighted(0.6, 100_000_000u64..=1_000_000_000),
                    n * n,
                ),
                (
                    0..n_policies,
                    0u8..4,
                    0usize..Fit::ALL.len(),
                    prop_oneof![Just(None), Just(Some(5_000)), Just(Some(30_000))],
                    any::<bool>(),
                )
                    .prop_map(
                        |(policy, claiming, fit, pending_timeout, interactive_delete)| Cfg {
                            policy,
                            claiming,
                            fit,
                            pending_timeout,
                            interactive_delete,
                        },
                    ),
                prop::collection::vec(move_gen(), 1..=60),
                prop::collection::vec(outcome(), 1..=12),
                prop::collection::vec(prop::bool::weighted(0.8), 1..=6),
            )
        })
        .prop_map(|(sites, links, cfg, moves, outcomes, transfers_ok)| Case {
            sites,
            links,
            cfg,
            moves,
            outcomes,
            transfers_ok,
        })
}

// ---------------------------------------------------------------------------------------
// Turning the case into scheduler input.
// ---------------------------------------------------------------------------------------

fn site_name(i: usize) -> String {
    format!("s{i}")
}

fn build_sites(case: &Case) -> Vec<Site> {
    let n = case.sites.len();
    case.sites
        .iter()
        .enumerate()
        .map(|(i, g)| Site {
            files: if g.file {
                vec!["data".to_owned()]
            } else {
                Vec::new()
            },
            bandwidth: (0..n)
                .filter(|&j| j != i)
                .filter_map(|j| case.links[i * n + j].map(|b| (site_name(j), b)))
                .collect(),
            ..Site::cluster(site_name(i), g.cap)
        })
        .collect()
}

fn build_config(case: &Case) -> SchedulerConfig {
    let name = policies()[case.cfg.policy];
    let claiming = match case.cfg.claiming {
        0 => Claiming::Immediate,
        k => Claiming::Icp(IcpParams {
            t: f64::from(k - 1) / 2.0,
            ..IcpParams::default()
        }),
    };
    SchedulerConfig {
        queue: QueueConfig::from_name(name).expect("only accepted names"),
        fit: Fit::ALL[case.cfg.fit],
        claiming,
        pending_timeout: case.cfg.pending_timeout,
        interactive_default: if case.cfg.interactive_delete {
            InteractiveDefault::Delete
        } else {
            InteractiveDefault::Substitute
        },
        ..SchedulerConfig::default()
    }
}

/// The job, and whether the scheduler must accept it (`Some(true)`), must refuse it
/// (`Some(false)`) or may do either (`None`: an unordered job the heuristic fits may or may
/// not place on empty sites).
fn build_job(g: &JobGen, caps: &[u32], fit: Fit) -> (Job, Option<bool>) {
    let n = caps.len();
    let max = *caps.iter().max().expect("at least one site");
    let kind = [JobKind::Ordered, JobKind::Unordered, JobKind::Total][usize::from(g.kind)];
    let start = [
        StartType::Required,
        StartType::Interactive,
        StartType::Optional,
    ];
    let mut per_site = vec![0u64; n];
    let components: Vec<Component> = g
        .comps
        .iter()
        .map(|c| {
            let (site, cap) = match kind {
                JobKind::Ordered => (Some(c.site % n), caps[c.site % n]),
                _ => (None, max),
            };
            let count = if c.oversize {
                cap + c.size
            } else {
                1 + (c.size - 1) % cap
            };
            if let Some(s) = site {
                per_site[s] += u64::from(count);
            }
            Component {
                count,
                site: site.map(|s| site_name(s).into()),
                start_type: start[usize::from(c.start)],
                ..Component::default()
            }
        })
        .collect();
    let mut job = Job::new(kind, components);
    job.priority = if g.high {
        Priority::High
    } else {
        Priority::Low
    };
    if g.file {
        job.extra_mut().input_file = Some(Box::new(InputFile {
            name: "data".to_owned(),
            size: 2_000_000_000,
            distribution: FileDistribution::Whole,
        }));
    }
    let oversize = g.comps.iter().any(|c| c.oversize);
    let expect = if oversize {
        Some(false)
    } else {
        match kind {
            JobKind::Ordered => Some(per_site.iter().zip(caps).all(|(&a, &c)| a <= u64::from(c))),
            JobKind::Total if !(g.file && fit == Fit::CloseToFiles) => Some(true),
            _ => None,
        }
    };
    (job, expect)
}

// ---------------------------------------------------------------------------------------
// The driver.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    Started,
    Ready,
    Finished,
    /// Finished, but only once the job's barrier was released.
    FinishedAfterRelease,
    Failed,
}

#[derive(Debug)]
struct Live {
    job: JobId,
    comp: usize,
    site: SiteId,
    count: u32,
    started: bool,
    ready: bool,
    plan: VecDeque<Act>,
}

/// What the driver knows about one component in the job's current run.
#[derive(Debug, Clone)]
struct CompRec {
    launch: LaunchId,
    start_type: StartType,
    ready: bool,
    live: bool,
    finished: bool,
    failed: bool,
}

#[derive(Debug, Default)]
struct Run {
    released: bool,
    comps: BTreeMap<usize, CompRec>,
    /// Each component's latest input transfer of this run, and whether it reported.
    transfers: BTreeMap<usize, (TransferId, bool)>,
    /// Components whose interactive failure was reported.
    interactive_failed: BTreeSet<usize>,
}

#[derive(Debug)]
struct Transfer {
    id: TransferId,
    job: JobId,
    comp: usize,
    ok: bool,
}

struct Driver<'c> {
    case: &'c Case,
    s: Scheduler,
    now: Time,
    caps: Vec<u32>,
    local: Vec<u32>,
    healthy: Vec<bool>,
    live: BTreeMap<LaunchId, Live>,
    seen_launches: BTreeSet<LaunchId>,
    transfers: Vec<Transfer>,
    /// Cancels of draining launches not yet answered with `CancelTaken`: launch, job.
    unconfirmed: Vec<(LaunchId, JobId)>,
    runs: BTreeMap<JobId, Run>,
    accepted: Vec<JobId>,
    ended: BTreeSet<JobId>,
    launches_made: usize,
    transfers_made: usize,
    /// After the moves: every new report is a success.
    draining: bool,
    log: Vec<String>,
    /// Every event handed to the scheduler, with its time, for (f).
    events: Vec<(Time, Event)>,
}

type R<T = ()> = Result<T, TestCaseError>;

impl<'c> Driver<'c> {
    fn new(case: &'c Case) -> Driver<'c> {
        let sites = build_sites(case);
        let caps = case.sites.iter().map(|s| s.cap).collect::<Vec<_>>();
        Driver {
            s: Scheduler::new(build_config(case), sites),
            case,
            now: 0,
            local: vec![0; caps.len()],
            healthy: vec![true; caps.len()],
            caps,
            live: BTreeMap::new(),
            seen_launches: BTreeSet::new(),
            transfers: Vec::new(),
            unconfirmed: Vec::new(),
            runs: BTreeMap::new(),
            accepted: Vec::new(),
            ended: BTreeSet::new(),
            launches_made: 0,
            transfers_made: 0,
            draining: false,
            log: Vec::new(),
            events: Vec::new(),
        }
    }

    /// Hand an event to the scheduler, then carry out and check every command it gives.
    fn event(&mut self, e: Event) -> R<Result<Reply, Rejected>> {
        let what = match &e {
            Event::Submit(j) => format!(
                "Submit({} {:?})",
                j.kind,
                j.components
                    .iter()
                    .map(|c| (c.count, c.site.as_deref(), c.start_type.name()))
                    .collect::<Vec<_>>()
            ),
            e => format!("{e:?}"),
        };
        self.events.push((self.now, e.clone()));
        let reply = self.s.handle(self.now, e);
        self.log.push(format!("@{} {what} -> {reply:?}", self.now));
        while let Some(cmd) = self.s.poll_command() {
            self.log.push(format!("{cmd:?}"));
            self.command(cmd)?;
        }
        self.check_state()?;
        Ok(reply)
    }

    fn done(&mut self, e: Event) -> R {
        let what = format!("{e:?}");
        let reply = self.event(e)?;
        prop_assert!(reply.is_ok(), "{what} refused: {reply:?}");
        Ok(())
    }

    fn ours(&self, site: SiteId, started_only: bool) -> u32 {
        self.live
            .values()
            .filter(|l| l.site == site && (l.started || !started_only))
            .map(|l| l.count)
            .sum()
    }

    /// The resource monitor's reading: it sees local jobs and running launches, not pending
    /// ones.
    fn report(&mut self, site: SiteId) -> R {
        let idle = self.caps[site] - self.local[site] - self.ours(site, true);
        self.done(Event::SiteStatus {
            site,
            idle,
            total: self.caps[site],
            healthy: self.healthy[site],
            other: 0,
        })
    }

    fn plan(&mut self) -> VecDeque<Act> {
        let o = if self.draining {
            Outcome::Ok
        } else {
            self.case.outcomes[self.launches_made % self.case.outcomes.len()]
        };
        self.launches_made += 1;
        use Act::*;
        match o {
            Outcome::Silent if self.case.cfg.pending_timeout.is_some() => VecDeque::new(),
            Outcome::Ok | Outcome::Silent => [Started, Ready, FinishedAfterRelease].into(),
            Outcome::FailBeforeStart => [Failed].into(),
            Outcome::StartedThenFailed => [Started, Failed].into(),
            Outcome::ReadyThenFinished => [Ready, Finished].into(),
            Outcome::ReadyThenFailed => [Started, Ready, Failed].into(),
        }
    }

    fn live_of(&self, job: JobId) -> Vec<LaunchId> {
        self.live
            .iter()
            .filter(|(_, l)| l.job == job)
            .map(|(&id, _)| id)
            .collect()
    }

    /// The run ended (re-queued, preempted, ended): check (d) and forget it.
    fn end_run(&mut self, job: JobId, why: &str) -> R {
        let left = self.live_of(job);
        prop_assert!(
            left.is_empty(),
            "(d) job {job} {why} but its launches {left:?} are still live"
        );
        self.runs.remove(&job);
        Ok(())
    }

    fn command(&mut self, cmd: Command) -> R {
        match cmd {
            Command::StartComponent(st) => {
                let (job, comp) = (st.job, st.component);
                prop_assert!(
                    self.seen_launches.insert(st.launch),
                    "(b) launch {} given twice",
                    st.launch
                );
                prop_assert!(
                    !self.ended.contains(&job),
                    "(d) job {job} started a component after it ended"
                );
                let twice = self
                    .live
                    .iter()
                    .find(|(_, l)| l.job == job && l.comp == comp);
                prop_assert!(
                    twice.is_none(),
                    "(b) job {job} component {comp} started as {} while {:?} is live",
                    st.launch,
                    twice.map(|t| t.0)
                );
                prop_assert!(st.site < self.caps.len() && st.count >= 1);
                prop_assert_eq!(st.config.sizes.get(comp).copied(), Some(st.spec.count));
                let plan = self.plan();
                self.live.insert(
                    st.launch,
                    Live {
                        job,
                        comp,
                        site: st.site,
                        count: st.count,
                        started: false,
                        ready: false,
                        plan,
                    },
                );
                self.runs.entry(job).or_default().comps.insert(
                    comp,
                    CompRec {
                        launch: st.launch,
                        start_type: st.spec.start_type,
                        ready: false,
                        live: true,
                        finished: false,
                        failed: false,
                    },
                );
            }
            Command::CancelComponent {
                launch,
                job,
                component,
                site,
            } => {
                let l = self.live.remove(&launch);
                prop_assert!(l.is_some(), "cancel of {launch}, which is not live");
                if self.s.draining().get(launch).is_some() {
                    self.unconfirmed.push((launch, job));
                }
                let l = l.expect("checked");
                prop_assert_eq!((l.job, l.comp, l.site), (job, component, site));
                if let Some(r) = self.runs.get_mut(&job) {
                    if let Some(c) = r.comps.get_mut(&component).filter(|c| c.launch == launch) {
                        c.live = false;
                        // A component that is started again elsewhere gets a new transfer;
                        // the old one no longer feeds the run.
                        r.transfers.remove(&component);
                    }
                }
            }
            Command::ReleaseBarrier { job } => self.check_release(job)?,
            Command::StartTransfer {
                transfer,
                job,
                component,
                ..
            } => {
                let ok = self.draining
                    || self.case.transfers_ok[self.transfers_made % self.case.transfers_ok.len()];
                self.transfers_made += 1;
                self.transfers.push(Transfer {
                    id: transfer,
                    job,
                    comp: component,
                    ok,
                });
                // A new transfer for a component replaces the one before (re-placed).
                self.runs
                    .entry(job)
                    .or_default()
                    .transfers
                    .insert(component, (transfer, false));
            }
            Command::KillLocal { site, processors } => {
                self.local[site] = self.local[site].saturating_sub(processors);
            }
            // Reserve claiming (issue 31) is not generated here: `tests/reserve_props.rs`.
            Command::ReserveQuery { .. } | Command::Reserve { .. } | Command::Unreserve { .. } => {
                prop_assert!(false, "a reservation command, not under reserve claiming");
            }
            Command::Notify(n) => match n {
                Notice::Requeued { job, .. } => self.end_run(job, "was re-queued")?,
                Notice::Preempted { job, .. } => self.end_run(job, "was preempted")?,
                Notice::InteractiveFailed { job, component, .. } => {
                    self.runs
                        .entry(job)
                        .or_default()
                        .interactive_failed
                        .insert(component);
                }
                _ => {}
            },
            Command::LeaseVm { .. } | Command::ReleaseVm { .. } => {
                prop_assert!(false, "no cloud site here, yet {cmd:?}");
            }
            Command::JobFinished { job, .. } | Command::JobFailed { job, .. } => {
                prop_assert!(self.ended.insert(job), "job {job} ended twice");
                self.end_run(job, "ended")?;
            }
        }
        Ok(())
    }

    /// Invariant (c).
    fn check_release(&mut self, job: JobId) -> R {
        let interactive_delete = self.case.cfg.interactive_delete;
        let waiting: Vec<LaunchId> = self
            .unconfirmed
            .iter()
            .filter(|u| u.1 == job)
            .map(|u| u.0)
            .collect();
        prop_assert!(
            waiting.is_empty(),
            "(c) job {job} released while its stopped run's launches {waiting:?} may still run"
        );
        let run = self.runs.entry(job).or_default();
        prop_assert!(!run.released, "(c) job {job} released twice in one run");
        run.released = true;
        prop_assert!(
            !run.comps.is_empty(),
            "(c) job {job} released with nothing started"
        );
        let n = self
            .s
            .job(job)
            .map_or(0, |j| j.job.components.len())
            .max(run.comps.keys().last().map_or(0, |k| k + 1));
        for (i, c) in &run.comps {
            let passed = c.ready && (c.live || c.finished);
            let ok = match c.start_type {
                StartType::Required => passed,
                StartType::Interactive => {
                    passed || (interactive_delete && !c.live && run.interactive_failed.contains(i))
                }
                StartType::Optional => true,
            };
            prop_assert!(
                ok,
                "(c) job {job} released while component {i} ({}) is {c:?}",
                c.start_type
            );
        }
        // Every required component of the run was started: the scheduler's job state has no
        // component the run did not start (but components deleted by an edit, which this
        // driver does not make).
        for i in 0..n {
            if !run.comps.contains_key(&i) {
                let st = self
                    .s
                    .job(job)
                    .and_then(|j| j.job.components.get(i))
                    .map(|c| c.start_type);
                prop_assert!(
                    st == Some(StartType::Optional),
                    "(c) job {job} released but its component {i} ({st:?}) never started"
                );
            }
        }
        // Optional components do not take part in the commit (seed 002 §3.2): neither they
        // nor their files are waited for, unless they already reported ready.
        let waiting: Vec<_> = run
            .transfers
            .iter()
            .filter(|(_, t)| !t.1)
            .filter(|(i, _)| {
                let optional = self
                    .s
                    .job(job)
                    .and_then(|j| j.job.components.get(**i))
                    .is_some_and(|c| c.start_type == StartType::Optional);
                let ready = run.comps.get(i).is_some_and(|c| c.ready);
                !optional || ready
            })
            .collect();
        prop_assert!(
            waiting.is_empty(),
            "(c) job {job} released while the input transfers of components {waiting:?} are \
             under way"
        );
        Ok(())
    }

    /// Invariants (a) and the scheduler/driver agreement of (b), after every event.
    fn check_state(&self) -> R {
        for site in 0..self.caps.len() {
            let cap = self.caps[site];
            let ours = self.ours(site, false);
            prop_assert!(
                ours + self.local[site] <= cap,
                "(a) site {site} over-allocated: {ours} processors of live launches + {} local > {cap}",
                self.local[site]
            );
            let st = self.s.site_state(site).expect("site state");
            prop_assert!(
                st.idle <= cap,
                "(a) site {site}: the scheduler counts {} idle of {cap}",
                st.idle
            );
            prop_assert_eq!(
                st.ours,
                ours,
                "(a) site {}: the scheduler thinks it holds {} processors, the driver runs {}",
                site,
                st.ours,
                ours
            );
            prop_assert!(
                st.idle + ours + self.local[site] <= cap,
                "(a) site {site}: idle {} + ours {ours} + local {} > {cap}",
                st.idle,
                self.local[site]
            );
        }
        for (&id, l) in &self.live {
            let current = self
                .s
                .job(l.job)
                .and_then(|j| j.comps.get(l.comp))
                .filter(|c| c.launch == Some(id) && c.live());
            prop_assert!(
                current.is_some(),
                "(b) launch {id} (job {} component {}) is live but the scheduler forgot it: {:?}",
                l.job,
                l.comp,
                self.s.job(l.job).map(|j| (j.phase, &j.comps))
            );
        }
        for j in self.s.jobs() {
            for (i, c) in j.comps.iter().enumerate() {
                if c.live() {
                    let l = c.launch.and_then(|l| self.live.get(&l));
                    prop_assert!(
                        l.is_some_and(|l| l.job == j.id && l.comp == i),
                        "(b) the scheduler thinks job {} component {i} runs as {:?}, the driver \
                         does not",
                        j.id,
                        c.launch
                    );
                }
            }
        }
        Ok(())
    }

    /// The driver's possible actions now, in a deterministic order.
    fn actions(&self) -> Vec<Action> {
        let mut out: Vec<Action> = self
            .live
            .iter()
            .filter(|(_, l)| match l.plan.front() {
                None => false,
                Some(Act::FinishedAfterRelease) => {
                    self.runs.get(&l.job).is_some_and(|r| r.released)
                }
                Some(_) => true,
            })
            .map(|(&id, _)| Action::Launch(id))
            .collect();
        out.extend((0..self.transfers.len()).map(Action::Transfer));
        out.extend((0..self.unconfirmed.len()).map(Action::CancelTaken));
        out
    }

    fn perform(&mut self, a: Action) -> R {
        match a {
            Action::Launch(id) => {
                let l = self.live.get_mut(&id).expect("an action of a live launch");
                let act = l.plan.pop_front().expect("an action");
                let (job, comp) = (l.job, l.comp);
                if matches!(act, Act::Started | Act::Ready) {
                    l.started = true;
                }
                if act == Act::Ready {
                    l.ready = true;
                }
                match act {
                    Act::Started => {
                        self.done(Event::ComponentStarted { launch: id })?;
                    }
                    Act::Ready => {
                        self.comp_rec(job, comp, id, |c| c.ready = true);
                        self.done(Event::ComponentReady { launch: id })?;
                    }
                    Act::Finished | Act::FinishedAfterRelease => {
                        self.live.remove(&id);
                        self.comp_rec(job, comp, id, |c| {
                            c.live = false;
                            c.finished = true;
                        });
                        self.done(Event::ComponentFinished { launch: id })?;
                    }
                    Act::Failed => {
                        self.live.remove(&id);
                        self.comp_rec(job, comp, id, |c| {
                            c.live = false;
                            c.failed = true;
                        });
                        if let Some(r) = self.runs.get_mut(&job) {
                            if r.comps.get(&comp).is_some_and(|c| c.launch == id) {
                                r.transfers.remove(&comp);
                            }
                        }
                        self.done(Event::ComponentFailed {
                            fault: Fault::Site,
                            launch: id,
                            reason: "the driver says so".to_owned(),
                        })?;
                    }
                }
            }
            Action::CancelTaken(k) => {
                let (launch, _) = self.unconfirmed.remove(k);
                self.done(Event::CancelTaken { launch })?;
            }
            Action::Transfer(k) => {
                // Transfers go on after their run ended: late reports of old runs come too.
                let t = self.transfers.remove(k);
                if let Some(current) = self
                    .runs
                    .get_mut(&t.job)
                    .and_then(|r| r.transfers.get_mut(&t.comp))
                    .filter(|c| c.0 == t.id)
                {
                    current.1 = true;
                }
                self.done(Event::TransferDone {
                    transfer: t.id,
                    ok: t.ok,
                })?;
            }
        }
        Ok(())
    }

    fn comp_rec(&mut self, job: JobId, comp: usize, id: LaunchId, f: impl FnOnce(&mut CompRec)) {
        if let Some(c) = self
            .runs
            .get_mut(&job)
            .and_then(|r| r.comps.get_mut(&comp))
            .filter(|c| c.launch == id)
        {
            f(c);
        }
    }

    fn tick(&mut self) -> R<bool> {
        match self.s.next_wakeup() {
            Some(t) => {
                self.now = self.now.max(t);
                self.done(Event::Tick)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn play(&mut self, m: &Move) -> R {
        let n = self.caps.len();
        match m {
            Move::Submit(g) => {
                let fit = Fit::ALL[self.case.cfg.fit];
                let (job, expect) = build_job(g, &self.caps, fit);
                let before = self.log.len();
                let reply = self.event(Event::Submit(Box::new(job.clone())))?;
                match reply {
                    Ok(Reply::Submitted(id)) => {
                        prop_assert!(
                            expect != Some(false),
                            "a job that can never run was accepted: {job:?}"
                        );
                        self.accepted.push(id);
                    }
                    Ok(other) => prop_assert!(false, "submit answered {other:?}"),
                    Err(e) => {
                        prop_assert!(
                            expect != Some(true),
                            "a job that fits the empty sites was refused ({e}): {job:?}"
                        );
                        prop_assert!(
                            matches!(e, Rejected::Invalid(_)),
                            "refused as {e:?}, not as invalid"
                        );
                        prop_assert_eq!(
                            self.log.len(),
                            before + 1,
                            "a refused submission gave commands"
                        );
                    }
                }
            }
            Move::Step(k) => {
                let actions = self.actions();
                if actions.is_empty() {
                    self.tick()?;
                } else {
                    self.perform(actions[k % actions.len()])?;
                }
            }
            Move::Wait(dt) => {
                self.now += dt;
                self.done(Event::Tick)?;
            }
            Move::Tick => {
                self.tick()?;
            }
            Move::Cancel(k) => {
                if !self.accepted.is_empty() {
                    let job = self.accepted[k % self.accepted.len()];
                    let was_ended = self.ended.contains(&job);
                    let reply = self.event(Event::Cancel { job })?;
                    if was_ended {
                        prop_assert_eq!(reply, Err(Rejected::Ended(job)));
                    } else {
                        prop_assert_eq!(reply, Ok(Reply::Done));
                        prop_assert!(self.ended.contains(&job), "cancelled job {job} did not end");
                    }
                }
            }
            Move::Local(site, pct) => {
                let site = site % n;
                let room = self.caps[site] - self.ours(site, false);
                self.local[site] = (self.caps[site] * u32::from(*pct) / 100).min(room);
                self.report(site)?;
            }
            Move::Health(site, h) => {
                self.healthy[site % n] = *h;
                self.report(site % n)?;
            }
            Move::Usable(site, u) => {
                self.done(Event::SetUsable {
                    site: site % n,
                    usable: *u,
                })?;
            }
        }
        Ok(())
    }

    /// Everything succeeds from now on: every accepted job must end.
    fn drain(&mut self) -> R {
        self.draining = true;
        for l in self.live.values_mut() {
            l.plan = if l.ready {
                [Act::FinishedAfterRelease].into()
            } else {
                [Act::Ready, Act::FinishedAfterRelease].into()
            };
        }
        for t in &mut self.transfers {
            t.ok = true;
        }
        for site in 0..self.caps.len() {
            self.local[site] = 0;
            self.healthy[site] = true;
            self.report(site)?;
            self.done(Event::SetUsable { site, usable: true })?;
        }
        for _ in 0..5_000 {
            if let Some(&a) = self.actions().first() {
                self.perform(a)?;
            } else if !self.tick()? {
                break;
            }
            if self.ended.len() == self.accepted.len() && self.live.is_empty() {
                break;
            }
        }
        let open: Vec<_> = self
            .s
            .jobs()
            .filter(|j| j.phase != Phase::Ended)
            .map(|j| (j.id, j.phase, j.comps.clone()))
            .collect();
        prop_assert!(
            open.is_empty() && self.ended.len() == self.accepted.len(),
            "liveness: with every site free and every launch succeeding, jobs never ended: \
             {open:?} (queued {}, live launches {:?}, next wakeup {:?})",
            self.s.queued(),
            self.live,
            self.s.next_wakeup()
        );
        prop_assert!(self.live.is_empty(), "launches left: {:?}", self.live);
        prop_assert_eq!(self.s.queued(), 0);
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
enum Action {
    Launch(LaunchId),
    Transfer(usize),
    /// Answer the cancel of a draining launch (by its place in `unconfirmed`).
    CancelTaken(usize),
}

/// Play a case; the log of every reply and command.
fn run(case: &Case) -> R<Vec<String>> {
    let mut d = Driver::new(case);
    let result = case
        .moves
        .iter()
        .try_for_each(|m| d.play(m))
        .and_then(|()| d.drain());
    match result.and_then(|()| check_snapshots(case, &d.events, &d.s)) {
        Ok(()) => Ok(d.log),
        // The failure with the events and commands that led to it.
        Err(e) => {
            let keep = std::env::var("COALLOC_PROPS_LOG")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(LOG_TAIL);
            let tail = d.log[d.log.len().saturating_sub(keep)..].join("\n");
            Err(TestCaseError::fail(format!(
                "{e}\n--- the last events and commands ---\n{tail}"
            )))
        }
    }
}

/// The scheduler's state as bytes (CBOR; every collection in it is ordered).
fn state_bytes(s: &Scheduler) -> Vec<u8> {
    let mut out = Vec::new();
    let snap = s
        .snapshot()
        .expect("every policy of the crate can be saved");
    ciborium::into_writer(&snap, &mut out).expect("a state serializes");
    out
}

/// Give `s` an event as the driver did, dropping the commands (they were carried out).
fn feed(s: &mut Scheduler, (at, e): &(Time, Event)) {
    let _ = s.handle(*at, e.clone());
    while s.poll_command().is_some() {}
}

/// (f): a replay of every event gives the state the run ended in, and so does a snapshot
/// taken after event `k` (through bytes) followed by the events after `k`, at about eight
/// cut points.
fn check_snapshots(case: &Case, events: &[(Time, Event)], end: &Scheduler) -> R {
    let want = state_bytes(end);
    let mut full = Scheduler::new(build_config(case), build_sites(case));
    let step = (events.len() / 8).max(1);
    for (k, ev) in events.iter().enumerate() {
        if k % step == 0 {
            let bytes = state_bytes(&full);
            let saved = ciborium::from_reader(&bytes[..]).expect("a snapshot reads back");
            let (mut restored, changes) =
                Scheduler::restore(build_config(case), &build_sites(case), saved).unwrap();
            prop_assert!(
                changes.is_empty(),
                "(f) the same configuration changed {changes:?}"
            );
            prop_assert!(
                state_bytes(&restored) == bytes,
                "(f) restored state differs at {k}"
            );
            events[k..].iter().for_each(|e| feed(&mut restored, e));
            prop_assert!(
                state_bytes(&restored) == want,
                "(f) snapshot after {k} of {} events, then the rest: another state",
                events.len()
            );
        }
        feed(&mut full, ev);
    }
    prop_assert!(
        state_bytes(&full) == want,
        "(f) a full replay gives another state"
    );
    Ok(())
}

/// Log lines a failure shows (`COALLOC_PROPS_LOG` to change).
const LOG_TAIL: usize = 40;

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn scheduler_invariants_hold_under_random_interleavings(case in case()) {
        let first = run(&case)?;
        let second = run(&case)?;
        prop_assert!(first == second, "(e) the same case gave two command sequences");
    }
}

#[test]
fn the_generator_only_uses_policies_from_name_accepts() {
    let names = policies();
    assert!(names.contains(&"fcfs") && names.contains(&"fpfs"));
    for n in names {
        assert!(QueueConfig::from_name(n).is_ok());
    }
}

/// The generator reaches every path the properties are about: a deterministic sample of
/// cases, counting what their commands did.
#[test]
fn the_generated_cases_reach_every_path() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let wanted = [
        "StartComponent",
        "ReleaseBarrier",
        "JobFinished",
        "JobFailed",
        "CancelComponent",
        "CancelTaken",
        "Requeued",
        "could not claim every component",
        "pending timeout",
        "StartTransfer",
        "TransferDone",
        "InteractiveFailed",
        "OptionalFailed",
        "SiteUnusable",
        "Err(Invalid",
    ];
    // Reached, but too rarely to insist on (about 1 case in 250).
    let rare = ["Preempted"];
    let mut seen: BTreeMap<&str, usize> = wanted.iter().chain(&rare).map(|w| (*w, 0)).collect();
    let mut runner = TestRunner::deterministic();
    let strategy = case();
    for _ in 0..512 {
        let case = strategy.new_tree(&mut runner).expect("a case").current();
        let log = run(&case).unwrap_or_else(|e| panic!("{e}\n{case:?}"));
        for line in &log {
            for w in wanted.iter().chain(&rare) {
                if line.contains(w) {
                    *seen.get_mut(w).expect("wanted") += 1;
                }
            }
        }
    }
    eprintln!("{seen:#?}");
    let missing: Vec<_> = seen
        .iter()
        .filter(|(w, &n)| n == 0 && !rare.contains(w))
        .collect();
    assert!(missing.is_empty(), "never reached: {missing:?}");
}

// ---------------------------------------------------------------------------------------
// Minimal cases of the seven bugs the properties found, all fixed; regression tests now.
// ---------------------------------------------------------------------------------------

fn one(count: u32, start_type: StartType) -> Job {
    Job::new(
        JobKind::Total,
        vec![Component {
            count,
            start_type,
            ..Component::default()
        }],
    )
}

/// Bug 1: a job whose every component was deleted went back to the queue with no component,
/// for ever, blocking every job behind it under FCFS.
#[test]
fn deleting_every_component_does_not_requeue_an_empty_job_that_blocks_fcfs() {
    let config = SchedulerConfig {
        interactive_default: InteractiveDefault::Delete,
        ..SchedulerConfig::default()
    };
    let mut s = Scheduler::new(config, vec![Site::cluster("s0", 4)]);
    let (a, cmds) = submit(&mut s, 0, one(4, StartType::Interactive));
    let l = launches(&cmds)[0];
    s.handle(
        1,
        Event::ComponentFailed {
            fault: Fault::Site,
            launch: l,
            reason: "x".into(),
        },
    )
    .unwrap();
    drain_cmds(&mut s);
    let (b, cmds) = submit(&mut s, 2, one(1, StartType::Required));
    let j = s.job(a).unwrap();
    assert!(
        j.phase == Phase::Ended || !j.job.components.is_empty(),
        "job {a} is back in the queue with no component: {:?}",
        j.phase
    );
    assert!(
        !launches(&cmds).is_empty(),
        "job {b} does not start on the idle site"
    );
}

/// Site s0 holds the file `data`; s1 gets it at 100 MB/s: 2 GB take 20 s, so under ICP
/// (L = 0.75) an ordered one-component job on s1 has JST = 20 s and JCT0 = 15 s.
fn icp_with_a_transfer() -> (Scheduler, JobId, LaunchId, TransferId) {
    let (mut s, id, launch, transfer) =
        icp_claimed(InteractiveDefault::Substitute, StartType::Required);
    s.handle(16_000, Event::ComponentReady { launch }).unwrap();
    drain_cmds(&mut s);
    (s, id, launch, transfer)
}

/// [`icp_with_a_transfer`] up to the claim at 15 s, with a component of this start type.
fn icp_claimed(
    interactive_default: InteractiveDefault,
    start_type: StartType,
) -> (Scheduler, JobId, LaunchId, TransferId) {
    let mut sites = vec![Site::cluster("s0", 8), Site::cluster("s1", 8)];
    sites[0].files = vec!["data".into()];
    sites[0].bandwidth.insert("s1".into(), 100_000_000);
    let config = SchedulerConfig {
        claiming: Claiming::Icp(IcpParams::default()),
        interactive_default,
        ..SchedulerConfig::default()
    };
    let mut s = Scheduler::new(config, sites);
    let mut job = Job::new(
        JobKind::Ordered,
        vec![Component {
            count: 4,
            site: Some("s1".into()),
            start_type,
            ..Component::default()
        }],
    );
    job.extra_mut().input_file = Some(Box::new(InputFile {
        name: "data".into(),
        size: 2_000_000_000,
        distribution: FileDistribution::Whole,
    }));
    let (id, cmds) = submit(&mut s, 0, job);
    let transfer = transfers(&cmds, id)[0];
    assert_eq!(s.next_wakeup(), Some(15_000));
    s.handle(15_000, Event::Tick).unwrap();
    let l = launches(&drain_cmds(&mut s));
    assert_eq!(l.len(), 1, "claimed at JCT0");
    (s, id, l[0], transfer)
}

/// Bug 7: a deleted component's transfer still holds the barrier; when that transfer then
/// fails, nothing checks the job again, and it stays in `Starting` for ever with every
/// component deleted and nothing running (no timer, no queue entry).
#[test]
fn a_job_whose_components_are_all_deleted_ends_even_when_a_transfer_fails_late() {
    let (mut s, id, launch, transfer) =
        icp_claimed(InteractiveDefault::Delete, StartType::Interactive);
    // Ready at 16 s; the JST (20 s) passes, the barrier waits for the file.
    s.handle(16_000, Event::ComponentReady { launch }).unwrap();
    s.handle(20_000, Event::Tick).unwrap();
    // The component dies and is deleted; then its transfer reports a failure.
    s.handle(
        21_000,
        Event::ComponentFailed {
            fault: Fault::Site,
            launch,
            reason: "x".into(),
        },
    )
    .unwrap();
    s.handle(
        22_000,
        Event::TransferDone {
            transfer,
            ok: false,
        },
    )
    .unwrap();
    let cmds = drain_cmds(&mut s);
    let j = s.job(id).unwrap();
    assert!(
        j.phase == Phase::Ended || s.next_wakeup().is_some(),
        "job {id} is stuck: {:?} {:?}, {cmds:?}",
        j.phase,
        j.comps
    );
}

fn transfers(cmds: &[Command], of: JobId) -> Vec<TransferId> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::StartTransfer { transfer, job, .. } if *job == of => Some(*transfer),
            _ => None,
        })
        .collect()
}

/// Bug 2: a launch cleared its component's transfer flag, so the barrier did not wait for the
/// file (and a failed transfer of a launched component was ignored).
#[test]
fn a_launch_keeps_its_transfer_and_the_barrier_waits_for_the_file() {
    let (mut s, id, _, _) = icp_with_a_transfer();
    // The JST comes; the file has not arrived (no TransferDone yet).
    s.handle(20_000, Event::Tick).unwrap();
    let cmds = drain_cmds(&mut s);
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, Command::ReleaseBarrier { job } if *job == id)),
        "the barrier was released before the input file arrived: {cmds:?}"
    );
}

/// Bug 6: a failed transfer of a launched component counts the launch failed and gives its
/// processors back, but never tells the driver to cancel it: it keeps running on the site.
#[test]
fn a_failed_transfer_of_a_claimed_component_cancels_its_launch() {
    let (mut s, id, launch, transfer) = icp_with_a_transfer();
    s.handle(
        17_000,
        Event::TransferDone {
            transfer,
            ok: false,
        },
    )
    .unwrap();
    let cmds = drain_cmds(&mut s);
    assert_ne!(
        s.job(id).unwrap().comps[0].launch,
        Some(launch),
        "the component kept running without its input file: {cmds:?}"
    );
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::CancelComponent { launch: l, .. } if *l == launch)),
        "the launch was dropped without a cancel: {cmds:?}"
    );
}

/// Bug 3: the submission check used the configured fit, the first-fit policies their own, so
/// a job could be accepted that they never start.
#[test]
fn a_job_accepted_under_a_first_fit_policy_starts_on_empty_sites() {
    let Ok(queue) = QueueConfig::from_name("ff") else {
        return; // no `ff` policy (yet)
    };
    let config = SchedulerConfig {
        queue,
        fit: Fit::Best,
        ..SchedulerConfig::default()
    };
    let sites = vec![
        Site::cluster("s0", 4),
        Site::cluster("s1", 3),
        Site::cluster("s2", 2),
    ];
    let mut s = Scheduler::new(config, sites);
    // The modified best-fit places 3, 2, 2, 2 on 4 + 3 + 2 processors; first-fit does not
    // (3 and 2 leave 1 + 1 on s0 and s1).
    let job = Job::new(
        JobKind::Unordered,
        [3, 2, 2, 2]
            .into_iter()
            .map(|count| Component {
                count,
                ..Component::default()
            })
            .collect(),
    );
    match s.handle(0, Event::Submit(Box::new(job))) {
        Ok(Reply::Submitted(id)) => assert!(
            !launches(&drain_cmds(&mut s)).is_empty(),
            "job {id} was accepted but does not start on the empty sites: {:?}",
            s.job(id).map(|j| &j.record)
        ),
        Err(Rejected::Invalid(_)) => {}
        other => panic!("{other:?}"),
    }
}

/// Bug 4: a transfer report named only the job and component, so a late report of an old
/// run's transfer was taken for the current run's.
#[test]
fn a_late_transfer_report_of_an_old_run_is_not_taken_for_the_current_one() {
    let mut sites = vec![Site::cluster("s0", 8), Site::cluster("s1", 4)];
    sites[0].files = vec!["data".into()];
    sites[0].bandwidth.insert("s1".into(), 100_000_000);
    let config = SchedulerConfig {
        claiming: Claiming::Icp(IcpParams::default()),
        ..SchedulerConfig::default()
    };
    let mut s = Scheduler::new(config, sites);
    let mut job = Job::new(
        JobKind::Ordered,
        vec![Component {
            count: 4,
            site: Some("s1".into()),
            ..Component::default()
        }],
    );
    job.extra_mut().input_file = Some(Box::new(InputFile {
        name: "data".into(),
        size: 2_000_000_000,
        distribution: FileDistribution::Whole,
    }));
    // Run 1: placed at 0 (JST 20 s); local jobs fill s1 before it can claim; at the JST it
    // goes back to the queue, its transfer still under way.
    let (id, cmds) = submit(&mut s, 0, job);
    let old = transfers(&cmds, id)[0];
    let full = |idle| Event::SiteStatus {
        site: 1,
        idle,
        total: 4,
        healthy: true,
        other: 0,
    };
    s.handle(1_000, full(0)).unwrap();
    for t in [15_000, 18_750, 20_000] {
        s.handle(t, Event::Tick).unwrap();
    }
    let cmds = drain_cmds(&mut s);
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::Notify(Notice::Requeued { job, .. }) if *job == id)),
        "{cmds:?}"
    );
    // Run 2: s1 is free again; the job is placed and its file sent again.
    s.handle(25_000, full(4)).unwrap();
    let cmds = drain_cmds(&mut s);
    assert_eq!(transfers(&cmds, id).len(), 1, "{cmds:?}");
    // The first run's transfer reports now: it failed. It says nothing about run 2's.
    s.handle(
        26_000,
        Event::TransferDone {
            transfer: old,
            ok: false,
        },
    )
    .unwrap();
    let cmds = drain_cmds(&mut s);
    let j = s.job(id).unwrap();
    assert!(
        j.comps[0].transferring() && j.comps[0].site == Some(1),
        "run 2 took run 1's transfer report as its own: {:?}, {cmds:?}, site 1 errors: {}",
        j.comps[0],
        s.site_state(1).unwrap().submit_errors
    );
}

/// Bug 5: cancelling cleared a component's launch but left its phase live.
#[test]
fn an_ended_job_shows_no_live_component() {
    let mut s = Scheduler::new(SchedulerConfig::default(), vec![Site::cluster("s0", 8)]);
    let (id, cmds) = submit(&mut s, 0, one(4, StartType::Required));
    assert_eq!(launches(&cmds).len(), 1);
    s.handle(1, Event::Cancel { job: id }).unwrap();
    let j = s.job(id).unwrap();
    assert_eq!(j.phase, Phase::Ended);
    // The launch was cancelled and its processors given back, but the component still says
    // it is submitted (with no launch).
    assert!(
        j.comps.iter().all(|c| !c.live()),
        "an ended job shows live components: {:?}",
        j.comps
    );
}
