//! Parsers of the Slurm client outputs the backend reads: `sbatch --parsable`, `salloc`'s
//! grant or pending line, `squeue -o '%i|%T|%r'`, `scontrol show job -o`, `sinfo -N -o '%N|%C'`,
//! `squeue -o '%C|%j'`, and exit codes. Pure functions over text: no Slurm needed to test
//! them, and a garbled line is a [`ParseError`], never a panic.
//!
//! Formats as observed on Slurm 22.05 (scripts/slurm/README.md): `%C` of sinfo is
//! allocated/idle/other/total CPUs, where "other" holds the CPUs of down or drained nodes;
//! `scontrol` prints `ExitCode=status:signal`, while `squeue --json` gives the raw wait status
//! (768 for `exit 3`). With `-M cluster` the clients add `CLUSTER: name` lines, skipped here.

use std::collections::BTreeMap;
use std::fmt;

/// Output that does not have the expected shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected {what} output: {detail:?}")]
pub struct ParseError {
    /// Which command's output.
    pub what: &'static str,
    /// The offending line (or the whole output).
    pub detail: String,
}

fn bad(what: &'static str, detail: &str) -> ParseError {
    ParseError {
        what,
        detail: detail.chars().take(200).collect(),
    }
}

/// The lines worth reading: non-blank, and not the `CLUSTER: name` banner of `-M`.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("CLUSTER:"))
}

/// Whether `id` looks like a Slurm job id this backend hands out: a positive decimal number
/// without leading zeros (as Slurm prints it, so it compares equal to squeue's `%i`).
pub fn is_job_id(id: &str) -> bool {
    id.len() <= 20
        && id.bytes().all(|b| b.is_ascii_digit())
        && matches!(id.bytes().next(), Some(b'1'..=b'9'))
}

fn is_state_word(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
}

fn number(what: &'static str, field: &str, line: &str) -> Result<u32, ParseError> {
    field.trim().parse().map_err(|_| bad(what, line))
}

/// The job id printed by `sbatch --parsable`: `ID` or, with `-M`, `ID;cluster`.
pub fn sbatch_job_id(stdout: &str) -> Result<String, ParseError> {
    let line = lines(stdout).last().ok_or_else(|| bad("sbatch", stdout))?;
    let id = line.split(';').next().unwrap_or_default().trim();
    if is_job_id(id) {
        Ok(id.to_string())
    } else {
        Err(bad("sbatch", line))
    }
}

/// The job id in `salloc`'s messages: `salloc: Granted job allocation 17` or, when it has
/// to wait, `salloc: Pending job allocation 17`; `None` before either was written. Only
/// whole lines count (the text may be a file salloc is still writing).
pub fn salloc_job_id(text: &str) -> Option<String> {
    let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    lines(whole).find_map(|line| {
        let rest = line.strip_prefix("salloc: ")?;
        let rest = rest
            .strip_prefix("Granted job allocation ")
            .or_else(|| rest.strip_prefix("Pending job allocation "))?;
        let id = rest.trim();
        is_job_id(id).then(|| id.to_string())
    })
}

/// One line of `squeue -h -t all -o '%i|%T|%r'`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueLine {
    pub id: String,
    /// Long state name: `PENDING`, `RUNNING`, `COMPLETED`, `FAILED`, ...
    pub state: String,
    /// Slurm's reason (`None`, `Priority`, `NonZeroExitCode`, ...).
    pub reason: String,
}

/// Parses `squeue -h -o '%i|%T|%r'` output.
pub fn squeue_states(text: &str) -> Result<Vec<QueueLine>, ParseError> {
    lines(text)
        .map(|line| {
            let mut f = line.splitn(3, '|');
            let (id, state, reason) = match (f.next(), f.next(), f.next()) {
                (Some(i), Some(s), Some(r)) => (i.trim(), s.trim(), r.trim()),
                _ => return Err(bad("squeue", line)),
            };
            if id.is_empty() || !is_state_word(state) {
                return Err(bad("squeue", line));
            }
            Ok(QueueLine {
                id: id.to_string(),
                state: state.to_string(),
                reason: reason.to_string(),
            })
        })
        .collect()
}

/// A job's exit as Slurm reports it: the exit status and the signal that ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitCode {
    pub status: u32,
    pub signal: u32,
}

