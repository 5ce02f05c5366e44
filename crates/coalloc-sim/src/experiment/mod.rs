//! Parameter studies (issue "Simulator", part 5): an experiment file ([`spec`]) expands into
//! runs, one per grid point and seed ([`Experiment::runs`]); each run is built ([`build`])
//! and simulated, the runs spread over worker threads ([`run_all`]), and the results come
//! back in run order whatever thread finished first, so the output is deterministic.

pub mod build;
pub mod spec;

use crate::engine::{simulate, JobOutcome, Outcome};
use crate::metrics::Metrics;
use coalloc_core::model::Priority;
use coalloc_core::spec::units::parse_duration;
use spec::{label, set_path, ExperimentDoc, SubsetDoc};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use toml::Value;

/// A parsed experiment file.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// The file as written (grid values are set into copies of it).
    pub raw: Value,
    pub doc: ExperimentDoc,
    /// The file's folder.
    pub base: PathBuf,
}

/// One run: a grid point and a seed.
#[derive(Debug, Clone)]
pub struct Run {
    pub index: usize,
    /// (axis column, value) for every axis.
    pub point: Vec<(String, Value)>,
    pub seed: u64,
    doc: ExperimentDoc,
}

impl Run {
    /// A file-name-safe name (`r007-s3`).
    pub fn name(&self) -> String {
        format!("r{:03}-s{}", self.index, self.seed)
    }

    pub fn doc(&self) -> &ExperimentDoc {
        &self.doc
    }

    /// Cut the run's workload to at most `n` global jobs (a trace to its first `n`, seed
    /// 003's batch to `n`): a quick check that an experiment still runs, not a result.
    pub fn limit_jobs(&mut self, n: usize) {
        let w = &mut self.doc.workload;
        w.jobs = match w.jobs {
            None if w.kind == "swf" => Some(n),
            j => j.map(|j| j.min(n)),
        };
        if w.kind == "seed003" {
            w.count = Some(w.count.unwrap_or(40).min(n));
        }
    }
}

/// What one run gave.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub run: Run,
    /// Every job's metrics, then each subset's (name, metrics).
    pub metrics: Result<(Metrics, Vec<(String, Metrics)>), String>,
}

impl RunResult {
    /// Column names and values: every metric, then `SUBSET.METRIC` for each subset.
    pub fn columns(&self) -> Option<Vec<(String, String)>> {
        self.metrics.as_ref().ok().map(columns)
    }
}

/// Column names and values of one run's metrics ([`measure`]): every metric, then
/// `SUBSET.METRIC` for each subset.
pub fn columns((all, subsets): &(Metrics, Vec<(String, Metrics)>)) -> Vec<(String, String)> {
    let mut cols = all.columns();
    for (name, m) in subsets {
        cols.extend(
            m.columns()
                .into_iter()
                .map(|(k, v)| (format!("{name}.{k}"), v)),
        );
    }
    cols
}

/// The filter of a subset.
fn subset_filter(s: &SubsetDoc) -> Result<impl Fn(&JobOutcome) -> bool, String> {
    let runtime = match &s.runtime {
        Some([a, b]) => Some((
            parse_duration(a).map_err(|e| format!("subset {}: runtime: {e}", s.name))?,
            parse_duration(b).map_err(|e| format!("subset {}: runtime: {e}", s.name))?,
        )),
        None => None,
    };
    let priority = match s.priority.as_deref() {
        None => None,
        Some("high") => Some(Priority::High),
        Some("low") => Some(Priority::Low),
        Some(other) => {
            return Err(format!(
                "subset {}: priority \"{other}\" is not high or low",
                s.name
            ))
        }
    };
    let (size, components) = (s.size.clone(), s.components.clone());
    Ok(move |j: &JobOutcome| {
        runtime.is_none_or(|(a, b)| j.runtime >= a && j.runtime < b)
            && priority.is_none_or(|p| j.priority == p)
            && size.as_ref().is_none_or(|v| v.contains(&j.size))
            && components
                .as_ref()
                .is_none_or(|v| v.contains(&j.components))
    })
}

