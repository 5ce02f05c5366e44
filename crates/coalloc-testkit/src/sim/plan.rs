//! What a seed makes: the sites and their resource managers' habits, the workload (every
//! job's components, runtime, cancel), and the faults, all drawn from one ChaCha stream so
//! that a seed is the whole run.

use coalloc_core::model::Time;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The virtual clock's start: any fixed time will do (milliseconds, like the wall clock's).
pub const T0: Time = 1_800_000_000_000;

/// How a site's resource manager behaves.
#[derive(Debug, Clone)]
pub struct SitePlan {
    pub name: String,
    pub processors: u32,
    /// Other users' processors, held all along.
    pub other: u32,
    /// A granted launch waits this long (ms, drawn per launch) before it runs: 0 for a
    /// local pool, up to seconds for a Slurm-like queue.
    pub pending: (Time, Time),
    /// Per mille of submissions refused (the manager's error, the site's fault).
    pub refuse: u32,
    /// Per mille of running launches the manager loses (a node dies).
    pub lose: u32,
    /// Per mille of submissions whose answer is lost on the way back: the manager took the
    /// launch, the server hears a time-out.
    pub lost_answer: u32,
    /// Reached through an agent over the simulated network (`super::agent`), not directly.
    pub agent: Option<AgentPlan>,
    /// It may make advance reservations (`reserve = "true"`), and how (issue 31).
    pub reserve: Option<ReservePlan>,
}

/// A site's advance reservations: the manager's `reserve_ahead` and `start_delay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReservePlan {
    /// It takes a reservation only this long (ms) before its window.
    pub ahead: Option<Time>,
    /// Its window begins this long (ms) before the common start.
    pub start_delay: Option<Time>,
}

/// How a site's agent behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentPlan {
    /// Heartbeat stop: the agent stops its launches after this long without the server.
    pub stop_after: Option<Time>,
}

/// The network between the server and its agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetPlan {
    /// A frame takes this long (ms, drawn per frame; a connection keeps its frames' order).
    pub delay: (Time, Time),
    /// Per mille of frames whose loss resets their connection (a TCP reset).
    pub loss: u32,
    /// The agent sites' `manager.grace`.
    pub grace: Time,
    /// `server.heartbeat`.
    pub heartbeat: Time,
}

/// One component of a planned job.
#[derive(Debug, Clone)]
pub struct CompPlan {
    pub count: u32,
    /// `multiple` (one process per processor, each checks in) or `single`.
    pub multiple: bool,
    /// `required`, `interactive` or `optional` (seed 002 §3.2).
    pub start: &'static str,
    /// Its site, in an ordered job.
    pub site: Option<usize>,
}

/// The job kinds of seed 003 §3.2.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Unordered,
    Ordered,
    /// One component on one site.
    Total,
    /// Only a total, split by the scheduler into components of at least `min`.
    Flexible {
        total: u32,
        min: u32,
    },
}

/// An edit the client makes to a job before its commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditPlan {
    Add,
    Delete(usize),
    Substitute(usize),
}

/// One planned job.
#[derive(Debug, Clone)]
pub struct JobPlan {
    pub at: Time,
    pub comps: Vec<CompPlan>,
    /// How long its processes run once released.
    pub runtime: Time,
    /// The client cancels it then, if it is still there.
    pub cancel_at: Option<Time>,
    pub kind: Kind,
    /// Held at the barrier until the client commits it (`hold_at_barrier`), from then on.
    pub commit_at: Option<Time>,
    pub edit: Option<(Time, EditPlan)>,
    /// Submitted as an array of this many elements (1: a plain job).
    pub array: u32,
    /// Its input file (an index of [`Plan::files`]).
    pub input: Option<usize>,
    /// It asks for advance reservation (`reserve = true`), no earlier than this start if
    /// one is given (issue 31).
    pub reserve: Option<Option<Time>>,
}

/// A logical file registered at the start, that jobs take as their input.
#[derive(Debug, Clone)]
pub struct FilePlan {
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// The sites holding a replica.
    pub sites: Vec<usize>,
}

