use super::*;

fn request() -> SubmitRequest {
    SubmitRequest {
        launch: 7,
        job: 3,
        component: 1,
        count: 4,
        processes: 4,
        executable: "/bin/true".into(),
        stdout: "/tmp/out/o.txt".into(),
        stderr: "/tmp/out/e.txt".into(),
        wall_time_ms: Some(90_500),
        directory: Some("/tmp".into()),
        ..SubmitRequest::default()
    }
}

#[test]
fn settings_files_are_read() {
    let env = settings_env(
        "SGE_ROOT=/tmp/ge; export SGE_ROOT\nSGE_CELL=delta; export SGE_CELL\n\
         export SGE_QMASTER_PORT=\"6960\"\nPATH=/x; export PATH\nSGE_ARCH=`x`; export SGE_ARCH\n",
    );
    assert_eq!(
        env,
        vec![
            ("SGE_ROOT".to_string(), "/tmp/ge".to_string()),
            ("SGE_CELL".into(), "delta".into()),
            ("SGE_QMASTER_PORT".into(), "6960".into()),
        ]
    );
}

#[test]
fn qsub_options_carry_slots_wall_time_paths_and_the_tagged_name() {
    let cell = GridEngineCell::new(GridEngineConfig {
        pe: Some("mpi".into()),
        queue: Some("main.q".into()),
        name_tag: Some("t1".into()),
        ..GridEngineConfig::new("delta")
    });
    let a = cell.submit_args(&request()).unwrap().join(" ");
    assert_eq!(
        a,
        "-terse -N coalloc-t1-J3-c1-L7 -r n -w e -S /bin/sh -j n -pe mpi 4 -l h_rt=91 \
         -q main.q -wd /tmp -o /tmp/out/o.txt -e /tmp/out/e.txt"
    );
    let one = SubmitRequest {
        count: 1,
        wall_time_ms: None,
        directory: None,
        ..request()
    };
    let a = cell.submit_args(&one).unwrap().join(" ");
    assert!(
        !a.contains("-pe") && !a.contains("h_rt") && !a.contains("-wd"),
        "{a}"
    );
}

#[test]
fn requests_grid_engine_cannot_express_are_rejected() {
    let cell = GridEngineCell::new(GridEngineConfig::new("delta"));
    let e = cell.submit_args(&request()).unwrap_err();
    assert!(e.contains("parallel environment"), "{e}");
    let colon = SubmitRequest {
        count: 1,
        stdout: "/tmp/a:b".into(),
        ..request()
    };
    let e = cell.submit_args(&colon).unwrap_err();
    assert!(e.contains("':'"), "{e}");
    assert!(matches!(
        cell.submit(&SubmitRequest {
            count: 0,
            ..request()
        }),
        Err(BackendError::Rejected(_))
    ));
}

#[test]
fn a_missing_grid_engine_is_unavailable_not_a_panic() {
    let c = GridEngineCell::new(GridEngineConfig {
        bin_dir: Some("/nonexistent/sge/bin".into()),
        ..GridEngineConfig::new("nowhere")
    });
    crate::contract::assert_missing_manager_is_unavailable(&c);
    let unreadable = GridEngineCell::new(GridEngineConfig {
        settings: Some("/nonexistent/settings.sh".into()),
        ..GridEngineConfig::new("nowhere")
    });
    assert!(
        matches!(unreadable.load(), Err(BackendError::Unavailable(m)) if m.contains("settings"))
    );
}
