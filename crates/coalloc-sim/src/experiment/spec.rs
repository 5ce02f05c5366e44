//! The experiment file (`coalloc sim EXPERIMENT.toml`): sites, scheduler, workload and
//! simulator settings, a grid of parameter values, seeds, and the plots to draw.
//!
//! ```toml
//! name = "lp-sweep"
//! seeds = 5                       # seeds 1..=5, or a list [1, 7, 9]
//! seed_key = "scheduler.tags.seed" # set to each run's seed (a policy's own RNG)
//!
//! [[site]]                        # as in a sites file
//! name = "c0"
//! processors = 32
//!
//! [scheduler]                     # as in a configuration file
//! policy = "rpp"
//!
//! [workload]
//! kind = "seed001"                # seed001 seed000 seed003 swf
//! jobs = 2000
//! arrival_rate = 0.002            # λg (or `load`, the requested global load Ug)
//! [workload.local]                # local jobs on every site (seed 001 §2.1)
//! load = 0.3                      # or arrival_rate = λl
//!
//! [sim]
//! start_latency = "2s"
//! start_failure = 0.05
//!
//! [[grid]]                        # every combination of every axis, times every seed
//! key = "scheduler.rpp.lp"        # a dotted path into this file
//! values = [0.1, 0.5, 0.9]
//! seeds = [1, 1, 10]              # optional: seeds 1..=n for each value's points
//!
//! [[subset]]                      # metrics of some jobs only, columns `short.METRIC`
//! name = "short"
//! runtime = [0, "25m"]            # also: size = [36], components = [3, 4], priority = "high"
//!
//! [cluster]                      # optional: run the grid as a Slurm job array
//! partition = "main"              # also slurm_conf, time_limit, sbatch_args, task_prefix, poll
//!
//! [[plot]]
//! file = "success"
//! x = "scheduler.rpp.lp"
//! y = ["success_rate"]
//! series = "workload.local.load"  # one line per value of another axis
//! log_y = true                    # logarithmic y axis (also log_x)
//! ```

use coalloc_core::spec::scheduler::SchedulerDoc;
use coalloc_core::spec::sites::SiteDoc;
use coalloc_core::spec::units::Scalar;
use serde::Deserialize;
use toml::Value;

/// The whole file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExperimentDoc {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub seeds: Option<Seeds>,
    /// A dotted path set to each run's seed, for randomness that the configuration seeds
    /// rather than the simulator (`scheduler.tags.seed`: RND dispatch across chains).
    #[serde(default)]
    pub seed_key: Option<String>,
    /// Output folder, relative to the file; default `results`.
    #[serde(default)]
    pub output: Option<String>,
    #[serde(default)]
    pub site: Vec<SiteDoc>,
    #[serde(default)]
    pub scheduler: SchedulerDoc,
    pub workload: WorkloadDoc,
    #[serde(default)]
    pub sim: SimDoc,
    #[serde(default)]
    pub grid: Vec<Axis>,
    #[serde(default)]
    pub plot: Vec<PlotDoc>,
    /// Subsets of the jobs whose metrics get their own columns, `NAME.METRIC`.
    #[serde(default)]
    pub subset: Vec<SubsetDoc>,
    /// Write one JSON line per job of every run (`jobs/RUN.jsonl`).
    #[serde(default)]
    pub jobs_jsonl: bool,
    /// Run the grid as a Slurm job array instead of on this machine (`coalloc sim`'s
    /// `--slurm`; `--local` overrides the table).
    #[serde(default)]
    pub cluster: Option<ClusterDoc>,
}

/// `[cluster]`: where and how the grid's runs go to Slurm, one array task per run. Every
/// path the tasks use (the `coalloc` binary, the experiment file and its inputs, the
/// output folder) must be reachable at the same path on the compute nodes.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct ClusterDoc {
    /// `sbatch -p`.
    #[serde(default)]
    pub partition: Option<String>,
    /// The cluster's `slurm.conf` (as `SLURM_CONF` of every Slurm command), relative to the
    /// experiment file; default: the environment's.
    #[serde(default)]
    pub slurm_conf: Option<String>,
    /// `sbatch -t`, in Slurm's words (`30`, `2:00:00`, `1-0`).
    #[serde(default)]
    pub time_limit: Option<String>,
    /// More `sbatch` options, one word each (`["--qos=low", "--mem=2G"]`).
    #[serde(default)]
    pub sbatch_args: Vec<String>,
    /// A command each task runs `coalloc` under (`["nice", "-n", "10"]`, a container
    /// runner): its words, then the `coalloc` command line.
    #[serde(default)]
    pub task_prefix: Vec<String>,
    /// How often to ask Slurm whether the array has ended (default `"2s"`).
    #[serde(default)]
    pub poll: Option<String>,
}

