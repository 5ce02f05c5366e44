//! Advance reservations through a site agent (issue 31 item 3), over a real link on
//! loopback: the server's hub and agent sites as `coalloc serve` makes them, and two agents
//! run in process by the agent's library (`coalloc_agent::Agent::with_backend`), one on a
//! fake site that reserves ([`Calendar`]) and one configured not to (`agent.reserve =
//! false`). The server's side is the agent site's `Backend` (`AgentBackend`), whose calls
//! the reservation claiming of the driver makes, each waited for on a thread.

use coalloc_agent::{Agent, AgentConfig};
use coalloc_backends::{
    Backend, BackendError, RemoteState, SiteLoad, SubmitRequest, RESERVATION_PREFIX,
};
use coalloc_server::link::hub::Hub;
use coalloc_server::link::proto::Reserving;
use coalloc_server::link::remote::{AgentBackend, AgentSite};
use coalloc_server::link::tls;
use coalloc_testkit::backend::out_dir;
use coalloc_testkit::tools::free_port;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A fake site of `processors` processors that only reserves: a calendar of its
/// reservations by name (processors, start, duration), an earliest start the first time at
/// or after the one asked (that or a reservation's end) when enough are free for the whole
/// window. No launches.
struct Calendar {
    processors: u32,
    held: Mutex<BTreeMap<String, (u32, i64, i64)>>,
}

impl Calendar {
    /// The processors not reserved at any time of `[start, start + duration)`.
    fn free(&self, held: &BTreeMap<String, (u32, i64, i64)>, start: i64, duration: i64) -> u32 {
        let taken: u32 = held
            .values()
            .filter(|(_, s, d)| *s < start + duration && start < s + d)
            .map(|(n, _, _)| n)
            .sum();
        self.processors.saturating_sub(taken)
    }
}

impl Backend for Calendar {
    fn submit(&self, _: &SubmitRequest) -> Result<String, BackendError> {
        Err(BackendError::Rejected(
            "this fake site only reserves".into(),
        ))
    }
    fn query(&self, ids: &[String]) -> Result<Vec<RemoteState>, BackendError> {
        Ok(vec![RemoteState::Unknown; ids.len()])
    }
    fn cancel(&self, _: &String) -> Result<(), BackendError> {
        Ok(())
    }
    fn load(&self) -> Result<SiteLoad, BackendError> {
        Ok(SiteLoad {
            idle: self.processors,
            total: self.processors,
            other: 0,
        })
    }
    fn may_reserve(&self) -> bool {
        true
    }
    fn reserve_earliest(
        &self,
        count: u32,
        duration_ms: i64,
        not_before_ms: i64,
    ) -> Result<i64, BackendError> {
        if count > self.processors {
            return Err(BackendError::Rejected(format!(
                "{count} processors asked of {}",
                self.processors
            )));
        }
        let held = self.held.lock().unwrap();
        let mut times: Vec<i64> = held
            .values()
            .map(|(_, s, d)| s + d)
            .filter(|t| *t >= not_before_ms)
            .chain([not_before_ms])
            .collect();
        times.sort_unstable();
        let t = times
            .into_iter()
            .find(|t| self.free(&held, *t, duration_ms) >= count);
        Ok(t.expect("free after the last reservation's end"))
    }
    fn reserve(
        &self,
        name: &str,
        count: u32,
        start_ms: i64,
        duration_ms: i64,
    ) -> Result<(), BackendError> {
        let mut held = self.held.lock().unwrap();
        let free = self.free(&held, start_ms, duration_ms);
        if free < count {
            return Err(BackendError::Rejected(format!(
                "only {free} of {} processors are free then",
                self.processors
            )));
        }
        held.insert(name.to_owned(), (count, start_ms, duration_ms));
        Ok(())
    }
    fn unreserve(&self, name: &str) -> Result<(), BackendError> {
        self.held.lock().unwrap().remove(name);
        Ok(())
    }
    fn reservations(&self) -> Result<Vec<String>, BackendError> {
        let held = self.held.lock().unwrap();
        let names = held.keys().filter(|n| n.starts_with(RESERVATION_PREFIX));
        Ok(names.cloned().collect())
    }
}