/// A fault at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The server's process dies between two turns and is restarted `down` ms later from
    /// its journal.
    Crash { down: Time },
    /// The server dies in the middle of a commit: the turn's entries never reach the disk.
    CutCommit { down: Time },
    /// A site's resource manager stops answering for `length` ms.
    ManagerDown { site: usize, length: Time },
    /// Processes of launches started in the next `length` ms never check in.
    Mute { length: Time },
    /// The server dies in the middle of its next snapshot, after the temporary file and
    /// before the rename, and is restarted `down` ms later.
    CutSnapshot { down: Time },
    /// Nothing crosses between the server and the agent of `site` for `length` ms.
    Partition { site: usize, length: Time },
    /// The agent of `site` dies and is restarted `down` ms later (its record of launches
    /// kept; its launches run on at the manager).
    AgentCrash { site: usize, down: Time },
    /// The resource manager of `site` answers but fails every cancel for `length` ms (a
    /// cancel slower than the backend's wait: `scancel` timing out on a busy controller).
    SlowCancels { site: usize, length: Time },
    /// Transfers started in the next `length` ms are cut half-way (the bytes that came
    /// stay in the part file, and the next transfer of the file there sends the rest).
    CutTransfers { length: Time },
    /// The leader is frozen, or cut off with its lease's renewals stalled (issue 32): a
    /// standby takes the journal's lease when it runs out and takes over; the deposed
    /// leader comes back `back` ms after the takeover, unaware, and runs on until its
    /// first write is refused or, at the latest, `exit` ms later (its renewal hears that it
    /// was deposed; `sim::failover`). With `split`, it waits for the leader's next turn
    /// that submits two or more components of one job to agent sites, and strikes in the
    /// middle of it: the turn's agent calls go out one at a time, and the leader is cut
    /// off after the first of such a job's submissions left (the rest never leave it).
    Failover { back: Time, exit: Time, split: bool },
}

/// Everything a seed makes.
#[derive(Debug, Clone)]
pub struct Plan {
    pub seed: u64,
    pub sites: Vec<SitePlan>,
    pub jobs: Vec<JobPlan>,
    pub faults: Vec<(Time, Fault)>,
    /// No fault after this.
    pub faults_end: Time,
    /// `server.snapshot_every` (0: none).
    pub snapshot_every: u64,
    pub policy: &'static str,
    pub net: NetPlan,
    /// Input files (registered at the start).
    pub files: Vec<FilePlan>,
    /// Without agent sites and input files (`classic`): the plans before the agents came.
    pub classic: bool,
    /// Made by [`with_files`].
    pub with_files: bool,
    /// Made by [`failover`].
    pub failover: bool,
    /// Made by [`policies`].
    pub policies: bool,
    /// `server.min_job_age`: ended jobs leave the server's memory, and their launches are
    /// discarded at their managers, this long after their end (`None`: never within a
    /// run, the plans before discards were checked).
    pub min_job_age: Option<Time>,
}

/// The plan of `seed`: [`classic`]'s, with some sites made agent sites and the network's
/// faults added, drawn from a stream of their own (so a seed's workload stays the same).
pub fn plan(seed: u64) -> Plan {
    let mut p = classic(seed);
    p.classic = false;
    agents(&mut p);
    aging(&mut p);
    slow_cancels(&mut p);
    reservations(&mut p);
    p
}

/// Sites that may reserve, some taking reservations only so far ahead and some starting a
/// component a while into its window, and jobs that ask for reservation (some from a start
/// of their own), in about half the seeds, drawn from a stream of their own (issue 31).
/// Only jobs the reserving sites can hold ask (another is refused at submission, rightly),
/// with a wall time, so that their windows are as long as they run.
fn reservations(p: &mut Plan) {
    let mut r = ChaCha8Rng::seed_from_u64(p.seed ^ 0x7e5e_7a71_0e5e);
    if !r.random_bool(0.5) {
        return;
    }
    let n = p.sites.len();
    let first = r.random_range(0..n);
    for (i, s) in p.sites.iter_mut().enumerate() {
        if i == first || r.random_bool(0.6) {
            s.reserve = Some(ReservePlan {
                ahead: r.random_bool(0.3).then(|| r.random_range(1_000..20_000)),
                start_delay: r.random_bool(0.5).then(|| r.random_range(0..3_000)),
            });
        }
    }
    let may: Vec<usize> = (0..n).filter(|i| p.sites[*i].reserve.is_some()).collect();
    for j in &mut p.jobs {
        if !r.random_bool(0.3) {
            continue;
        }
        // Every component fits any site when empty ([`classic`]).
        let fits = match j.kind {
            Kind::Ordered => j
                .comps
                .iter()
                .all(|c| c.site.is_some_and(|s| may.contains(&s))),
            Kind::Unordered => j.comps.len() <= may.len(),
            Kind::Total => true,
            Kind::Flexible { .. } => false,
        };
        if fits {
            j.reserve = Some(r.random_bool(0.4).then(|| j.at + r.random_range(0..20_000)));
        }
    }
}

