//! The driver's side of a simulated site: [`SimLink`], the [`SiteLink`] double that takes
//! each call as it is sent (DESIGN.md habit 3: every request is serialized and read back,
//! so a call that cannot cross a wire fails the run).

use coalloc_backends::SubmitRequest;
use coalloc_server::msg::SiteLink;
use std::sync::{Arc, Mutex};

/// A call the driver made to a site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Submit(Box<SubmitRequest>),
    Cancel(String),
    CancelUnrecorded {
        job: u64,
        component: usize,
        launch: u64,
    },
    Watch {
        launch: u64,
        remote: String,
    },
    Forget(u64),
    KillLocal(u32),
    Discard(String),
    Lease(u64),
    Release {
        vm: u64,
        node: String,
    },
}

/// The calls made since the harness last took them, by site, in order.
pub type Outbox = Arc<Mutex<Vec<(usize, Call)>>>;

/// One site's link: it puts every call in the shared outbox.
pub struct SimLink {
    pub site: usize,
    pub out: Outbox,
}

impl SimLink {
    fn put(&self, c: Call) {
        self.out
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((self.site, c));
    }
}

impl SiteLink for SimLink {
    fn submit(&self, request: SubmitRequest) {
        let text = serde_json::to_string(&request).expect("a submit request serializes");
        let back: SubmitRequest = serde_json::from_str(&text).expect("and reads back");
        assert_eq!(back, request, "a submit request crosses the wire unchanged");
        self.put(Call::Submit(Box::new(back)));
    }
    fn cancel(&self, remote: String) {
        self.put(Call::Cancel(remote));
    }
    fn cancel_unrecorded(&self, job: u64, component: usize, launch: u64) {
        self.put(Call::CancelUnrecorded {
            job,
            component,
            launch,
        });
    }
    fn watch(&self, launch: u64, remote: String) {
        self.put(Call::Watch { launch, remote });
    }
    fn forget(&self, launch: u64) {
        self.put(Call::Forget(launch));
    }
    fn kill_local(&self, processors: u32) {
        self.put(Call::KillLocal(processors));
    }
    fn discard(&self, remote: String) {
        self.put(Call::Discard(remote));
    }
    fn lease(&self, vm: u64) {
        self.put(Call::Lease(vm));
    }
    fn release(&self, vm: u64, node: String) {
        self.put(Call::Release { vm, node });
    }
}
