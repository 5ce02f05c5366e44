//! The agent site's calls stepped on a virtual clock against a real [`ServerSession`]: what
//! goes out, in which order, and what the driver hears.

use super::*;
use crate::link::session::Transmit;

const BEAT: Duration = Duration::from_secs(1);
const INTERVAL: Duration = Duration::from_millis(100);

fn session(t0: Instant) -> ServerSession {
    // The welcome is the session's first message; any message serves here.
    ServerSession::new(
        t0,
        BEAT,
        ToAgent::Refused {
            reason: String::new(),
        },
    )
}

/// The calls the session has to send, with their numbers.
fn out(s: &mut ServerSession) -> Vec<(u64, Call)> {
    let mut v = Vec::new();
    while let Some(t) = s.poll_transmit() {
        if let Transmit::Message(ToAgent::Call { id, call }) = t {
            v.push((id, call));
        }
    }
    v
}

fn calls_only(v: &[(u64, Call)]) -> Vec<Call> {
    v.iter().map(|(_, c)| c.clone()).collect()
}

fn reports(c: &mut AgentCalls) -> Vec<Report> {
    std::iter::from_fn(|| c.poll_report()).collect()
}

fn submit(launch: u64) -> SiteCall {
    SiteCall::Submit(Box::new(SubmitRequest {
        launch,
        ..SubmitRequest::default()
    }))
}

fn req(launch: u64) -> SubmitRequest {
    SubmitRequest {
        launch,
        ..SubmitRequest::default()
    }
}

/// The launches and results of a `SubmittedMany` report.
fn submitted(r: &Report) -> Vec<(u64, Result<String, String>)> {
    match r {
        Report::SubmittedMany(_, all) => all
            .iter()
            .map(|(l, r)| (*l, r.as_ref().cloned().map_err(|e| e.to_string())))
            .collect(),
        _ => panic!("not a submission report"),
    }
}

#[test]
fn calls_made_while_down_go_out_in_order_on_the_next_connection_submissions_in_bursts() {
    let t0 = Instant::now();
    let mut c = AgentCalls::new(3, "s1".into(), INTERVAL);
    c.call(SiteCall::Cancel("R1".into()));
    c.call(submit(1));
    c.call(submit(2));
    c.call(SiteCall::CancelUnrecorded {
        job: 4,
        component: 0,
        launch: 9,
    });
    c.call(submit(3));
    let mut s = session(t0);
    c.flush(t0, &mut s);
    assert!(
        out(&mut s).is_empty(),
        "nothing goes out while the link is down"
    );
    c.connected(t0, 1, &mut s);
    assert_eq!(
        calls_only(&out(&mut s)),
        vec![
            Call::Cancel("R1".into()),
            Call::SubmitMany(vec![req(1), req(2)]),
            Call::CancelUnrecorded {
                job: 4,
                component: 0,
                launch: 9
            },
            Call::SubmitMany(vec![req(3)]),
        ]
    );
    // The first poll is due at once, but the launches just sent put it off an interval;
    // then its load reading (nothing is watched: no query).
    assert_eq!(c.poll_timeout(), Some(t0));
    c.handle_timeout(t0, &mut s);
    assert!(out(&mut s).is_empty());
    assert_eq!(c.poll_timeout(), Some(t0 + INTERVAL));
    c.handle_timeout(t0 + INTERVAL, &mut s);
    assert_eq!(calls_only(&out(&mut s)), vec![Call::Load]);
}

#[test]
fn an_answered_burst_is_one_report_of_its_launches_in_order() {
    let t0 = Instant::now();
    let mut c = AgentCalls::new(0, "s1".into(), INTERVAL);
    let mut s = session(t0);
    c.connected(t0, 1, &mut s);
    for l in [5, 6, 7] {
        c.call(submit(l));
    }
    c.flush(t0, &mut s);
    let sent = out(&mut s);
    assert_eq!(
        calls_only(&sent),
        vec![Call::SubmitMany(vec![req(5), req(6), req(7)])]
    );
    let answer = Answer::SubmittedMany(vec![
        Ok("R5".into()),
        Err(CallError::Rejected("too big".into())),
        Ok("R7".into()),
    ]);
    c.answered(t0, sent[0].0, Ok(answer.clone()));
    let r = reports(&mut c);
    assert_eq!(r.len(), 1);
    assert_eq!(
        submitted(&r[0]),
        vec![
            (5, Ok("R5".into())),
            (6, Err("rejected: too big".into())),
            (7, Ok("R7".into())),
        ]
    );
    // An answer comes once: a repeat is nothing.
    c.answered(t0, sent[0].0, Ok(answer));
    assert!(reports(&mut c).is_empty());
}