/// Managers of direct sites that fail cancels for a while, in about a third of the seeds,
/// drawn from a stream of their own (an agent site's `AgentCalls` gives a failed cancel up
/// after five tries: not yet played).
fn slow_cancels(p: &mut Plan) {
    let mut r = ChaCha8Rng::seed_from_u64(p.seed ^ 0x005c_a9ce_15ed);
    let direct: Vec<usize> = (0..p.sites.len())
        .filter(|i| p.sites[*i].agent.is_none())
        .collect();
    if direct.is_empty() || !r.random_bool(0.35) {
        return;
    }
    for _ in 0..r.random_range(1..=2) {
        let at = T0 + r.random_range(0..p.faults_end - T0);
        let site = direct[r.random_range(0..direct.len())];
        let length = r.random_range(2_000..40_000);
        p.faults.push((at, Fault::SlowCancels { site, length }));
    }
    p.faults.sort_by_key(|(t, _)| *t);
}

/// How soon ended jobs leave the server's memory, drawn from a stream of its own (so a
/// seed's other draws stay the same): within a run, so that every launch's discard is due
/// before its end ([`super::check`]'s discard check).
fn aging(p: &mut Plan) {
    let mut r = ChaCha8Rng::seed_from_u64(p.seed ^ 0x00a6_e00f_d15c);
    p.min_job_age = Some(r.random_range(500..=10_000));
}

/// [`plan`]'s, with input files for about a third of the seeds (`--files`; `cargo test`
/// runs those of the first 500 that have them).
pub fn with_files(seed: u64) -> Plan {
    let mut p = plan(seed);
    p.with_files = true;
    inputs(&mut p);
    p
}

/// [`plan`]'s, with one or two fail-overs of the leader to a standby (`--failover`, issue
/// 32), drawn from a stream of their own (so the seed's other draws stay the same).
pub fn failover(seed: u64) -> Plan {
    let mut p = plan(seed);
    p.failover = true;
    let mut r = ChaCha8Rng::seed_from_u64(p.seed ^ 0xfa11_0fe7);
    // Whether each fail-over splits a turn: a stream of its own, so that the other draws
    // stay as they were.
    let mut q = ChaCha8Rng::seed_from_u64(p.seed ^ 0x5b11_7c07);
    for _ in 0..r.random_range(1..=2) {
        let at = T0 + r.random_range(0..p.faults_end - T0);
        let back = [0, r.random_range(0..500), r.random_range(0..5_000)][r.random_range(0..3)];
        let exit = r.random_range(0..1_000);
        let split = q.random_bool(0.5);
        p.faults.push((at, Fault::Failover { back, exit, split }));
    }
    p.faults.sort_by_key(|(t, _)| *t);
    p
}

/// The queue policies [`policies`] draws from: every one the server runs
/// ([`QueueConfig::NAMES`](coalloc_core::scheduler::QueueConfig::NAMES), so a new policy
/// joins by itself) but those [`classic`] draws (FCFS, FPFS, EASY) and SJF-ideal (it reads
/// the true runtimes, which a server does not know).
pub fn other_policies() -> Vec<&'static str> {
    coalloc_core::scheduler::QueueConfig::NAMES
        .iter()
        .copied()
        .filter(|n| !["fcfs", "fpfs", "easy", "sjf-ideal"].contains(n))
        .collect()
}

