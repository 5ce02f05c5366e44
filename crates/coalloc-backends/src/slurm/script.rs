//! The batch script and the `sbatch` options of one component.
//!
//! The script is a generated `#!/bin/sh` program handed to `sbatch` on standard input. It
//! exports the component's environment, then starts `processes` copies of the executable in
//! the background, each with its per-process variables of the runtime contract
//! (`COALLOC_LOCAL_RANK` = 0.., `COALLOC_RANK` = `COALLOC_RANK_OFFSET` + local rank, see
//! coalloc-runtime), waits for all of them and exits with the first non-zero exit code, so
//! that Slurm marks the job `FAILED` when any process fails. A shell loop rather than
//! `srun`: the ranks need no wrapper, and it runs on any Slurm without MPI support. The
//! processes run on the allocation's first node, where Slurm runs the script; an `mpi`
//! component is one process, its PMI proxy, which spreads the MPI ranks over every node of
//! the allocation itself (`srun`, coalloc-runtime `pmi::spread`).
//!
//! The environment goes into the script rather than into `sbatch`'s own environment: a job
//! variable such as `SBATCH_TIMELIMIT` must not change how `sbatch` itself behaves. Every
//! word is single-quoted, so no value is ever interpreted by the shell.

use crate::SubmitRequest;
use std::fmt::Write as _;
use std::path::Path;

/// Job names of coalloc's components start with this; `load` counts every other job as
/// "other users".
pub const NAME_PREFIX: &str = "coalloc-";

/// A request that cannot be expressed as a batch job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    #[error("{0} holds a NUL byte")]
    Nul(&'static str),
    #[error("environment variable name {0:?} is not a shell identifier")]
    BadName(String),
    #[error("{0} is not valid UTF-8: {1:?}")]
    NotUtf8(&'static str, String),
    #[error("{0} must be at least 1")]
    Zero(&'static str),
}

/// `'text'`, with each `'` written as `'\''`: one shell word, taken literally.
pub fn quote(text: &str, what: &'static str) -> Result<String, ScriptError> {
    if text.contains('\0') {
        return Err(ScriptError::Nul(what));
    }
    Ok(format!("'{}'", text.replace('\'', r"'\''")))
}

fn is_identifier(name: &str) -> bool {
    let mut b = name.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The allocation both launch modes ask for, `-J NAME -n COUNT [-t MINUTES] [-p PARTITION]`
/// (`sbatch` and `salloc` read these options alike); `name` is the launch's job name
/// ([`name_of`]).
pub fn allocation_options(r: &SubmitRequest, name: String, partition: Option<&str>) -> Vec<String> {
    let mut a = vec!["-J".to_owned(), name, "-n".to_owned(), r.count.to_string()];
    if let Some(ms) = r.wall_time_ms {
        a.extend(["-t".to_owned(), time_limit_minutes(ms).to_string()]);
    }
    if let Some(p) = partition {
        a.extend(["-p".to_owned(), p.to_owned()]);
    }
    a
}

/// `--uid=OWNER [--gid=GID]`: sbatch run by root submits the job as the job's owner (issue
/// 20 item 6; root-only options), with the owner's primary group when this host knows it.
pub fn owner_options(r: &SubmitRequest) -> Vec<String> {
    let Some(owner) = &r.owner else {
        return Vec::new();
    };
    let mut a = vec![format!("--uid={owner}")];
    if let Some((_, gid)) = crate::accounts::user_ids(owner) {
        a.push(format!("--gid={gid}"));
    }
    a
}

/// The Slurm job name of one launch, `coalloc-{tag}-J{job}-c{component}-L{launch}` (without
/// a tag `coalloc-J{job}-c{component}-L{launch}`): unique to the launch, so that a submission
/// can be found (and cancelled) by it when its id is unknown. The tag names the server
/// ([`SlurmConfig::name_tag`](super::SlurmConfig::name_tag)): two servers on one cluster
/// number their launches alike.
pub fn name_of(tag: Option<&str>, job: u64, component: usize, launch: u64) -> String {
    match tag {
        Some(tag) => format!("{NAME_PREFIX}{tag}-J{job}-c{component}-L{launch}"),
        None => format!("{NAME_PREFIX}J{job}-c{component}-L{launch}"),
    }
}

/// `sbatch -t` minutes: the wall time rounded up, at least 1 (0 would mean "no limit").
pub fn time_limit_minutes(wall_time_ms: i64) -> i64 {
    let minutes = wall_time_ms.max(0) / 60_000 + i64::from(wall_time_ms.max(0) % 60_000 != 0);
    minutes.max(1)
}

/// A path for `sbatch -o/-e`: `%` doubled, since sbatch expands `%j` and friends there.
pub fn output_path(path: &Path, what: &'static str) -> Result<String, ScriptError> {
    let text = path
        .to_str()
        .ok_or_else(|| ScriptError::NotUtf8(what, path.display().to_string()))?;
    if text.contains('\0') {
        return Err(ScriptError::Nul(what));
    }
    // A backslash turns all replacement off, and then `%%` would stay doubled.
    Ok(if text.contains('\\') {
        text.to_string()
    } else {
        text.replace('%', "%%")
    })
}

/// The batch script of a component.
pub fn batch_script(r: &SubmitRequest) -> Result<String, ScriptError> {
    if r.processes == 0 {
        return Err(ScriptError::Zero("processes"));
    }
    let mut s = String::from("#!/bin/sh\n");
    let _ = writeln!(
        s,
        "# coalloc job {} component {} launch {}: {} process(es)",
        r.job, r.component, r.launch, r.processes
    );
    for (name, value) in &r.environment {
        if !is_identifier(name) {
            return Err(ScriptError::BadName(name.clone()));
        }
        let _ = writeln!(s, "export {name}={}", quote(value, "an environment value")?);
    }
    let mut command = quote(&r.executable, "the executable")?;
    for a in &r.arguments {
        command.push(' ');
        command.push_str(&quote(a, "an argument")?);
    }
    let _ = write!(
        s,
        r#"n={processes}
off=${{COALLOC_RANK_OFFSET:-0}}
i=0
pids=
while [ "$i" -lt "$n" ]; do
  COALLOC_LOCAL_RANK=$i COALLOC_RANK=$((off + i)) {command} </dev/null &
  pids="$pids $!"
  i=$((i + 1))
done
rc=0
for p in $pids; do
  wait "$p"
  s=$?
  [ "$rc" -ne 0 ] || rc=$s
done
exit "$rc"
"#,
        processes = r.processes
    );
    Ok(s)
}

#[cfg(test)]
#[path = "script_tests.rs"]
mod tests;
