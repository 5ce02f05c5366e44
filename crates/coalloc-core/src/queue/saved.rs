//! A queue policy's state in a snapshot of the scheduler ([`crate::scheduler::snapshot`]):
//! one variant per policy of this crate, written from a borrow ([`SavedRef`]) and read back
//! as an owned policy ([`Saved`]). The two enums have the same variants, so they have the
//! same serialized form.

use super::backfill::{Conservative, Easy};
use super::fcfs::ArrivalOrder;
use super::koala::Koala;
use super::koala_c::KoalaC;
use super::rpp::Rpp;
use super::tags::Tags;
use super::QueuePolicy;
use serde::{Deserialize, Serialize};

/// A policy's state, borrowed, to write.
#[derive(Debug, Clone, Copy, Serialize)]
pub enum SavedRef<'a> {
    Arrival(&'a ArrivalOrder),
    Easy(&'a Easy),
    Conservative(&'a Conservative),
    Koala(&'a Koala),
    Rpp(&'a Rpp),
    KoalaC(&'a KoalaC),
    Tags(&'a Tags),
}

/// A policy's state, read back.
#[derive(Debug, Deserialize)]
pub enum Saved {
    Arrival(ArrivalOrder),
    Easy(Easy),
    Conservative(Conservative),
    Koala(Koala),
    Rpp(Rpp),
    KoalaC(KoalaC),
    Tags(Tags),
}

impl Saved {
    /// The policy, as it was when it was saved.
    pub fn into_policy(self) -> Box<dyn QueuePolicy> {
        match self {
            Saved::Arrival(p) => Box::new(p),
            Saved::Easy(p) => Box::new(p),
            Saved::Conservative(p) => Box::new(p),
            Saved::Koala(p) => Box::new(p),
            Saved::Rpp(p) => Box::new(p),
            Saved::KoalaC(p) => Box::new(p),
            Saved::Tags(p) => Box::new(p),
        }
    }
}