/// [`plan`]'s, under a queue policy drawn from [`other_policies`] (`--policies`): the
/// backfilling that reserves for every job, KOALA's placement queues (seed 000), the
/// pre-emptive policy of seed 001 and the period-driven policies of seed 004 (HSDF, and TAGS killing a job at its runtime limit
/// and queueing it again further on), under the same faults. Drawn from a stream of its
/// own, so the seed's other draws stay the same; [`Plan::config`] gives the policy its
/// tables.
///
/// TAGS runs a job on the sites of its level only (one site each, here), first in first
/// out: a job that cannot fit on a level's site blocks that level for good, rightly. So
/// under TAGS every job fits on any one site next to its local load (at most that many
/// processors in all, no component pinned to a site, no edit that adds one), and none asks
/// for advance reservation (a killed job moves on to a level whose site may take none).
pub fn policies(seed: u64) -> Plan {
    let mut p = plan(seed);
    p.policies = true;
    let mut r = ChaCha8Rng::seed_from_u64(p.seed ^ 0x9011_c1e5);
    let names = other_policies();
    p.policy = names[r.random_range(0..names.len())];
    if p.policy.starts_with("tags") {
        let room = p
            .sites
            .iter()
            .map(|s| s.processors - s.other)
            .min()
            .unwrap_or(1);
        for j in &mut p.jobs {
            if let Kind::Flexible { total, min } = &mut j.kind {
                *total = (*total).min(room);
                *min = (*min).min(*total);
            }
            if j.kind == Kind::Ordered {
                j.kind = Kind::Unordered;
            }
            j.edit = None;
            j.reserve = None;
            for c in &mut j.comps {
                c.site = None;
            }
            while j.comps.iter().map(|c| c.count).sum::<u32>() > room {
                if let Some(c) = j.comps.iter_mut().max_by_key(|c| c.count) {
                    c.count -= 1;
                }
            }
        }
    }
    p
}

/// Input files, the jobs that take them, and cut transfers, for about a third of the seeds.
fn inputs(p: &mut Plan) {
    let mut r = ChaCha8Rng::seed_from_u64(p.seed ^ 0xf11e_5eed);
    if !r.random_bool(0.35) {
        return;
    }
    let n = p.sites.len();
    p.files = (0..r.random_range(1..=2))
        .map(|i| {
            let first = r.random_range(0..n);
            let mut sites = vec![first];
            if r.random_bool(0.4) {
                sites.push((first + r.random_range(1..n)) % n);
            }
            FilePlan {
                name: format!("f{i}"),
                size: r.random_range(1_000_000..2_000_000_000),
                sites,
            }
        })
        .collect();
    for j in &mut p.jobs {
        if r.random_bool(0.4) {
            j.input = Some(r.random_range(0..p.files.len()));
        }
    }
    for _ in 0..r.random_range(0..=2) {
        let at = T0 + r.random_range(0..p.faults_end - T0);
        let length = r.random_range(500..10_000);
        p.faults.push((at, Fault::CutTransfers { length }));
    }
    p.faults.sort_by_key(|(t, _)| *t);
}

/// Agent sites and their faults, for about half the seeds.
fn agents(p: &mut Plan) {
    let mut r = ChaCha8Rng::seed_from_u64(p.seed ^ 0xa6e7_0057_e5e7);
    if !r.random_bool(0.5) {
        return;
    }
    let grace = [2_000, 5_000, 10_000][r.random_range(0..3)];
    p.net = NetPlan {
        delay: (1, [5, 30, 200][r.random_range(0..3)]),
        loss: [0, 0, 2, 10][r.random_range(0..4)],
        grace,
        heartbeat: [500, 1_000][r.random_range(0..2)],
    };
    let n = p.sites.len();
    let first = r.random_range(0..n);
    for (i, s) in p.sites.iter_mut().enumerate() {
        if i == first || r.random_bool(0.4) {
            s.agent = Some(AgentPlan {
                stop_after: r.random_bool(0.3).then(|| grace * r.random_range(1..=2)),
            });
        }
    }
    let agents: Vec<usize> = (0..n).filter(|i| p.sites[*i].agent.is_some()).collect();
    for _ in 0..r.random_range(0..=3) {
        let at = T0 + r.random_range(0..p.faults_end - T0);
        let site = agents[r.random_range(0..agents.len())];
        let f = if r.random_bool(0.6) {
            // Shorter and longer than the grace.
            Fault::Partition {
                site,
                length: r.random_range(200..grace * 3),
            }
        } else {
            Fault::AgentCrash {
                site,
                down: r.random_range(0..10_000),
            }
        };
        p.faults.push((at, f));
    }
    p.faults.sort_by_key(|(t, _)| *t);
}

