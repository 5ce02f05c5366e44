//! The driver's side of a simulated site: [`SimLink`], the [`SiteLink`] double that takes
//! each call as it is sent (DESIGN.md habit 3: every submission is serialized and read
//! back, so a request that cannot cross a wire fails the run), and [`SimWork`], the
//! driver's file work kept for the harness to play.

use coalloc_backends::SubmitRequest;
use coalloc_server::driver::work::{Spawner, Work};
pub use coalloc_server::msg::SiteCall as Call;
use coalloc_server::msg::SiteLink;
use std::sync::{Arc, Mutex};

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
    fn send(&self, call: Call) {
        if let Call::Submit(r) = &call {
            let text = serde_json::to_string(r).expect("a submit request serializes");
            let back: SubmitRequest = serde_json::from_str(&text).expect("and reads back");
            assert_eq!(&back, &**r, "a submit request crosses the wire unchanged");
        }
        self.put(call);
    }
}

/// The file work the driver handed out since the harness last took it.
pub type WorkBox = Arc<Mutex<Vec<Work>>>;

/// The driver's [`Spawner`]: nothing runs until the harness plays it.
pub struct SimWork(pub WorkBox);

impl Spawner for SimWork {
    fn spawn(&self, work: Work) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(work);
    }
}