#[test]
fn a_poll_reads_the_load_and_the_watched_launches_and_waits_an_interval_after_a_launch() {
    let t0 = Instant::now();
    let mut c = AgentCalls::new(2, "s1".into(), INTERVAL);
    let mut s = session(t0);
    c.call(SiteCall::Watch {
        launch: 7,
        remote: "R7".into(),
    });
    c.call(SiteCall::Watch {
        launch: 8,
        remote: "R8".into(),
    });
    c.call(SiteCall::Forget(8));
    c.connected(t0, 1, &mut s);
    c.handle_timeout(t0, &mut s);
    let sent = out(&mut s);
    assert_eq!(
        calls_only(&sent),
        vec![Call::Load, Call::Query(vec!["R7".into()])]
    );
    let load = SiteLoad {
        idle: 3,
        total: 8,
        other: 1,
    };
    c.answered(t0, sent[0].0, Ok(Answer::Load(load)));
    assert!(reports(&mut c).is_empty(), "the states are still awaited");
    c.answered(
        t0,
        sent[1].0,
        Ok(Answer::States(vec![RemoteState::Running])),
    );
    match &reports(&mut c)[..] {
        [Report::Polled {
            site,
            load: l,
            states,
        }] => {
            assert_eq!((*site, l.clone()), (2, Ok(load)));
            assert_eq!(states, &vec![(7, RemoteState::Running)]);
        }
        _ => panic!("one poll report"),
    }
    // The next poll an interval after the last one's start; a launch just before it
    // puts it off to an interval after the launch, once.
    assert_eq!(c.poll_timeout(), Some(t0 + INTERVAL));
    let launch_at = t0 + INTERVAL - Duration::from_millis(10);
    c.call(submit(9));
    c.flush(launch_at, &mut s);
    out(&mut s);
    c.handle_timeout(t0 + INTERVAL, &mut s);
    assert!(out(&mut s).is_empty(), "put off");
    assert_eq!(c.poll_timeout(), Some(launch_at + INTERVAL));
    c.handle_timeout(launch_at + INTERVAL, &mut s);
    assert_eq!(
        calls_only(&out(&mut s)),
        vec![Call::Load, Call::Query(vec!["R7".into()])]
    );
}

#[test]
fn a_load_not_given_in_time_is_a_reading_of_down_and_a_late_answer_is_dropped() {
    let t0 = Instant::now();
    let mut c = AgentCalls::new(0, "s1".into(), INTERVAL);
    let mut s = session(t0);
    c.connected(t0, 1, &mut s);
    c.handle_timeout(t0, &mut s);
    let sent = out(&mut s);
    assert_eq!(
        c.poll_timeout(),
        Some(t0 + LOAD_LIMIT),
        "no second poll meanwhile"
    );
    c.handle_timeout(t0 + LOAD_LIMIT, &mut s);
    match &reports(&mut c)[..] {
        [Report::Polled { load: Err(e), .. }] => {
            assert!(e.contains("did not give its load within 5 s"), "{e}")
        }
        _ => panic!("one failed reading"),
    }
    c.answered(
        t0 + LOAD_LIMIT,
        sent[0].0,
        Ok(Answer::Load(SiteLoad::default())),
    );
    assert!(reports(&mut c).is_empty());
}

#[test]
fn a_connection_that_ends_fails_its_submissions_and_keeps_its_cancels_and_discards() {
    let t0 = Instant::now();
    let mut c = AgentCalls::new(0, "s1".into(), INTERVAL);
    let mut s = session(t0);
    c.connected(t0, 1, &mut s);
    c.call(submit(1));
    c.call(SiteCall::Cancel("R0".into()));
    for i in 0..DISCARD_BATCH {
        c.call(SiteCall::Discard(format!("D{i}")));
    }
    c.flush(t0, &mut s);
    assert_eq!(out(&mut s).len(), 3);
    c.disconnected(1);
    match &reports(&mut c)[..] {
        [r] => {
            let all = submitted(r);
            assert_eq!(all.len(), 1);
            let e = all[0].1.clone().unwrap_err();
            assert!(e.contains("closed before its answer"), "{e}");
        }
        _ => panic!("one failed burst"),
    }
    assert_eq!(c.poll_timeout(), None, "no timer while down");
    let mut s2 = session(t0);
    c.connected(t0 + BEAT, 2, &mut s2);
    let again = calls_only(&out(&mut s2));
    assert_eq!(again[0], Call::Cancel("R0".into()));
    assert!(matches!(&again[1], Call::Discard(ids) if ids.len() == DISCARD_BATCH));
    assert_eq!(again.len(), 2);
}