/// Run `f` on a thread of its own, as the driver's reservation calls are (an agent site's
/// backend waits for its answers).
async fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// Wait until `site`'s link is `up` (or not).
async fn until_linked(site: &AgentSite, up: bool) {
    let t = Instant::now();
    while site.connected() != up {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "link {up} never came"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_cross_the_agent_link_and_a_site_that_may_not_reserve_says_why() {
    let dir = out_dir(env!("CARGO_TARGET_TMPDIR"), "agent-reservations", "link");
    // The server's end: its agent listener and two agent sites, as `coalloc serve` makes them.
    let (cert, key) = tls::server_identity(&dir.join("agents")).unwrap();
    let fingerprint = tls::fingerprint(&cert);
    let tls_config = tls::server_config(cert, key).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("wss://{}", listener.local_addr().unwrap());
    let heartbeat = Duration::from_millis(200);
    let sites: BTreeMap<_, _> = ["r1", "r2"]
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let site = AgentSite::new(name.into(), i, Duration::from_secs(1));
            (name.to_string(), (i, Arc::new(site)))
        })
        .collect();
    let (r1, r2) = (sites["r1"].1.clone(), sites["r2"].1.clone());
    let hub = Arc::new(Hub::new(
        sites,
        url,
        fingerprint,
        heartbeat,
        dir.join("agents/credentials.json"),
    ));
    let (driver, _inbox) = std::sync::mpsc::channel();
    tokio::spawn(
        hub.clone()
            .listen(listener, tls_config, axum::Router::new(), driver),
    );
    let b1: Arc<dyn Backend> = Arc::new(AgentBackend(r1.clone()));
    let b2: Arc<dyn Backend> = Arc::new(AgentBackend(r2.clone()));
    assert!(!b1.may_reserve(), "no agent has said so yet");

    // The agents: r1 on a calendar of 8 processors, r2 forbidden to reserve.
    let agent = |site: &str, agent_table: &str| {
        let config = AgentConfig::parse(&format!(
            "[agent]\nrelay_bind = \"127.0.0.1:{}\"\n{agent_table}\
             [[site]]\nname = \"{site}\"\nprocessors = 8\nmanager = {{ type = \"local\" }}\n",
            free_port()
        ))
        .unwrap();
        let calendar = Calendar {
            processors: 8,
            held: Mutex::new(BTreeMap::new()),
        };
        let token = hub.enrol(site).unwrap();
        let state = dir.join(format!("agent-{site}"));
        let a = Agent::with_backend(token, None, config, &state, Arc::new(calendar), None);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(a.unwrap().run(async move {
            let _ = stopped.await;
        }));
        (stop, run)
    };
    let (stop1, run1) = agent("r1", "");
    let (stop2, run2) = agent("r2", "reserve = false\n");
    until_linked(&r1, true).await;
    until_linked(&r2, true).await;

    // r1 may reserve: a calendar kept at the site, through the link.
    assert_eq!(r1.reserving(), Reserving::May);
    assert!(b1.may_reserve());
    let b = b1.clone();
    let (first, made, later, refused, listed) = on_thread(move || {
        let first = b.reserve_earliest(8, 60_000, 1_000).unwrap();
        b.reserve("coalloc-J1-c0-1", 8, first, 60_000).unwrap();
        let made = b.reservations().unwrap();
        let later = b.reserve_earliest(2, 60_000, 1_000).unwrap();
        let refused = b.reserve("coalloc-J2-c0-1", 2, 1_000, 60_000).unwrap_err();
        let listed = b.reservations().unwrap();
        (first, made, later, refused, listed)
    })
    .await;
    assert_eq!(first, 1_000);
    assert_eq!(made, ["coalloc-J1-c0-1"]);
    assert_eq!(later, 61_000, "after the first reservation's end");
    assert!(
        matches!(&refused, BackendError::Rejected(m) if m == "only 0 of 8 processors are free then"),
        "{refused}"
    );
    assert_eq!(listed, ["coalloc-J1-c0-1"], "the refused one is not made");
    let b = b1.clone();
    let (gone, again, earliest) = on_thread(move || {
        b.unreserve("coalloc-J1-c0-1").unwrap();
        // Deleting one that is not there is not an error.
        b.unreserve("coalloc-J1-c0-1").unwrap();
        let gone = b.reservations().unwrap();
        let earliest = b.reserve_earliest(2, 60_000, 1_000).unwrap();
        (gone, b.reservations().unwrap(), earliest)
    })
    .await;
    assert!(gone.is_empty() && again.is_empty());
    assert_eq!(earliest, 1_000, "free again");

    // r2 may not: its hello said so, and its reservation calls are refused with the reason.
    let Reserving::MayNot(why) = r2.reserving() else {
        panic!("r2 may reserve")
    };
    assert!(
        why.contains("agent.reserve = false") && why.contains("r2"),
        "{why}"
    );
    assert!(!b2.may_reserve());
    let b = b2.clone();
    let (earliest, reserve, listed) = on_thread(move || {
        (
            b.reserve_earliest(2, 60_000, 1_000).unwrap_err(),
            b.reserve("coalloc-J3-c0-1", 2, 1_000, 60_000).unwrap_err(),
            b.reservations().unwrap(),
        )
    })
    .await;
    for e in [earliest, reserve] {
        assert!(matches!(&e, BackendError::Rejected(m) if *m == why), "{e}");
    }
    assert!(listed.is_empty());

    // r1's agent stops: its calls fail as Unavailable, as any call on a link that is down.
    stop1.send(()).unwrap();
    run1.await.unwrap().unwrap();
    until_linked(&r1, false).await;
    let b = b1.clone();
    let e = on_thread(move || b.reserve("coalloc-J4-c0-1", 1, 1_000, 1_000).unwrap_err()).await;
    assert!(
        matches!(&e, BackendError::Unavailable(m) if m.contains("not connected")),
        "{e}"
    );
    stop2.send(()).unwrap();
    run2.await.unwrap().unwrap();
}