impl ExitCode {
    /// `3:0` (scontrol's `ExitCode=`): exit status 3, no signal.
    pub fn parse(text: &str) -> Result<ExitCode, ParseError> {
        let (status, signal) = text
            .trim()
            .split_once(':')
            .ok_or_else(|| bad("ExitCode", text))?;
        Ok(ExitCode {
            status: number("ExitCode", status, text)?,
            signal: number("ExitCode", signal, text)?,
        })
    }

    /// A raw wait status (what `squeue --json` gives): 768 is `exit 3`, 9 is SIGKILL.
    pub fn from_wait_status(raw: u32) -> ExitCode {
        if raw & 0x7f != 0 {
            ExitCode {
                status: 0,
                signal: raw & 0x7f,
            }
        } else {
            ExitCode {
                status: (raw >> 8) & 0xff,
                signal: 0,
            }
        }
    }

    pub fn is_success(&self) -> bool {
        self.status == 0 && self.signal == 0
    }
}

impl fmt::Display for ExitCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.signal != 0 {
            write!(f, "killed by signal {}", self.signal)
        } else {
            write!(f, "exit code {}", self.status)
        }
    }
}

/// What `scontrol show job -o ID` says of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlJob {
    pub state: String,
    pub reason: Option<String>,
    pub exit: Option<ExitCode>,
}

/// Parses `scontrol show job -o ID`: the line of job `id`, its `JobState=`, `Reason=` and
/// `ExitCode=`. Values never hold spaces for the keys read here; the keys are taken at their
/// first occurrence, and the line must start with `JobId=<id>`.
pub fn scontrol_job(text: &str, id: &str) -> Result<ControlJob, ParseError> {
    let want = format!("JobId={id}");
    let line = lines(text)
        .find(|l| l.split_whitespace().next() == Some(want.as_str()))
        .ok_or_else(|| bad("scontrol", text))?;
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|tok| tok.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
    };
    let state = field("JobState").ok_or_else(|| bad("scontrol", line))?;
    if !is_state_word(state) {
        return Err(bad("scontrol", line));
    }
    let exit = field("ExitCode").map(ExitCode::parse).transpose()?;
    Ok(ControlJob {
        state: state.to_string(),
        reason: field("Reason").map(str::to_string),
        exit,
    })
}

/// CPUs as `sinfo` `%C` gives them: `allocated/idle/other/total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cpus {
    pub allocated: u32,
    pub idle: u32,
    /// Down or drained.
    pub other: u32,
    pub total: u32,
}

impl Cpus {
    pub fn parse(text: &str) -> Result<Cpus, ParseError> {
        let f: Vec<&str> = text.trim().split('/').collect();
        if f.len() != 4 {
            return Err(bad("sinfo %C", text));
        }
        let n = |i: usize| number("sinfo %C", f[i], text);
        Ok(Cpus {
            allocated: n(0)?,
            idle: n(1)?,
            other: n(2)?,
            total: n(3)?,
        })
    }
}

/// Sums `sinfo -h -N -o '%N|%C'`, one line per node and partition, counting each node once
/// (a node in two partitions appears twice). `None` when no node is listed.
pub fn sinfo_nodes(text: &str) -> Result<Option<Cpus>, ParseError> {
    let mut nodes = BTreeMap::new();
    for line in lines(text) {
        let (node, cpus) = line.split_once('|').ok_or_else(|| bad("sinfo", line))?;
        if node.trim().is_empty() {
            return Err(bad("sinfo", line));
        }
        nodes.insert(node.trim().to_string(), Cpus::parse(cpus)?);
    }
    if nodes.is_empty() {
        return Ok(None);
    }
    let sum = nodes.values().fold(Cpus::default(), |a, c| Cpus {
        allocated: a.allocated.saturating_add(c.allocated),
        idle: a.idle.saturating_add(c.idle),
        other: a.other.saturating_add(c.other),
        total: a.total.saturating_add(c.total),
    });
    Ok(Some(sum))
}

/// Sums the CPUs in `squeue -h -o '%C|%j'` of the jobs whose name does not start with
/// `prefix` (jobs that did not come through coalloc). The name is the rest of the line, so
/// a `|` inside a job name is harmless.
pub fn foreign_cpus(text: &str, prefix: &str) -> Result<u32, ParseError> {
    let mut sum = 0u32;
    for line in lines(text) {
        let (cpus, name) = line.split_once('|').ok_or_else(|| bad("squeue", line))?;
        let cpus = number("squeue", cpus, line)?;
        if !name.starts_with(prefix) {
            sum = sum.saturating_add(cpus);
        }
    }
    Ok(sum)
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
