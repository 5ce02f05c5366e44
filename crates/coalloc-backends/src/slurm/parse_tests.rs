//! Unit tests of the Slurm output parsers, on outputs copied from Slurm 22.05 on the rig
//! (scripts/slurm/) and on garbled variants of them.

use super::*;

#[test]
fn sbatch_parsable_ids() {
    assert_eq!(sbatch_job_id("17\n").unwrap(), "17");
    assert_eq!(sbatch_job_id("42;alpha\n").unwrap(), "42");
    assert!(sbatch_job_id("").is_err());
    assert!(sbatch_job_id("Submitted batch job 17\n").is_err());
    assert!(sbatch_job_id("-3\n").is_err());
}

#[test]
fn salloc_grant_and_pending_lines() {
    assert_eq!(
        salloc_job_id("salloc: Granted job allocation 17\n").as_deref(),
        Some("17")
    );
    let waiting =
        "salloc: Pending job allocation 9\nsalloc: job 9 queued and waiting for resources\n";
    assert_eq!(salloc_job_id(waiting).as_deref(), Some("9"));
    // Not yet written, half written, an error, or a step's message mentioning a job.
    assert_eq!(salloc_job_id(""), None);
    assert_eq!(salloc_job_id("salloc: Granted job allocation "), None);
    assert_eq!(salloc_job_id("salloc: Granted job allocation 1"), None);
    assert_eq!(
        salloc_job_id("salloc: error: Job submit/allocate failed: Requested node configuration is not available\n"),
        None
    );
    assert_eq!(
        salloc_job_id("srun: error: alpha-1: task 0: Exited with exit code 3\n"),
        None
    );
    assert_eq!(salloc_job_id("salloc: Granted job allocation 0x1\n"), None);
}

#[test]
fn job_ids() {
    assert!(is_job_id("1"));
    assert!(is_job_id("123456"));
    assert!(!is_job_id(""));
    assert!(!is_job_id("1,2"));
    assert!(!is_job_id("12_3"));
    assert!(!is_job_id("-1"));
    assert!(!is_job_id("0"));
    assert!(!is_job_id("017"));
    assert!(!is_job_id("999999999999999999999999"));
}

#[test]
fn squeue_lines() {
    let out = "1|FAILED|NonZeroExitCode\n2|RUNNING|None\n\n3|PENDING|Priority\n";
    let v = squeue_states(out).unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(
        v[0],
        QueueLine {
            id: "1".into(),
            state: "FAILED".into(),
            reason: "NonZeroExitCode".into()
        }
    );
    assert_eq!(v[2].state, "PENDING");
    assert_eq!(v[2].reason, "Priority");
    // A reason may contain the separator; only the first two split.
    assert_eq!(squeue_states("4|PENDING|a|b").unwrap()[0].reason, "a|b");
    // -M banner lines are skipped.
    assert_eq!(
        squeue_states("CLUSTER: alpha\n5|COMPLETED|None\n")
            .unwrap()
            .len(),
        1
    );
    assert!(squeue_states("").unwrap().is_empty());
}

#[test]
fn garbled_squeue_lines_are_errors() {
    for out in [
        "1|RUNNING",
        "garbage",
        "|RUNNING|None",
        "1|running|None",
        "1||None",
        "1|RUN NING|None",
    ] {
        let e = squeue_states(out).unwrap_err();
        assert_eq!(e.what, "squeue", "{out}");
    }
}

const SCONTROL: &str = "JobId=1 JobName=x UserId=root(0) GroupId=root(0) MCS_label=N/A \
Priority=4294901759 Nice=0 Account=(null) QOS=(null) JobState=FAILED Reason=NonZeroExitCode \
Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0 RunTime=00:00:00 \
TimeLimit=365-00:00:00 TimeMin=N/A NodeList=alpha-1 NumCPUs=2 WorkDir=/tmp StdOut=/dev/null \
Power= \n";

