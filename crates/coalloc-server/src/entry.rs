//! What the journal holds: the core's input events in a stable, serializable form, plus the
//! driver's own bookkeeping that a restart needs (which resource-manager handle a launch got,
//! the rendezvous store's values).

use coalloc_core::model::Job;
use coalloc_core::scheduler::sites::SiteControl;
use coalloc_core::scheduler::{Edit, Event, Fault, LaunchId, ReservationId};
use coalloc_core::spec::edit::one_component;
use coalloc_core::spec::native;
use serde::{Deserialize, Serialize};

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "e", rename_all = "snake_case")]
pub enum Entry {
    /// A job, in the native JSON spec (lossless), and the job's secret.
    Submit {
        job: String,
        secret: String,
    },
    Cancel {
        job: u64,
    },
    /// The owner's commit of a job held at the barrier.
    Commit {
        job: u64,
    },
    /// An edit before commit; `component` is a native JSON job with the one new component.
    Edit {
        job: u64,
        op: EditOp,
        index: usize,
        component: Option<String>,
    },
    SiteStatus {
        site: usize,
        idle: u32,
        total: u32,
        healthy: bool,
        /// Other users' processors (0 in entries written before it was kept).
        #[serde(default)]
        other: u32,
    },
    SetUsable {
        site: usize,
        usable: bool,
    },
    /// An agent site's link went silent (`up: false`, lost past `grace` ms) or came back.
    SiteLink {
        site: usize,
        up: bool,
        #[serde(default)]
        grace: i64,
    },
    SiteControl {
        site: usize,
        control: SiteControl,
        reason: String,
    },
    Queued {
        launch: u64,
    },
    Started {
        launch: u64,
    },
    Ready {
        launch: u64,
    },
    Failed {
        launch: u64,
        reason: String,
        /// Who it counts against; entries written before it existed count against the site,
        /// as every failure did then.
        #[serde(default)]
        fault: Fault,
    },
    Finished {
        launch: u64,
    },
    /// A draining launch (of a stopped committed run, the core's `draining` module) is gone
    /// from its site: its cancel took effect, or it ended by itself.
    CancelTaken {
        launch: u64,
    },
    TransferDone {
        transfer: u64,
        ok: bool,
    },
    Tick,
    /// A cloud VM is leased (as `node`) on `site` (seed 004 §III-B).
    VmLeased {
        site: usize,
        vm: u64,
        node: String,
    },
    LeaseFailed {
        site: usize,
        vm: u64,
        reason: String,
    },
    VmReleased {
        site: usize,
        vm: u64,
    },
    /// A replica of logical file `name` on `site` (seed 000 §2.3): registered by an
    /// operator, or made by a transfer (`cached`: evictable, see `catalog`).
    ReplicaAdded {
        site: usize,
        name: String,
        path: String,
        size: u64,
        blake3: String,
        #[serde(default)]
        cached: bool,
    },
    /// A transfer's measured throughput (the bandwidth model learns).
    TransferMeasured {
        from: usize,
        to: usize,
        bytes: u64,
        millis: u64,
    },
    /// The replica of `name` on `site` is gone (removed by an operator, or evicted).
    ReplicaRemoved {
        site: usize,
        name: String,
    },
    /// A site's earliest start for a reservation (issue 31), or why it has none.
    ReserveOffer {
        reservation: u64,
        earliest: Result<i64, String>,
    },
    /// A site made a reservation, or refused it.
    Reserved {
        reservation: u64,
        result: Result<(), String>,
    },
    /// After a restart: the reservations a site holds under coalloc's names, and those
    /// asked for and not answered when the list was asked for (`None` in entries written
    /// before it was kept: every one).
    ReservationsFound {
        site: usize,
        names: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pending: Option<Vec<String>>,
    },
    /// Bookkeeping: the resource manager accepted a launch under this handle.
    Launched {
        launch: u64,
        remote: String,
    },
    /// Bookkeeping: a rendezvous value.
    KvPut {
        job: u64,
        key: String,
        value: String,
    },
    /// Bookkeeping: jobs `first .. first + count` are one array, of indexes from `start`.
    Array {
        first: u64,
        start: u32,
        count: u32,
    },
    /// Bookkeeping: these ended jobs left memory for the history table (written in the same
    /// transaction).
    Forget {
        jobs: Vec<u64>,
    },
}

/// The kinds of edit (seed 002 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EditOp {
    Add,
    Delete,
    Substitute,
}

impl Entry {
    /// The journal form of a job.
    pub fn submit(job: &Job, secret: String) -> Entry {
        Entry::Submit {
            job: native::to_json_line(job),
            secret,
        }
    }

