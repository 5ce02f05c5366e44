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
}

/// The plan of `seed`.
pub fn plan(seed: u64) -> Plan {
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
    }
}

impl Plan {
    /// The server's configuration for this plan: its sites (local managers: the harness
    /// stands in for them), short timeouts so that a run ends soon after its faults.
    pub fn config(&self) -> String {
        let mut c = format!(
            "[server]\nmonitor_interval = \"200ms\"\nsample_interval = \"2s\"\nmin_job_age = \"10h\"\nsnapshot_every = {}\n\n",
            self.snapshot_every
        );
        for s in &self.sites {
            c += &format!(
                "[[site]]\nname = \"{}\"\nprocessors = {}\nmanager = {{ type = \"local\" }}\n\n",
                s.name, s.processors
            );
        }
        c += &format!(
            "[scheduler]\npolicy = \"{}\"\nfit = \"worst\"\nbarrier_timeout = \"20s\"\npending_timeout = \"30s\"\nretry_backoff = \"1s\"\nretry_backoff_max = \"8s\"\nsite_probe_after = \"5s\"\nsite_healthy_for = \"1s\"\n",
            self.policy
        );
        c
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