#[test]
fn scontrol_one_line() {
    let j = scontrol_job(SCONTROL, "1").unwrap();
    assert_eq!(j.state, "FAILED");
    assert_eq!(j.reason.as_deref(), Some("NonZeroExitCode"));
    assert_eq!(
        j.exit,
        Some(ExitCode {
            status: 3,
            signal: 0
        })
    );
    // Another job's line does not answer for job 11 (nor does a JobId prefix match).
    assert!(scontrol_job(SCONTROL, "11").is_err());
    let killed = "JobId=7 JobState=CANCELLED Reason=None ExitCode=0:9\n";
    let j = scontrol_job(killed, "7").unwrap();
    assert_eq!(j.exit.unwrap().to_string(), "killed by signal 9");
}

#[test]
fn garbled_scontrol_is_an_error() {
    assert!(scontrol_job("", "1").is_err());
    assert!(scontrol_job("slurm_load_jobs error: Invalid job id specified", "1").is_err());
    assert!(scontrol_job("JobId=1 JobName=x", "1").is_err());
    assert!(scontrol_job("JobId=1 JobState=done", "1").is_err());
    assert!(scontrol_job("JobId=1 JobState=FAILED ExitCode=3", "1").is_err());
    assert!(scontrol_job("JobId=1 JobState=FAILED ExitCode=x:0", "1").is_err());
}

#[test]
fn exit_codes() {
    assert_eq!(
        ExitCode::parse("1:0").unwrap(),
        ExitCode {
            status: 1,
            signal: 0
        }
    );
    assert_eq!(
        ExitCode::parse("0:9").unwrap(),
        ExitCode {
            status: 0,
            signal: 9
        }
    );
    assert!(ExitCode::parse("0:0").unwrap().is_success());
    assert!(!ExitCode::parse("0:15").unwrap().is_success());
    for bad in ["", "1", "1:", ":0", "a:b", "-1:0", "1:0:0"] {
        assert!(ExitCode::parse(bad).is_err(), "{bad}");
    }
    // squeue --json gives raw wait statuses.
    assert_eq!(
        ExitCode::from_wait_status(768),
        ExitCode {
            status: 3,
            signal: 0
        }
    );
    assert_eq!(
        ExitCode::from_wait_status(9),
        ExitCode {
            status: 0,
            signal: 9
        }
    );
    assert_eq!(ExitCode::from_wait_status(256).to_string(), "exit code 1");
    assert!(ExitCode::from_wait_status(0).is_success());
}

#[test]
fn sinfo_cpus() {
    assert_eq!(
        Cpus::parse("8/56/0/64").unwrap(),
        Cpus {
            allocated: 8,
            idle: 56,
            other: 0,
            total: 64
        }
    );
    for bad in [
        "",
        "8/56/0",
        "8/56/0/64/1",
        "a/b/c/d",
        "8/-1/0/64",
        "8//0/64",
    ] {
        assert!(Cpus::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn sinfo_per_node_counts_each_node_once() {
    // beta-1 is in two partitions; beta-2 is down (its CPUs are "other").
    let out = "beta-1|4/28/0/32\nbeta-1|4/28/0/32\nbeta-2|0/0/32/32\n";
    let c = sinfo_nodes(out).unwrap().unwrap();
    assert_eq!(
        c,
        Cpus {
            allocated: 4,
            idle: 28,
            other: 32,
            total: 64
        }
    );
    assert_eq!(sinfo_nodes("").unwrap(), None);
    assert!(sinfo_nodes("beta-1 4/28/0/32").is_err());
    assert!(sinfo_nodes("|4/28/0/32").is_err());
    assert!(sinfo_nodes("beta-1|4/28/0").is_err());
}

#[test]
fn foreign_cpus_skip_coalloc_jobs() {
    let out = "8|coalloc-J1-c0-L3\n5|somebody's job\n2|a|b\n3|coalloc-J2-c1-L4\n";
    assert_eq!(foreign_cpus(out, "coalloc-").unwrap(), 7);
    assert_eq!(foreign_cpus("", "coalloc-").unwrap(), 0);
    assert!(foreign_cpus("x|job", "coalloc-").is_err());
    assert!(foreign_cpus("8 job", "coalloc-").is_err());
}