/// The plan of `seed` as it was before agent sites: every site reached directly.
pub fn classic(seed: u64) -> Plan {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    let n_sites = r.random_range(2..=4);
    let sites: Vec<SitePlan> = (0..n_sites)
        .map(|i| {
            let processors = r.random_range(4..=16);
            let queue = r.random_bool(0.5);
            SitePlan {
                name: format!("s{i}"),
                processors,
                other: r.random_range(0..=processors / 4),
                pending: if queue {
                    (50, r.random_range(100..3000))
                } else {
                    (0, 10)
                },
                refuse: [0, 0, 20, 100][r.random_range(0..4)],
                lose: [0, 0, 10, 50][r.random_range(0..4)],
                lost_answer: [0, 0, 10, 50][r.random_range(0..4)],
                agent: None,
                reserve: None,
            }
        })
        .collect();
    // Every job fits the sites when they are empty (else it would wait for ever, rightly).
    let room = sites
        .iter()
        .map(|s| s.processors - s.other)
        .min()
        .unwrap_or(1);
    let n_jobs = r.random_range(3..=25);
    let span = r.random_range(5_000..60_000);
    let jobs = (0..n_jobs)
        .map(|_| {
            let at = T0 + r.random_range(0..span);
            let kind = match r.random_range(0..10) {
                0..=5 => Kind::Unordered,
                6 => Kind::Ordered,
                7 | 8 => Kind::Total,
                _ => {
                    let min = r.random_range(1..=room.min(2));
                    Kind::Flexible {
                        total: r.random_range(min..=(room * n_sites as u32).clamp(min, 8)),
                        min,
                    }
                }
            };
            let n_comps = match kind {
                Kind::Total | Kind::Flexible { .. } => 1,
                _ => r.random_range(1..=n_sites.min(3)),
            };
            let comps: Vec<CompPlan> = (0..n_comps)
                .map(|i| CompPlan {
                    count: r.random_range(1..=room.min(4)),
                    multiple: r.random_bool(0.6),
                    start: match (i, r.random_range(0..10)) {
                        (0, _) | (_, 0..=7) => "required",
                        (_, 8) => "interactive",
                        _ => "optional",
                    },
                    site: (kind == Kind::Ordered).then_some(i % n_sites),
                })
                .collect();
            let array = if r.random_bool(0.1) {
                r.random_range(2..=4)
            } else {
                1
            };
            let plain = array == 1;
            let flexible = matches!(kind, Kind::Flexible { .. });
            JobPlan {
                at,
                runtime: r.random_range(500..20_000),
                cancel_at: r.random_bool(0.1).then(|| at + r.random_range(0..10_000)),
                kind,
                commit_at: (plain && r.random_bool(0.1)).then(|| at + r.random_range(0..8_000)),
                edit: (plain && !flexible && r.random_bool(0.1)).then(|| {
                    let e = match r.random_range(0..3) {
                        0 => EditPlan::Add,
                        1 => EditPlan::Delete(r.random_range(0..n_comps)),
                        _ => EditPlan::Substitute(r.random_range(0..n_comps)),
                    };
                    (at + r.random_range(0..5_000), e)
                }),
                array,
                comps,
                input: None,
                reserve: None,
            }
        })
        .collect();
    let faults_end = T0 + span + r.random_range(0..30_000);
    let n_faults = r.random_range(0..=5);
    let mut faults: Vec<(Time, Fault)> = (0..n_faults)
        .map(|_| {
            let at = T0 + r.random_range(0..faults_end - T0);
            let f = match r.random_range(0..10) {
                0..=3 => Fault::Crash {
                    down: r.random_range(0..5_000),
                },
                4..=5 => Fault::CutCommit {
                    down: r.random_range(0..5_000),
                },
                6..=8 => Fault::ManagerDown {
                    site: r.random_range(0..n_sites),
                    length: r.random_range(500..20_000),
                },
                _ => Fault::Mute {
                    length: r.random_range(500..5_000),
                },
            };
            (at, f)
        })
        .collect();
    let snapshot_every = [0, 0, 7, 50][r.random_range(0..4)];
    let policy = ["fcfs", "fpfs", "easy"][r.random_range(0..3)];
    // Drawn last, so that every draw above, and so every seed's plan before this fault came,
    // stays as it was.
    if snapshot_every > 0 && r.random_bool(0.5) {
        let at = T0 + r.random_range(0..faults_end - T0);
        let down = r.random_range(0..5_000);
        faults.push((at, Fault::CutSnapshot { down }));
    }
    faults.sort_by_key(|(t, _)| *t);
    Plan {
        seed,
        sites,
        jobs,
        faults,
        faults_end,
        snapshot_every,
        policy,
        net: NetPlan::default(),
        files: Vec::new(),
        classic: true,
        with_files: false,
        failover: false,
        policies: false,
        min_job_age: None,
    }
}

