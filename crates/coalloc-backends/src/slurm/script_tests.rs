//! Unit tests of the batch script: quoting, names, limits, and the generated script run by
//! `/bin/sh` directly (no Slurm needed).

use super::*;
use std::path::PathBuf;
use std::process::Command;

fn request(processes: u32, args: &[&str]) -> SubmitRequest {
    SubmitRequest {
        launch: 7,
        job: 3,
        component: 1,
        count: processes,
        processes,
        executable: "/bin/sh".into(),
        arguments: args.iter().map(|a| a.to_string()).collect(),
        environment: vec![("COALLOC_RANK_OFFSET".into(), "10".into())],
        ..Default::default()
    }
}

fn run_script(script: &str) -> (i32, String) {
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn quoting_is_literal() {
    assert_eq!(quote("a b", "x").unwrap(), "'a b'");
    assert_eq!(quote("it's", "x").unwrap(), r"'it'\''s'");
    assert_eq!(quote("", "x").unwrap(), "''");
    assert!(quote("a\0b", "x").is_err());
    let nasty = r#"$(touch /tmp/nope) `x` "q" 'p' \n ; & | * ~"#;
    let (_, out) = run_script(&format!("printf %s {}", quote(nasty, "x").unwrap()));
    assert_eq!(out, nasty);
}

#[test]
fn names_limits_and_paths() {
    let r = request(1, &[]);
    assert_eq!(
        name_of(None, r.job, r.component, r.launch),
        "coalloc-J3-c1-L7"
    );
    assert_eq!(
        name_of(Some("5e0a11c2"), r.job, r.component, r.launch),
        "coalloc-5e0a11c2-J3-c1-L7"
    );
    assert_eq!(time_limit_minutes(1), 1);
    assert_eq!(time_limit_minutes(60_000), 1);
    assert_eq!(time_limit_minutes(60_001), 2);
    assert_eq!(time_limit_minutes(0), 1);
    assert_eq!(time_limit_minutes(-5), 1);
    assert_eq!(time_limit_minutes(i64::MAX), i64::MAX / 60_000 + 1);
    assert_eq!(
        output_path(&PathBuf::from("/o/100%.out"), "o").unwrap(),
        "/o/100%%.out"
    );
    assert_eq!(
        output_path(&PathBuf::from(r"/o/a\b%j"), "o").unwrap(),
        r"/o/a\b%j"
    );
}

#[test]
fn every_process_gets_its_ranks() {
    let r = request(3, &["-c", "echo $COALLOC_LOCAL_RANK $COALLOC_RANK"]);
    let (code, out) = run_script(&batch_script(&r).unwrap());
    assert_eq!(code, 0);
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(lines, ["0 10", "1 11", "2 12"]);
}

#[test]
fn environment_is_exported_verbatim() {
    let mut r = request(1, &["-c", "printf '%s' \"$ODD\""]);
    r.environment.push(("ODD".into(), "a 'b' $c\nd".into()));
    let (code, out) = run_script(&batch_script(&r).unwrap());
    assert_eq!(code, 0);
    assert_eq!(out, "a 'b' $c\nd");
}

#[test]
fn one_failing_process_fails_the_script() {
    let r = request(3, &["-c", "[ $COALLOC_LOCAL_RANK = 1 ] && exit 3; exit 0"]);
    assert_eq!(run_script(&batch_script(&r).unwrap()).0, 3);
    let r = request(2, &["-c", "exit 0"]);
    assert_eq!(run_script(&batch_script(&r).unwrap()).0, 0);
}

#[test]
fn unusable_requests_are_refused() {
    let mut r = request(1, &[]);
    r.environment.push(("NOT-A-NAME".into(), "x".into()));
    assert_eq!(
        batch_script(&r),
        Err(ScriptError::BadName("NOT-A-NAME".into()))
    );
    let mut r = request(1, &["a\0b"]);
    assert!(matches!(batch_script(&r), Err(ScriptError::Nul(_))));
    r.arguments.clear();
    r.processes = 0;
    assert_eq!(batch_script(&r), Err(ScriptError::Zero("processes")));
}

#[test]
fn a_component_run_as_its_owner_gets_sbatch_uid_and_gid() {
    let mut r = request(1, &[]);
    assert!(owner_options(&r).is_empty());
    r.owner = Some("root".into());
    assert_eq!(owner_options(&r), vec!["--uid=root", "--gid=0"]);
    r.owner = Some("no-such-user-here".into());
    assert_eq!(owner_options(&r), vec!["--uid=no-such-user-here"]);
}
