//! The agent's pieces that need no server: addresses, and its reservation calls on fake
//! sites that may and may not reserve.

use super::*;

/// A site whose backend can do little but say whether it may reserve (and, if it may,
/// reserve anything: its reservations are not kept). A slow one takes submissions, 300 ms
/// each, and counts them; the others refuse them.
struct Site {
    may: bool,
    slow: bool,
    submitted: std::sync::atomic::AtomicUsize,
}

impl Site {
    fn new(may: bool, slow: bool) -> Site {
        Site {
            may,
            slow,
            submitted: Default::default(),
        }
    }
}

impl Backend for Site {
    fn submit(&self, r: &SubmitRequest) -> Result<String, BackendError> {
        if !self.slow {
            return Err(BackendError::Rejected("no launches here".into()));
        }
        self.submitted
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        Ok(format!("R{}", r.launch))
    }
    fn query(&self, _: &[String]) -> Result<Vec<coalloc_backends::RemoteState>, BackendError> {
        Ok(Vec::new())
    }
    fn cancel(&self, _: &String) -> Result<(), BackendError> {
        Ok(())
    }
    fn load(&self) -> Result<coalloc_backends::SiteLoad, BackendError> {
        Ok(coalloc_backends::SiteLoad::default())
    }
    fn may_reserve(&self) -> bool {
        self.may
    }
    fn reserve_earliest(&self, _: u32, _: i64, not_before_ms: i64) -> Result<i64, BackendError> {
        Ok(not_before_ms + 1)
    }
    fn reserve(&self, _: &str, _: u32, _: i64, _: i64) -> Result<(), BackendError> {
        Ok(())
    }
}

/// A state directory of this test process, gone at its end.
fn state_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("coalloc-agent-{name}-{}", std::process::id()))
}

fn agent(name: &str, backend_may: bool, config: &str) -> Agent {
    agent_on(name, config, Arc::new(Site::new(backend_may, false)))
}

/// An agent of site `s1` (its `config` before the site's table) on `backend`.
fn agent_on(name: &str, config: &str, backend: Arc<Site>) -> Agent {
    let dir = state_dir(name);
    let config = AgentConfig::parse(&format!(
        "{config}[[site]]\nname = \"s1\"\nprocessors = 8\nmanager = {{ type = \"local\" }}\n"
    ))
    .unwrap();
    let token = EnrolToken {
        server: "wss://127.0.0.1:1".into(),
        others: vec![],
        fingerprint: "sha256:00".into(),
        site: "s1".into(),
        secret: "x".into(),
    };
    Agent::with_backend(token, None, config, &dir, backend, None).unwrap()
}

#[test]
fn a_site_that_may_not_reserve_says_so_in_its_hello_and_refuses_with_the_reason() {
    let reserve = Call::Reserve {
        name: "coalloc-J1-c0-1".into(),
        count: 2,
        start_ms: 10,
        duration_ms: 10,
    };
    let earliest = Call::ReserveEarliest {
        count: 2,
        duration_ms: 10,
        not_before_ms: 5,
    };
    let may = agent("may", true, "");
    assert_eq!(may.reserving(), Reserving::May);
    assert_eq!(may.execute(earliest.clone()), Ok(Answer::Earliest(6)));
    assert_eq!(may.execute(reserve.clone()), Ok(Answer::Done));
    assert_eq!(
        may.execute(Call::Reservations),
        Ok(Answer::Reservations(vec![]))
    );
    let forbidden = agent("forbidden", true, "[agent]\nreserve = false\n");
    let cannot = agent("cannot", false, "");
    for (a, want) in [
        (
            &forbidden,
            "configured not to reserve (agent.reserve = false)",
        ),
        (&cannot, NOT_RESERVING),
    ] {
        let Reserving::MayNot(why) = a.reserving() else {
            panic!("may reserve")
        };
        assert!(why.contains(want) && why.contains("s1"), "{why}");
        for call in [earliest.clone(), reserve.clone()] {
            assert_eq!(a.execute(call), Err(CallError::Rejected(why.clone())));
        }
        // What was reserved before is still found and deleted.
        assert_eq!(
            a.execute(Call::Reservations),
            Ok(Answer::Reservations(vec![]))
        );
        assert_eq!(
            a.execute(Call::Unreserve("coalloc-J1-c0-1".into())),
            Ok(Answer::Done)
        );
    }
    for name in ["may", "forbidden", "cannot"] {
        let _ = std::fs::remove_dir_all(state_dir(name));
    }
}

#[test]
fn server_addresses_are_read_from_urls() {
    assert_eq!(host_port("wss://10.200.0.1:7443"), "10.200.0.1:7443");
    assert_eq!(host_port("https://h:1/x"), "h:1");
    assert_eq!(host_port("h:2"), "h:2");
}

#[test]
fn a_submission_sent_again_while_the_first_is_still_being_made_starts_nothing_twice() {
    // Issue 32: a leader's submission was still being made here when its connection ended;
    // the hello to its successor could not list it yet, and the successor sends it again.
    let dir = state_dir("resent");
    let _ = std::fs::remove_dir_all(&dir);
    let backend = Arc::new(Site::new(false, true));
    let a = Arc::new(agent_on("resent", "", backend.clone()));
    let req = SubmitRequest {
        launch: 7,
        job: 3,
        component: 1,
        executable: "/bin/true".into(),
        ..SubmitRequest::default()
    };
    let call = || Call::Submit(Box::new(req.clone()));
    let first = {
        let (a, c) = (a.clone(), call());
        std::thread::spawn(move || a.execute(c))
    };
    std::thread::sleep(Duration::from_millis(50));
    let again = a.execute(call());
    let first = first.join().unwrap();
    assert_eq!(first, Ok(Answer::Submitted("R7".into())));
    assert_eq!(again, first);
    assert_eq!(
        backend.submitted.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_launch_stopped_at_a_heartbeat_stop_stays_in_the_record_until_the_server_hears_of_it() {
    // The simulation harness, `--policies` seeds 3711 and 4629 and `--failover` seed 5561: a
    // server heard a launch's id and crashed before recording it; the agent stopped the
    // launch at a heartbeat stop and forgot it, so its next hello did not list it, the
    // restarted server sent the submission again under the same number, a new launch was
    // made, and the stopped one stayed in the manager's log for ever. Now the hello lists it
    // and a repeated submission gets its id again, starting nothing.
    let dir = state_dir("stopped");
    let _ = std::fs::remove_dir_all(&dir);
    let backend = Arc::new(Site::new(false, true));
    let a = agent_on("stopped", "", backend.clone());
    let req = SubmitRequest {
        launch: 9,
        job: 4,
        component: 0,
        executable: "/bin/true".into(),
        ..SubmitRequest::default()
    };
    let first = a.execute(Call::Submit(Box::new(req.clone())));
    assert_eq!(first, Ok(Answer::Submitted("R9".into())));
    a.stop_launches();
    let held: Vec<u64> = a.held.all().iter().map(|h| h.launch).collect();
    assert_eq!(held, vec![9], "the next hello lists the stopped launch");
    let again = a.execute(Call::Submit(Box::new(req)));
    assert_eq!(
        again, first,
        "a repeated submission gets the stopped launch's id"
    );
    assert_eq!(
        backend.submitted.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "nothing started twice"
    );
    // The server asks its cancel (or a query finds it ended): it leaves the record.
    assert_eq!(a.execute(Call::Cancel("R9".into())), Ok(Answer::Done));
    assert!(a.held.all().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