impl Plan {
    /// The flags that make this plan again, besides its seed.
    pub fn flags(&self) -> &'static str {
        match (self.classic, self.with_files, self.failover, self.policies) {
            (true, ..) => " --classic",
            (false, true, ..) => " --files",
            (false, false, true, _) => " --failover",
            (false, false, false, true) => " --policies",
            (false, false, false, false) => "",
        }
    }

    /// The server's configuration for this plan: its sites (local managers: the harness
    /// stands in for them), short timeouts so that a run ends soon after its faults. A
    /// draining launch's cancel goes again every 5 s (`recancel_interval`, the server's 30
    /// s): the plans' processes end by themselves within 20 s of their release, so at 30 s
    /// no repeated cancel was ever sent in the first 500 seeds of the plans, `--policies`
    /// or not; at 5 s some are, with the crashes, replays and lossy links around them.
    pub fn config(&self) -> String {
        let mut c = format!(
            "[server]\nmonitor_interval = \"200ms\"\nsample_interval = \"2s\"\nmin_job_age = \"{}\"\nsnapshot_every = {}\n\n",
            self.min_job_age
                .map_or_else(|| "10h".to_string(), |t| format!("{t}ms")),
            self.snapshot_every
        );
        if self.sites.iter().any(|s| s.agent.is_some()) {
            c = c.replace(
                "[server]\n",
                &format!(
                    "[server]\nagent_bind = \"sim.invalid:7443\"\nheartbeat = \"{}ms\"\n",
                    self.net.heartbeat
                ),
            );
        }
        let reserving = self.sites.iter().any(|s| s.reserve.is_some());
        for s in &self.sites {
            let mut manager = match s.agent {
                Some(_) => format!("type = \"agent\", grace = \"{}ms\"", self.net.grace),
                None => "type = \"local\"".into(),
            };
            // A local site may reserve unless it says not (`may_reserve`).
            if reserving {
                manager += &format!(", reserve = \"{}\"", s.reserve.is_some());
            }
            if let Some(rp) = s.reserve {
                if let Some(t) = rp.ahead {
                    manager += &format!(", reserve_ahead = \"{t}ms\"");
                }
                if let Some(t) = rp.start_delay {
                    manager += &format!(", start_delay = \"{t}ms\"");
                }
            }
            c += &format!(
                "[[site]]\nname = \"{}\"\nprocessors = {}\nmanager = {{ {manager} }}\n",
                s.name, s.processors
            );
            // With input files: every site reaches every other (seed 000 §2.6).
            if !self.files.is_empty() {
                let to: Vec<String> = self
                    .sites
                    .iter()
                    .filter(|o| o.name != s.name)
                    .map(|o| format!("{} = \"100MB\"", o.name))
                    .collect();
                c += &format!("bandwidth = {{ {} }}\n", to.join(", "));
            }
            c += "\n";
        }
        c += &format!(
            "[scheduler]\npolicy = \"{}\"\nfit = \"{}\"\nbarrier_timeout = \"20s\"\npending_timeout = \"30s\"\nrecancel_interval = \"5s\"\nretry_backoff = \"1s\"\nretry_backoff_max = \"8s\"\nsite_probe_after = \"5s\"\nsite_healthy_for = \"1s\"\n",
            self.policy,
            // Close-to-Files places with the input files (seed 000 §2.5).
            if self.files.is_empty() { "worst" } else { "ctf" }
        );
        // The Incremental Claiming Policy transfers them (seed 000 §3.2): immediate
        // claiming starts no transfer.
        if !self.files.is_empty() {
            c += "claiming = \"icp\"\n";
        }
        c + &self.policy_tables()
    }

    /// The tables of a periodic policy (seed 000 §3.1, seed 004 §IV): a short period or
    /// scan interval, so that a run is not mostly waiting for it. With KOALA's 4-minute
    /// scan, 6 of the first 300 seeds still had jobs queued 40 minutes after their last
    /// fault: the plans' jobs are of low priority, and KOALA scans the low queue once per
    /// S = 2 scans of the high one, so every 12 minutes. With every job of high priority
    /// (scanned twice in three scans) only seed 277 did, on a link that kept dropping to
    /// the end. TAGS's chain (or decreasing sets) over the sites in order, with runtime
    /// limits that kill about half the jobs at least once (jobs run 0.5 to 20 s).
    fn policy_tables(&self) -> String {
        let names: Vec<String> = self
            .sites
            .iter()
            .map(|s| format!("\"{}\"", s.name))
            .collect();
        let limits: Vec<&str> = ["3s", "8s", "15s"][..names.len() - 1].to_vec();
        let limits = format!(
            "limits = [{}]\n",
            limits
                .iter()
                .map(|l| format!("\"{l}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
        match self.policy {
            "ff" | "rr" | "sjf" | "hsdf" => "\n[scheduler.koala_c]\nperiod = \"2s\"\n".into(),
            "koala" => "\n[scheduler.koala]\nscan_interval = \"2s\"\n".into(),
            // Global jobs' priority over local ones would kill local jobs, which an agent
            // site cannot (the server refuses the configuration, rightly).
            "rpp" if self.sites.iter().any(|s| s.agent.is_some()) => {
                "\n[scheduler.rpp]\npriority = \"lp\"\n".into()
            }
            "tags-chain" => format!(
                "\n[scheduler.tags]\nperiod = \"2s\"\nchains = [[{}]]\n{limits}",
                names.join(", ")
            ),
            "tags-sets" => {
                let sets: Vec<String> = (0..names.len())
                    .map(|i| format!("[{}]", names[i..].join(", ")))
                    .collect();
                format!(
                    "\n[scheduler.tags]\nperiod = \"2s\"\nsets = [{}]\n{limits}",
                    sets.join(", ")
                )
            }
            _ => String::new(),
        }
    }

    /// The job spec of planned job `i` (TOML): each component runs `sim RUNTIME`.
    pub fn job_toml(&self, i: usize) -> String {
        let j = &self.jobs[i];
        let mut t = format!("name = \"j{i}\"\n");
        match j.kind {
            Kind::Unordered => {}
            Kind::Ordered => t += "kind = \"ordered\"\n",
            Kind::Total => t += "kind = \"total\"\n",
            Kind::Flexible { total, min } => {
                t += &format!("kind = \"flexible\"\ntotal = {total}\nmin_component = {min}\n")
            }
        }
        if j.commit_at.is_some() {
            t += "hold_at_barrier = true\n";
        }
        if let Some(start) = j.reserve {
            t += &format!(
                "reserve = true\nmax_wall_time = \"{}ms\"\n",
                j.runtime + super::rm::DEFAULT_WALL
            );
            // Whole seconds since the epoch.
            if let Some(s) = start {
                t += &format!("start = {}\n", (s + 999) / 1000);
            }
        }
        if let Some(f) = j.input.map(|f| &self.files[f]) {
            t += &format!("\n[input_file]\nname = \"{}\"\nsize = {}\n", f.name, f.size);
        }
        for c in &j.comps {
            t += &format!(
                "\n[[component]]\njob_type = \"{}\"\nexecutable = \"sim\"\narguments = [\"{}\"]\n",
                if c.multiple { "multiple" } else { "single" },
                j.runtime
            );
            if !matches!(j.kind, Kind::Flexible { .. }) {
                t += &format!("count = {}\nstart_type = \"{}\"\n", c.count, c.start);
            }
            if let Some(s) = c.site {
                t += &format!("site = \"{}\"\n", self.sites[s].name);
            }
        }
        t
    }
}