    /// The core event this entry stands for (`None` for bookkeeping entries).
    ///
    /// A job or component that no longer parses is an error: the journal was written by a
    /// different version of coalloc.
    pub fn to_event(&self) -> Result<Option<Event>, String> {
        use coalloc_core::provisioning::VmId;
        use coalloc_core::scheduler::TransferId;
        let l = |launch: &u64| LaunchId(*launch);
        Ok(Some(match self {
            Entry::Submit { job, .. } => {
                Event::Submit(Box::new(native::from_json(job).map_err(|e| e.to_string())?))
            }
            Entry::Cancel { job } => Event::Cancel { job: *job },
            Entry::Commit { job } => Event::Commit { job: *job },
            Entry::Edit {
                job,
                op,
                index,
                component,
            } => {
                let comp = component
                    .as_deref()
                    .map(one_component)
                    .transpose()
                    .map_err(|e| e.to_string())?;
                let edit = match (op, comp) {
                    (EditOp::Delete, _) => Edit::Delete(*index),
                    (EditOp::Add, Some(c)) => Edit::Add(c),
                    (EditOp::Substitute, Some(c)) => Edit::Substitute(*index, c),
                    _ => return Err("an add or substitute edit without a component".into()),
                };
                Event::Edit { job: *job, edit }
            }
            Entry::SiteStatus {
                site,
                idle,
                total,
                healthy,
                other,
            } => Event::SiteStatus {
                site: *site,
                idle: *idle,
                total: *total,
                healthy: *healthy,
                other: *other,
            },
            Entry::SetUsable { site, usable } => Event::SetUsable {
                site: *site,
                usable: *usable,
            },
            Entry::SiteLink {
                site,
                up: false,
                grace,
            } => Event::SiteDisconnected {
                site: *site,
                grace: *grace,
            },
            Entry::SiteLink { site, up: true, .. } => Event::SiteReconnected { site: *site },
            Entry::SiteControl {
                site,
                control,
                reason,
            } => Event::SiteControl {
                site: *site,
                control: *control,
                reason: reason.clone(),
            },
            Entry::Queued { launch } => Event::ComponentQueued { launch: l(launch) },
            Entry::Started { launch } => Event::ComponentStarted { launch: l(launch) },
            Entry::Ready { launch } => Event::ComponentReady { launch: l(launch) },
            Entry::Failed {
                launch,
                reason,
                fault,
            } => Event::ComponentFailed {
                launch: l(launch),
                reason: reason.clone(),
                fault: *fault,
            },
            Entry::Finished { launch } => Event::ComponentFinished { launch: l(launch) },
            Entry::CancelTaken { launch } => Event::CancelTaken { launch: l(launch) },
            Entry::TransferDone { transfer, ok } => Event::TransferDone {
                transfer: TransferId(*transfer),
                ok: *ok,
            },
            Entry::Tick => Event::Tick,
            Entry::VmLeased { vm, .. } => Event::VmLeased { vm: VmId(*vm) },
            Entry::LeaseFailed { vm, reason, .. } => Event::LeaseFailed {
                vm: VmId(*vm),
                reason: reason.clone(),
            },
            Entry::VmReleased { vm, .. } => Event::VmReleased { vm: VmId(*vm) },
            Entry::ReserveOffer {
                reservation,
                earliest,
            } => Event::ReserveOffer {
                reservation: ReservationId(*reservation),
                earliest: earliest.clone(),
            },
            Entry::Reserved {
                reservation,
                result,
            } => Event::Reserved {
                reservation: ReservationId(*reservation),
                result: result.clone(),
            },
            Entry::ReservationsFound {
                site,
                names,
                pending,
            } => Event::ReservationsFound {
                site: *site,
                names: names.clone(),
                pending: pending.clone(),
            },
            Entry::Launched { .. }
            | Entry::KvPut { .. }
            | Entry::Forget { .. }
            | Entry::Array { .. } => return Ok(None),
            Entry::ReplicaAdded { site, name, .. } => Event::Replica {
                site: *site,
                file: name.clone(),
                present: true,
            },
            Entry::TransferMeasured {
                from,
                to,
                bytes,
                millis,
            } => Event::TransferMeasured {
                from: *from,
                to: *to,
                bytes: *bytes,
                millis: *millis,
            },
            Entry::ReplicaRemoved { site, name } => Event::Replica {
                site: *site,
                file: name.clone(),
                present: false,
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_json() {
        let e = Entry::Failed {
            launch: 3,
            reason: "exit 2".into(),
            fault: Fault::Job,
        };
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(
            text,
            r#"{"e":"failed","launch":3,"reason":"exit 2","fault":"job"}"#
        );
        assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), e);
        assert_eq!(
            e.to_event().unwrap(),
            Some(Event::ComponentFailed {
                launch: LaunchId(3),
                reason: "exit 2".into(),
                fault: Fault::Job,
            })
        );
        // A journal written before failure classes: the site's, as then.
        let old: Entry = serde_json::from_str(r#"{"e":"failed","launch":3,"reason":"x"}"#).unwrap();
        assert!(matches!(
            old,
            Entry::Failed {
                fault: Fault::Site,
                ..
            }
        ));
        let taken = Entry::CancelTaken { launch: 9 };
        let text = serde_json::to_string(&taken).unwrap();
        assert_eq!(text, r#"{"e":"cancel_taken","launch":9}"#);
        assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), taken);
        assert_eq!(
            taken.to_event().unwrap(),
            Some(Event::CancelTaken {
                launch: LaunchId(9)
            })
        );
        assert_eq!(
            Entry::KvPut {
                job: 1,
                key: "k".into(),
                value: "v".into()
            }
            .to_event(),
            Ok(None)
        );
    }
}
