//! The session against scripted clients: MPICH's start-up sequence, the barriers, bad lines,
//! failures before and after the co-allocation barrier.

use super::*;

fn setup(component: usize, processes: u32) -> Setup {
    Setup {
        job: 7,
        launch: 40 + component as u64,
        component,
        sizes: vec![2, 2],
        rank_offset: 2 * component as u64,
        total: 4,
        processes,
    }
}

/// A session whose launch mark is stored already.
fn started(component: usize, processes: u32) -> Session {
    let mut s = Session::new(setup(component, processes));
    let Some(Event::Put { token, key, value }) = s.poll_event() else {
        panic!("the launch is published first")
    };
    assert_eq!((key.as_str(), value.as_str()), ("pmi/launch/1", "41"));
    s.handle(Input::PutDone {
        token,
        result: Ok(()),
    });
    s
}

fn say(s: &mut Session, local: u32, line: &str) {
    s.handle(Input::Line {
        local,
        line: line.into(),
    });
}

fn lines(s: &mut Session) -> Vec<(u32, String)> {
    std::iter::from_fn(|| s.poll_transmit())
        .map(|t| (t.local, t.line))
        .collect()
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

fn logs(ev: &[Event]) -> usize {
    ev.iter().filter(|e| matches!(e, Event::Log(_))).count()
}

#[test]
fn answers_mpich_start_up_and_releases_at_the_coalloc_barrier() {
    let mut s = started(1, 2);
    for local in 0..2 {
        say(&mut s, local, "cmd=init pmi_version=1 pmi_subversion=1");
        say(&mut s, local, "cmd=get_maxes");
        say(&mut s, local, "cmd=get_appnum");
        say(&mut s, local, "cmd=get_my_kvsname");
        say(&mut s, local, "cmd=get_universe_size");
        say(
            &mut s,
            local,
            "cmd=get kvsname=kvs_7 key=PMI_process_mapping",
        );
    }
    let out = lines(&mut s);
    assert_eq!(out.len(), 12);
    assert_eq!(
        out[0].1,
        "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n"
    );
    assert_eq!(
        out[1].1,
        "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n"
    );
    assert_eq!(out[2].1, "cmd=appnum rc=0 appnum=0\n");
    assert_eq!(out[3].1, "cmd=my_kvsname rc=0 kvsname=kvs_7\n");
    assert_eq!(out[4].1, "cmd=universe_size rc=0 size=4\n");
    assert_eq!(out[5].1, "cmd=get_result rc=0 value=(vector,(0,4,1))\n");
    assert!(events(&mut s).is_empty());

    // A put goes to the store and is answered once stored.
    say(&mut s, 0, "cmd=put kvsname=kvs_7 key=bc-2 value=cafe");
    let ev = events(&mut s);
    let [Event::Put { token, key, value }] = ev.as_slice() else {
        panic!("{ev:?}")
    };
    assert_eq!((key.as_str(), value.as_str()), ("pmi/kvs/bc-2", "cafe"));
    assert!(lines(&mut s).is_empty(), "answered before it was stored");
    s.handle(Input::PutDone {
        token: *token,
        result: Ok(()),
    });
    assert_eq!(
        lines(&mut s),
        vec![(0, "cmd=put_result rc=0\n".to_string())]
    );

    // The co-allocation barrier: a check-in only once both ranks are in.
    say(&mut s, 0, "cmd=barrier_in");
    assert!(events(&mut s).is_empty());
    say(&mut s, 1, "cmd=barrier_in");
    assert_eq!(
        events(&mut s),
        vec![Event::CheckIn {
            ok: true,
            reason: None
        }]
    );
    assert!(lines(&mut s).is_empty());
    s.handle(Input::CheckedIn(Ok(BarrierOutcome::Released)));
    let out = lines(&mut s);
    assert_eq!(
        out,
        vec![
            (0, "cmd=barrier_out rc=0\n".into()),
            (1, "cmd=barrier_out rc=0\n".into())
        ]
    );

    // Gets: a local put from the cache, another component's from the store, a missing key
    // is an error (PMI-1).
    say(&mut s, 1, "cmd=get kvsname=kvs_7 key=bc-2");
    assert_eq!(
        lines(&mut s),
        vec![(1, "cmd=get_result rc=0 value=cafe\n".into())]
    );
    say(&mut s, 1, "cmd=get kvsname=kvs_7 key=bc-0");
    let ev = events(&mut s);
    let [Event::Get {
        token,
        key,
        wait_ms: 0,
    }] = ev.as_slice()
    else {
        panic!("{ev:?}")
    };
    assert_eq!(key, "pmi/kvs/bc-0");
    s.handle(Input::GetDone {
        token: *token,
        result: Ok(Some("beef".into())),
    });
    assert_eq!(
        lines(&mut s),
        vec![(1, "cmd=get_result rc=0 value=beef\n".into())]
    );
    say(&mut s, 0, "cmd=get kvsname=kvs_7 key=nobody");
    let ev = events(&mut s);
    let [Event::Get { token, .. }] = ev.as_slice() else {
        panic!("{ev:?}")
    };
    s.handle(Input::GetDone {
        token: *token,
        result: Ok(None),
    });
    assert_eq!(
        lines(&mut s),
        vec![(0, "cmd=get_result rc=-1 msg=key_nobody_not_found\n".into())]
    );
}

/// Drive a session to the running phase.
fn running(component: usize) -> Session {
    let mut s = Session::new(setup(component, 2));
    let ev = events(&mut s);
    let [Event::Put { token, .. }] = ev.as_slice() else {
        panic!("{ev:?}")
    };
    s.handle(Input::PutDone {
        token: *token,
        result: Ok(()),
    });
    say(&mut s, 0, "cmd=barrier_in");
    say(&mut s, 1, "cmd=barrier_in");
    s.handle(Input::CheckedIn(Ok(BarrierOutcome::Released)));
    lines(&mut s);
    events(&mut s);
    s
}

#[test]
fn later_barriers_span_the_job_through_the_store() {
    let mut s = running(1);
    say(&mut s, 0, "cmd=barrier_in");
    say(&mut s, 1, "cmd=barrier_in");
    // First the attempt's launch numbers, published by every component before its check-in.
    let ev = events(&mut s);
    assert_eq!(ev.len(), 2, "{ev:?}");
    for (i, e) in ev.iter().enumerate() {
        let Event::Get { token, key, .. } = e else {
            panic!("{e:?}")
        };
        assert_eq!(key, &format!("pmi/launch/{i}"));
        s.handle(Input::GetDone {
            token: *token,
            result: Ok(Some(format!("{}", 40 + i))),
        });
    }
    let ev = events(&mut s);
    let [Event::Put { token, key, .. }] = ev.as_slice() else {
        panic!("{ev:?}")
    };
    assert_eq!(key, "pmi/40.41/barrier/1/1");
    s.handle(Input::PutDone {
        token: *token,
        result: Ok(()),
    });
    let ev = events(&mut s);
    let [Event::Get { token, key, .. }] = ev.as_slice() else {
        panic!("{ev:?}")
    };
    assert_eq!(key, "pmi/40.41/barrier/1/0");
    // Not there yet: asked again; nobody is released meanwhile.
    s.handle(Input::GetDone {
        token: *token,
        result: Ok(None),
    });
    assert!(lines(&mut s).is_empty());
    let ev = events(&mut s);
    let [Event::Get { token, .. }] = ev.as_slice() else {
        panic!("{ev:?}")
    };
    s.handle(Input::GetDone {
        token: *token,
        result: Ok(Some("in".into())),
    });
    assert_eq!(lines(&mut s).len(), 2);
    // The next barrier is epoch 2, without reading the launches again.
    say(&mut s, 0, "cmd=barrier_in");
    say(&mut s, 1, "cmd=barrier_in");
    let ev = events(&mut s);
    let [Event::Put { key, .. }] = ev.as_slice() else {
        panic!("{ev:?}")
    };
    assert_eq!(key, "pmi/40.41/barrier/2/1");
}

#[test]
fn malformed_lines_get_an_error_answer_and_a_log_line() {
    let mut s = started(1, 2);
    for (line, answer) in [
        ("hello", "cmd=error rc=-1 msg=word_`hello`_is_not_key=value\n"),
        ("", "cmd=error rc=-1 msg=the_line_does_not_start_with_cmd=\n"),
        ("cmd=dance", "cmd=error rc=-1 msg=unknown_command_`dance`\n"),
        ("cmd=put kvsname=kvs_7 key=x", "cmd=put_result rc=-1 msg=`put`_needs_`value`\n"),
        ("cmd=put kvsname=other key=x value=1", "cmd=put_result rc=-1 msg=unknown_kvsname_other\n"),
        ("cmd=get kvsname=kvs_7", "cmd=get_result rc=-1 msg=`get`_needs_`key`\n"),
        ("cmd=publish_name service=a port=b", "cmd=publish_result rc=-1 msg=coalloc_does_not_offer_publish_name\n"),
        ("cmd=init pmi_version=2 pmi_subversion=0", "cmd=response_to_init rc=-1 msg=coalloc_speaks_PMI-1_only pmi_version=1 pmi_subversion=1\n"),
    ] {
        say(&mut s, 0, line);
        assert_eq!(lines(&mut s), vec![(0, answer.to_string())], "{line}");
        assert_eq!(logs(&events(&mut s)), 1, "{line}");
    }
    let long = format!("cmd=put kvsname=kvs_7 key={} value=1", "k".repeat(65));
    say(&mut s, 1, &long);
    assert_eq!(
        lines(&mut s),
        vec![(
            1,
            "cmd=put_result rc=-1 msg=key_of_65_bytes_(1_to_64)\n".into()
        )]
    );
    // A multi-line spawn is swallowed up to its end and refused once.
    for l in ["mcmd=spawn", "nprocs=2", "execname=x", "endcmd"] {
        say(&mut s, 1, l);
    }
    assert_eq!(
        lines(&mut s),
        vec![(
            1,
            "cmd=spawn_result rc=-1 msg=coalloc_does_not_offer_spawn\n".into()
        )]
    );
    // Non-UTF-8 never reaches here (the pump reads lossily); junk after all that still works.
    say(&mut s, 0, "cmd=get_appnum");
    assert_eq!(
        lines(&mut s),
        vec![(0, "cmd=appnum rc=0 appnum=0\n".into())]
    );
}

#[test]
fn an_exit_before_the_barrier_is_a_failed_start() {
    let mut s = started(1, 2);
    say(&mut s, 0, "cmd=barrier_in");
    s.handle(Input::Exited {
        local: 1,
        code: Some(0),
        detail: "exited with code 0".into(),
    });
    let ev = events(&mut s);
    assert_eq!(logs(&ev), 1);
    assert!(ev.contains(&Event::KillAll));
    let Some(Event::CheckIn {
        ok: false,
        reason: Some(why),
    }) = ev.last()
    else {
        panic!("{ev:?}")
    };
    assert!(
        why.contains("MPI process 3 exited with code 0 before the co-allocation barrier"),
        "{why}"
    );
    s.handle(Input::CheckedIn(Ok(BarrierOutcome::Aborted(
        "component failed".into(),
    ))));
    assert_eq!(events(&mut s), vec![Event::Exit(1)]);
    // Nothing more happens after the exit.
    say(&mut s, 0, "cmd=get_appnum");
    assert!(lines(&mut s).is_empty());
}

#[test]
fn mpi_abort_before_the_barrier_fails_the_start_and_after_it_ends_the_component() {
    let mut s = started(1, 2);
    say(&mut s, 1, "cmd=abort exitcode=5");
    let ev = events(&mut s);
    assert!(
        matches!(ev.last(), Some(Event::CheckIn { ok: false, .. })),
        "{ev:?}"
    );

    let mut s = running(0);
    say(&mut s, 1, "cmd=abort exitcode=5");
    let ev = events(&mut s);
    assert_eq!(&ev[1..], &[Event::KillAll, Event::Exit(5)]);
}

#[test]
fn an_aborted_job_ends_the_ranks_and_a_clean_run_exits_0() {
    let mut s = started(1, 1);
    say(&mut s, 0, "cmd=barrier_in");
    events(&mut s);
    s.handle(Input::CheckedIn(Ok(BarrierOutcome::Aborted(
        "site down".into(),
    ))));
    let ev = events(&mut s);
    assert_eq!(&ev[1..], &[Event::KillAll, Event::Exit(1)]);
    assert!(
        lines(&mut s).is_empty(),
        "no barrier_out for an aborted job"
    );

    let mut s = running(0);
    for local in 0..2 {
        say(&mut s, local, "cmd=finalize");
    }
    assert_eq!(lines(&mut s).len(), 2);
    s.handle(Input::Exited {
        local: 0,
        code: Some(0),
        detail: "exited with code 0".into(),
    });
    assert!(events(&mut s).is_empty());
    s.handle(Input::Exited {
        local: 1,
        code: Some(0),
        detail: "exited with code 0".into(),
    });
    assert_eq!(events(&mut s), vec![Event::Exit(0)]);

    let mut s = running(0);
    s.handle(Input::Exited {
        local: 0,
        code: None,
        detail: "was killed by signal 9".into(),
    });
    let ev = events(&mut s);
    assert_eq!(&ev[1..], &[Event::KillAll, Event::Exit(1)]);
}

#[test]
fn a_check_in_waits_for_the_launch_number_to_be_stored() {
    let mut s = Session::new(setup(0, 1));
    let ev = events(&mut s);
    let [Event::Put { token, .. }] = ev.as_slice() else {
        panic!("{ev:?}")
    };
    say(&mut s, 0, "cmd=barrier_in");
    assert!(events(&mut s).is_empty());
    s.handle(Input::PutDone {
        token: *token,
        result: Ok(()),
    });
    assert_eq!(
        events(&mut s),
        vec![Event::CheckIn {
            ok: true,
            reason: None
        }]
    );
}
