//! An agent site's link state stepped by hand, as the hub's pump and the agent would: the
//! driver's calls out and their reports back, and the calls a thread waits for (file
//! operations, reservations).

use super::*;
use futures_util::FutureExt;

fn req(launch: u64) -> SubmitRequest {
    SubmitRequest {
        launch,
        ..SubmitRequest::default()
    }
}

/// The calls the pump has to write, with their numbers.
fn frames(p: &mut Pumped) -> Vec<(u64, Call)> {
    let mut v = Vec::new();
    while let Some(t) = p.poll_transmit() {
        if let Transmit::Message(ToAgent::Call { id, call }) = t {
            v.push((id, call));
        }
    }
    v
}

#[test]
fn the_drivers_call_goes_out_when_the_pump_wakes_and_the_answer_comes_back_as_a_report() {
    let site = Arc::new(AgentSite::new("s1".into(), 4, Duration::from_secs(60)));
    let (tx, _rx) = std::sync::mpsc::channel();
    let link = AgentLink {
        site: site.clone(),
        provider: None,
        driver: tx,
    };
    // Made while the link is down: kept for the connection.
    link.submit(req(1));
    assert!(!site.connected());
    let t0 = Instant::now();
    let welcome = ToAgent::Refused {
        reason: String::new(),
    };
    let mut p = site.connect(t0, Duration::from_secs(1), welcome);
    assert!(site.connected());
    let kept = frames(&mut p);
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].1, Call::SubmitMany(vec![req(1)]));
    // Out: the driver's call, then the pump's wake-up.
    link.submit(req(2));
    assert!(
        p.wake.notified().now_or_never().is_some(),
        "the pump is woken"
    );
    p.handle_timeout(t0);
    let sent = frames(&mut p);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].1, Call::SubmitMany(vec![req(2)]));
    // Back: the answer's frame, then the report the pump sends the driver.
    p.handle(
        t0,
        FromAgent::Answer {
            id: sent[0].0,
            result: Ok(Answer::SubmittedMany(vec![Ok("R2".into())])),
        },
    );
    let (reports, relays) = p.take();
    assert!(relays.is_empty());
    match &reports[..] {
        [Report::SubmittedMany(_, all)] => {
            assert_eq!(all.len(), 1);
            assert_eq!(all[0].0, 2);
            assert_eq!(all[0].1.as_ref().unwrap(), "R2");
        }
        _ => panic!("one report"),
    }
    // The connection ends with launch 1's burst unanswered: it fails.
    let (reports, still_up) = p.end();
    assert!(!still_up && !site.connected());
    match &reports[..] {
        [Report::SubmittedMany(_, all)] => {
            assert_eq!(all[0].0, 1);
            assert!(all[0].1.is_err());
        }
        _ => panic!("one report"),
    }
    let e = AgentBackend(site)
        .file(
            std::path::Path::new("/"),
            FileOp::Remove { path: "x".into() },
        )
        .unwrap_err();
    assert!(e.to_string().contains("not connected"), "{e}");
}

/// Answer, as the agent, the first call the pump has to write, once a thread has made
/// it: the call.
fn answer_next(p: &mut Pumped, result: Result<Answer, CallError>) -> Call {
    let t = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some((id, call)) = frames(p).into_iter().next() {
            p.handle(Instant::now(), FromAgent::Answer { id, result });
            return call;
        }
        assert!(Instant::now() < t, "no call came");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn reservation_calls_cross_the_link_and_may_reserve_is_what_the_agent_announced() {
    let site = Arc::new(AgentSite::new("s1".into(), 0, Duration::from_secs(60)));
    let backend = Arc::new(AgentBackend(site.clone()));
    assert!(!backend.may_reserve(), "nothing announced yet");
    // Down: every call fails at once as Unavailable, as a file operation.
    let e = backend.reserve("coalloc-J1-c0-1", 2, 0, 1).unwrap_err();
    assert!(
        matches!(&e, BackendError::Unavailable(m) if m.contains("not connected")),
        "{e}"
    );
    site.announced(Reserving::May);
    assert!(backend.may_reserve());
    let t0 = Instant::now();
    let welcome = ToAgent::Refused {
        reason: String::new(),
    };
    let mut p = site.connect(t0, Duration::from_secs(1), welcome);
    frames(&mut p);
    let b = backend.clone();
    let earliest = std::thread::spawn(move || b.reserve_earliest(2, 60_000, 1_000));
    assert_eq!(
        answer_next(&mut p, Ok(Answer::Earliest(5_000))),
        Call::ReserveEarliest {
            count: 2,
            duration_ms: 60_000,
            not_before_ms: 1_000
        }
    );
    assert_eq!(earliest.join().unwrap().unwrap(), 5_000);
    let b = backend.clone();
    let made = std::thread::spawn(move || b.reserve("coalloc-J1-c0-1", 2, 5_000, 60_000));
    assert_eq!(
        answer_next(&mut p, Ok(Answer::Done)),
        Call::Reserve {
            name: "coalloc-J1-c0-1".into(),
            count: 2,
            start_ms: 5_000,
            duration_ms: 60_000
        }
    );
    made.join().unwrap().unwrap();
    let b = backend.clone();
    let listed = std::thread::spawn(move || b.reservations());
    let names = vec!["coalloc-J1-c0-1".to_string()];
    assert_eq!(
        answer_next(&mut p, Ok(Answer::Reservations(names.clone()))),
        Call::Reservations
    );
    assert_eq!(listed.join().unwrap().unwrap(), names);
    let b = backend.clone();
    let gone = std::thread::spawn(move || b.unreserve("coalloc-J1-c0-1"));
    assert_eq!(
        answer_next(&mut p, Ok(Answer::Done)),
        Call::Unreserve("coalloc-J1-c0-1".into())
    );
    gone.join().unwrap().unwrap();
    // A refusal keeps its class and its reason; an answer of the wrong kind fails.
    let b = backend.clone();
    let refused = std::thread::spawn(move || b.reserve("coalloc-J2-c0-1", 99, 0, 1));
    answer_next(&mut p, Err(CallError::Rejected("only 8 processors".into())));
    let e = refused.join().unwrap().unwrap_err();
    assert!(
        matches!(&e, BackendError::Rejected(m) if m == "only 8 processors"),
        "{e}"
    );
    let b = backend.clone();
    let odd = std::thread::spawn(move || b.reserve_earliest(1, 1, 0));
    answer_next(&mut p, Ok(Answer::Done));
    let e = odd.join().unwrap().unwrap_err();
    assert!(
        matches!(&e, BackendError::Unavailable(m) if m.contains("Done")),
        "{e}"
    );
    // A call in flight when the link ends fails as Unavailable.
    let b = backend.clone();
    let cut = std::thread::spawn(move || b.reservations());
    let t = Instant::now() + Duration::from_secs(10);
    while frames(&mut p).is_empty() {
        assert!(Instant::now() < t, "no call came");
        std::thread::sleep(Duration::from_millis(2));
    }
    p.end();
    let e = cut.join().unwrap().unwrap_err();
    assert!(
        matches!(&e, BackendError::Unavailable(m) if m.contains("closed")),
        "{e}"
    );
    assert!(backend.may_reserve(), "kept until the next hello");
}