/// How many seeds, or which.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Seeds {
    Count(u64),
    List(Vec<u64>),
}

impl Seeds {
    pub fn list(&self) -> Vec<u64> {
        match self {
            Seeds::Count(n) => (1..=*n).collect(),
            Seeds::List(v) => v.clone(),
        }
    }
}

/// The workload. Which keys apply depends on `kind`; the others must be absent.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct WorkloadDoc {
    pub kind: String,
    /// seed001, seed000, swf (first N trace jobs): how many jobs.
    pub jobs: Option<usize>,
    /// seed001, seed000: Poisson arrival rate, jobs per second.
    pub arrival_rate: Option<f64>,
    /// seed001: the requested global load Ug instead of the arrival rate.
    pub load: Option<f64>,
    /// seed001: μg (per second).
    pub service_rate: Option<f64>,
    /// seed001: "realistic" (default) or "uniform" component sizes.
    pub sizes: Option<String>,
    /// seed001: the Realistic Synthetic Distribution's q (default 0.9).
    pub q: Option<f64>,
    /// seed001: smallest component size (default 4).
    pub min_size: Option<u32>,
    /// seed001: deadline after submission, uniform on [min, max] seconds.
    pub deadline: Option<[u32; 2]>,
    /// seed003: "ordered", "unordered" or "mixed".
    pub batch: Option<String>,
    /// seed003: processors per component (4 components per job).
    pub size: Option<u32>,
    /// seed003: jobs in the batch (default 40).
    pub count: Option<usize>,
    /// seed003: every job's runtime.
    pub runtime: Option<Scalar>,
    /// seed003: when the batch is submitted (default 0); later than 0 lets the other
    /// users' jobs of `[workload.local]` reach their steady load first.
    pub at: Option<Scalar>,
    /// swf: the trace file, relative to the experiment file.
    pub trace: Option<String>,
    /// swf: drop jobs larger than this.
    pub max_procs: Option<u32>,
    /// swf: split each job into this many components.
    pub split: Option<u32>,
    /// swf: split each job into components of at most this size.
    pub max_component: Option<u32>,
    /// Local jobs on every site.
    pub local: Option<LocalDoc>,
}

/// Local jobs of every site (seed 001 §2.1).
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct LocalDoc {
    /// λl per site, jobs per second.
    pub arrival_rate: Option<f64>,
    /// The requested local load Ul instead (λl = Ul · μl · N / E\[Sl\]).
    pub load: Option<f64>,
    /// μl (default 0.01).
    pub service_rate: Option<f64>,
    /// q of the sizes on [1, N] (default 0.9).
    pub q: Option<f64>,
    /// Local jobs keep arriving until this time (default: the last workload arrival; a
    /// batch that arrives at once needs it to have local jobs beside it).
    pub until: Option<Scalar>,
}

/// The simulated sites' behaviour and the injected faults.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct SimDoc {
    pub start_latency: Option<Scalar>,
    pub monitor_interval: Option<Scalar>,
    /// Default bandwidth between sites, bytes per second.
    pub bandwidth: Option<Scalar>,
    pub start_failure: Option<f64>,
    pub mtbf: Option<Scalar>,
    pub transfer_failure: Option<f64>,
    /// Probability that a cloud VM lease fails (seed 004 §III-B's provisioning).
    pub lease_failure: Option<f64>,
    #[serde(default)]
    pub outages: Vec<OutageDoc>,
    pub reenable_after_outage: Option<bool>,
    /// Agent links that fall silent and come back (`[[sim.link_losses]]`).
    #[serde(default)]
    pub link_losses: Vec<LinkLossDoc>,
    pub sample_interval: Option<Scalar>,
    pub window_end: Option<Scalar>,
    /// Give up when the core still has work but nothing else can happen this long after the
    /// last arrival (the jobs left count as unfinished); default 365 days. Seed 004's whole
    /// traces on one or two chains need longer to drain their backlog.
    pub give_up_after: Option<Scalar>,
}

/// A site outage.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OutageDoc {
    pub site: String,
    pub from: Scalar,
    pub to: Scalar,
}

/// An agent site's link falling silent from `from` to `to`; the core counts the site lost
/// once it has been silent for `grace` (default 60 s).
///
/// ```toml
/// [[sim.link_losses]]
/// site = "s1"
/// from = "10m"
/// to = "40m"
/// grace = "1m"
/// ```
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkLossDoc {
    pub site: String,
    pub from: Scalar,
    pub to: Scalar,
    pub grace: Option<Scalar>,
}