/// Step `c` every 500 ms from `from` until past `until`, answering its polls at once and
/// each cancel it sends with `answer`: when (whole seconds since `t0`) a cancel went out.
fn cancels_until(
    c: &mut AgentCalls,
    s: &mut ServerSession,
    t0: Instant,
    from: Instant,
    until: Instant,
    answer: fn() -> Result<Answer, CallError>,
) -> Vec<u64> {
    let mut now = from;
    let mut tries = Vec::new();
    loop {
        for (id, call) in out(s) {
            match call {
                Call::Cancel(_) => {
                    tries.push(now.duration_since(t0).as_secs());
                    c.answered(now, id, answer());
                }
                // Polls answer at once; only the cancels' times matter.
                _ => c.answered(now, id, Ok(Answer::Load(SiteLoad::default()))),
            }
        }
        now += Duration::from_millis(500);
        if now > until {
            return tries;
        }
        c.handle_timeout(now, s);
    }
}

/// A connected site's calls, its first poll out of the way, and a cancel of `R1` sent.
fn cancelling(t0: Instant) -> (AgentCalls, ServerSession) {
    let mut c = AgentCalls::new(0, "s1".into(), INTERVAL);
    let mut s = session(t0);
    c.connected(t0, 1, &mut s);
    c.handle_timeout(t0, &mut s);
    let poll = out(&mut s);
    c.answered(t0, poll[0].0, Ok(Answer::Load(SiteLoad::default())));
    c.call(SiteCall::Cancel("R1".into()));
    c.flush(t0, &mut s);
    (c, s)
}

fn down() -> Result<Answer, CallError> {
    Err(CallError::Unavailable("down".into()))
}

#[test]
fn a_failed_cancel_is_tried_again_one_two_four_eight_seconds_later() {
    let t0 = Instant::now();
    let (mut c, mut s) = cancelling(t0);
    let until = t0 + Duration::from_secs(30);
    let tries = cancels_until(&mut c, &mut s, t0, t0, until, down);
    assert_eq!(tries, vec![0, 1, 3, 7, 15], "five tries in all");
}

#[test]
fn a_cancel_given_up_goes_out_again_when_the_driver_sends_it_again() {
    // The link gives a failed cancel up after five tries while it stays up; the core sends
    // a draining launch's cancel again every `recancel_interval` (30 s in a server), and
    // the driver passes it on: a call of its own, with five tries of its own.
    let t0 = Instant::now();
    let (mut c, mut s) = cancelling(t0);
    let secs = |n| t0 + Duration::from_secs(n);
    assert_eq!(
        cancels_until(&mut c, &mut s, t0, t0, secs(30), down),
        vec![0, 1, 3, 7, 15]
    );
    c.call(SiteCall::Cancel("R1".into()));
    c.flush(secs(31), &mut s);
    let taken = || Ok(Answer::Done);
    assert_eq!(
        cancels_until(&mut c, &mut s, t0, secs(31), secs(60), taken),
        vec![31],
        "sent again, taken at once, not tried again"
    );
}

#[test]
fn discards_go_in_batches_and_with_the_next_poll() {
    let t0 = Instant::now();
    let mut c = AgentCalls::new(0, "s1".into(), INTERVAL);
    let mut s = session(t0);
    c.connected(t0, 1, &mut s);
    c.call(SiteCall::Discard("R0".into()));
    c.flush(t0, &mut s);
    assert!(out(&mut s).is_empty(), "kept for a batch or the next poll");
    c.handle_timeout(t0, &mut s);
    assert_eq!(
        calls_only(&out(&mut s)),
        vec![Call::Discard(vec!["R0".into()]), Call::Load]
    );
}