/// Every metric of one outcome: all jobs, then each subset.
pub fn measure(
    doc: &ExperimentDoc,
    out: &Outcome,
) -> Result<(Metrics, Vec<(String, Metrics)>), String> {
    let mut subsets = Vec::new();
    for s in &doc.subset {
        let keep = subset_filter(s)?;
        subsets.push((s.name.clone(), Metrics::of_jobs(out, &keep)));
    }
    Ok((Metrics::of(out), subsets))
}

impl Experiment {
    /// Parse an experiment file's text (`path` names it in errors and sets the base folder).
    pub fn parse(text: &str, path: &Path) -> Result<Experiment, String> {
        let raw: Value = text
            .parse::<toml::Table>()
            .map(Value::Table)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let doc: ExperimentDoc =
            toml::from_str(text).map_err(|e| format!("{}: {e}", path.display()))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        for sub in &doc.subset {
            let _check = subset_filter(sub).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let exp = Experiment { raw, doc, base };
        // Check every grid point now, so a bad value fails before hours of runs: one seed,
        // and a workload cut to one job, so the check stays quick.
        let runs = exp.runs()?;
        let first_seed = runs.first().map(|r| r.seed);
        let traces = build::TraceCache::default();
        for run in runs.iter().filter(|r| Some(r.seed) == first_seed) {
            let mut doc = run.doc.clone();
            doc.workload.jobs = match doc.workload.jobs {
                // A trace is read only as far as its first job (not twice in whole).
                None if doc.workload.kind == "swf" => Some(1),
                n => n.map(|n| n.min(1)),
            };
            doc.workload.count = doc.workload.count.map(|n| n.min(1));
            build::build_with(&doc, run.seed, &exp.base, &traces)
                .map_err(|e| format!("{}: {}{e}", path.display(), point_label(&run.point)))?;
        }
        Ok(exp)
    }

    /// Every run: the grid's points in order (the first axis varies slowest), each with
    /// every seed (the file's, or its axes' `seeds`), `seed_key` set to the seed.
    pub fn runs(&self) -> Result<Vec<Run>, String> {
        let seeds = self.doc.seeds.as_ref().map_or(vec![1], |s| s.list());
        if seeds.is_empty() {
            return Err("seeds: give at least one".to_owned());
        }
        // A point is the index of its value on every axis.
        let mut points: Vec<Vec<usize>> = vec![Vec::new()];
        for axis in &self.doc.grid {
            if axis.values.is_empty() {
                return Err(format!("grid `{}`: no values", axis.key));
            }
            if let Some(n) = &axis.seeds {
                if n.len() != axis.values.len() || n.contains(&0) {
                    return Err(format!(
                        "grid `{}`: seeds must give a count of at least 1 for each of its {} values",
                        axis.key,
                        axis.values.len()
                    ));
                }
            }
            if let Some(l) = &axis.labels {
                if l.len() != axis.values.len() {
                    return Err(format!(
                        "grid `{}`: {} labels for {} values",
                        axis.key,
                        l.len(),
                        axis.values.len()
                    ));
                }
            }
            points = points
                .into_iter()
                .flat_map(|p| {
                    (0..axis.values.len()).map(move |i| {
                        let mut q = p.clone();
                        q.push(i);
                        q
                    })
                })
                .collect();
        }
        let mut runs = Vec::new();
        for point in points {
            let mut raw = self.raw.clone();
            if let Value::Table(t) = &mut raw {
                t.remove("grid");
                t.remove("plot");
            }
            let columns: Vec<(String, Value)> = point
                .iter()
                .zip(&self.doc.grid)
                .map(|(&i, axis)| (axis.column().to_owned(), Value::String(axis.label(i))))
                .collect();
            for (&i, axis) in point.iter().zip(&self.doc.grid) {
                for (key, v) in axis.settings(i)? {
                    set_path(&mut raw, &key, v).map_err(|e| format!("grid {e}"))?;
                }
            }
            let counts = point
                .iter()
                .zip(&self.doc.grid)
                .filter_map(|(&i, axis)| axis.seeds.as_ref().map(|n| n[i]));
            let point_seeds = counts
                .max()
                .map_or_else(|| seeds.clone(), |n| (1..=n).collect());
            for seed in point_seeds {
                let mut raw = raw.clone();
                if let Some(key) = &self.doc.seed_key {
                    let v = Value::Integer(i64::try_from(seed).map_err(|e| e.to_string())?);
                    set_path(&mut raw, key, v).map_err(|e| format!("seed_key {e}"))?;
                }
                let doc: ExperimentDoc = raw
                    .try_into()
                    .map_err(|e| format!("{}{e}", point_label(&columns)))?;
                runs.push(Run {
                    index: runs.len(),
                    point: columns.clone(),
                    seed,
                    doc,
                });
            }
        }
        Ok(runs)
    }
}

fn point_label(point: &[(String, Value)]) -> String {
    if point.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = point
        .iter()
        .map(|(k, v)| format!("{k} = {}", label(v)))
        .collect();
    format!("at {}: ", parts.join(", "))
}

/// Simulate one run.
pub fn run_one(run: &Run, base: &Path) -> Result<Outcome, String> {
    run_one_with(run, base, &build::TraceCache::default())
}

/// [`run_one`], reading traces through `traces` (shared by the runs of one experiment).
pub fn run_one_with(run: &Run, base: &Path, traces: &build::TraceCache) -> Result<Outcome, String> {
    let input = build::build_with(&run.doc, run.seed, base, traces)?;
    simulate(input.sites, input.config, input.workload, &input.params).map_err(|e| e.to_string())
}

/// Simulate every run on `threads` workers. `done` is called (from the workers) after each
/// run with its outcome, e.g. to write its per-job log and move a progress bar.
pub fn run_all(
    runs: &[Run],
    base: &Path,
    threads: usize,
    done: &(dyn Fn(&Run, Option<&Outcome>) + Sync),
) -> Vec<RunResult> {
    let next = AtomicUsize::new(0);
    let traces = build::TraceCache::default();
    let results: Mutex<Vec<Option<RunResult>>> = Mutex::new(vec![None; runs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1).min(runs.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(run) = runs.get(i) else {
                    break;
                };
                let outcome = run_one_with(run, base, &traces);
                done(run, outcome.as_ref().ok());
                let metrics = outcome.and_then(|o| measure(&run.doc, &o));
                let mut r = results.lock().unwrap_or_else(|e| e.into_inner());
                r[i] = Some(RunResult {
                    run: run.clone(),
                    metrics,
                });
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An axis's `seeds` gives each value's points their own seed count (the rest keep the
    /// file's one seed), and `seed_key` hands each run's seed to the configuration: seed 004's
    /// RND dispatch runs several times, its deterministic RR once.
    #[test]
    fn axis_seeds_and_seed_key_repeat_only_the_random_points() {
        let dir = std::env::temp_dir().join(format!("coalloc-exp-seeds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("t.swf"),
            "1 0 0 100 4 -1 -1 4 1000 -1 1 1 1 -1 -1 -1 -1 -1\n",
        )
        .unwrap();
        let text = "name = \"t\"\nseed_key = \"scheduler.tags.seed\"\n\
            [[site]]\nname = \"a\"\nprocessors = 8\n[[site]]\nname = \"b\"\nprocessors = 8\n\
            [scheduler]\npolicy = \"tags-chain\"\n\
            [scheduler.tags]\nchains = [[\"a\", \"b\"]]\nlimits = [\"1m\"]\n\
            [workload]\nkind = \"swf\"\ntrace = \"t.swf\"\n\
            [[grid]]\nkey = \"scheduler.tags.dispatch\"\nvalues = [\"rr\", \"random\"]\n\
            seeds = [1, 3]\n";
        let exp = Experiment::parse(text, &dir.join("e.toml")).unwrap();
        let runs = exp.runs().unwrap();
        let got: Vec<(String, u64, Option<u64>)> = runs
            .iter()
            .map(|r| {
                let tags = r.doc().scheduler.tags.as_ref().unwrap();
                (tags.dispatch.clone().unwrap(), r.seed, tags.seed)
            })
            .collect();
        let want = |d: &str, s: u64| (d.to_owned(), s, Some(s));
        assert_eq!(
            got,
            vec![
                want("rr", 1),
                want("random", 1),
                want("random", 2),
                want("random", 3)
            ]
        );
        let bad = text.replace("seeds = [1, 3]", "seeds = [1]");
        let err = Experiment::parse(&bad, &dir.join("e.toml")).unwrap_err();
        assert!(err.contains("seeds must give a count"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