/// A subset of the jobs (every given condition must hold), e.g. short jobs, or seed 000's
/// jobs of size 36, of high priority, of 4 components.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct SubsetDoc {
    /// Column prefix.
    pub name: String,
    /// Real runtime in [min, max).
    pub runtime: Option<[Scalar; 2]>,
    /// Total processors, one of these.
    pub size: Option<Vec<u64>>,
    /// Number of components, one of these.
    pub components: Option<Vec<usize>>,
    /// "high" or "low".
    pub priority: Option<String>,
}

/// One axis of the grid.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Axis {
    /// A dotted path into the file (`workload.arrival_rate`, `scheduler.rpp.lp`,
    /// `site.0.processors`).
    pub key: String,
    /// More paths set together with `key` (linked axes): every value is then a list of one
    /// value for `key` followed by one for each of these, e.g. a site list and the chains
    /// over it.
    #[serde(default)]
    pub with: Vec<String>,
    pub values: Vec<Value>,
    /// A short column name for the CSV and plots (default: the key).
    pub name: Option<String>,
    /// Labels for the values in the CSV and plots (default: the values themselves).
    pub labels: Option<Vec<String>>,
    /// How many seeds (1..=n) the points with each value run, one number per value, in
    /// place of the file's `seeds`: `[1, 1, 10]` runs only the points of a random policy
    /// (the third value) ten times. A point whose axes give several counts runs the largest.
    #[serde(default)]
    pub seeds: Option<Vec<u64>>,
}

impl Axis {
    pub fn column(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.key)
    }

    /// The (path, value) settings of value `i`.
    pub fn settings(&self, i: usize) -> Result<Vec<(String, Value)>, String> {
        let v = &self.values[i];
        if self.with.is_empty() {
            return Ok(vec![(self.key.clone(), v.clone())]);
        }
        let keys = std::iter::once(&self.key).chain(&self.with);
        match v {
            Value::Array(parts) if parts.len() == self.with.len() + 1 => {
                Ok(keys.cloned().zip(parts.iter().cloned()).collect())
            }
            _ => Err(format!(
                "grid `{}`: value {} must be a list of {} values (for {} and {})",
                self.key,
                i + 1,
                self.with.len() + 1,
                self.key,
                self.with.join(", ")
            )),
        }
    }

    /// The label of value `i`.
    pub fn label(&self, i: usize) -> String {
        match self.labels.as_ref().and_then(|l| l.get(i)) {
            Some(l) => l.clone(),
            None => label(&self.values[i]),
        }
    }
}

/// One plot: metrics (mean over seeds) against one axis.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct PlotDoc {
    /// File name without extension (`.svg` and `.png` are written).
    pub file: String,
    pub title: Option<String>,
    /// The axis on the x axis (its key or name).
    pub x: String,
    /// Metric names (columns of the CSV); one line each.
    pub y: Vec<String>,
    /// Another axis: one line per value of it (with a single metric).
    pub series: Option<String>,
    /// Keep only runs whose axes have these values.
    #[serde(default, rename = "where")]
    pub filter: toml::Table,
    pub x_label: Option<String>,
    pub y_label: Option<String>,
    /// Multiply the metric values (e.g. 100 for percentages).
    pub scale: Option<f64>,
    #[serde(default)]
    pub log_x: bool,
    /// A logarithmic y axis, as in seed 004's figures 3–6 (points with y ≤ 0 are left out).
    #[serde(default)]
    pub log_y: bool,
    /// Where the legend goes: "upper-right" (default), "upper-left", "lower-left",
    /// "lower-right", "middle-right".
    pub legend: Option<String>,
}

/// Set `path` (dotted; numeric segments index arrays) in `doc` to `value`, making tables on
/// the way.
pub fn set_path(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let mut cur = doc;
    let parts: Vec<&str> = path.split('.').collect();
    for (k, part) in parts.iter().enumerate() {
        let last = k + 1 == parts.len();
        cur = match cur {
            Value::Table(t) => {
                if last {
                    t.insert((*part).to_owned(), value);
                    return Ok(());
                }
                t.entry((*part).to_owned())
                    .or_insert_with(|| Value::Table(toml::Table::new()))
            }
            Value::Array(a) => {
                let i: usize = part.parse().map_err(|_| {
                    format!("`{path}`: `{part}` indexes a list and must be a number")
                })?;
                let len = a.len();
                let slot = a
                    .get_mut(i)
                    .ok_or_else(|| format!("`{path}`: index {i} is past the list's {len} items"))?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                slot
            }
            _ => return Err(format!("`{path}`: `{part}` is inside a value, not a table")),
        };
    }
    Err(format!("`{path}`: empty key"))
}

/// A value as a short label (`0.5`, `gp`, `[1, 2]`).
pub fn label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
