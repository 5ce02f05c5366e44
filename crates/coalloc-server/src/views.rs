//! The API's types: every JSON body the HTTP API takes or answers, as Rust structs. The
//! handlers serialize these, the driver builds them, and the OpenAPI document's schemas and
//! examples are generated from them (utoipa, [`crate::api::openapi`]).

mod files;
mod output;
mod users;
pub use files::*;
pub use output::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
pub use users::*;
use utoipa::ToSchema;

/// A refusal: every 4xx and 5xx answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"error": "no job 7"}))]
pub struct ErrorBody {
    pub error: String,
}

/// `GET /v1/health`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"ok": true, "version": "0.1.0"}))]
pub struct Health {
    pub ok: bool,
    pub version: String,
}

/// A job in the native spec (the JSON form of the TOML job files; `coalloc job convert
/// --to json` writes it). Durations are seconds or strings such as `"90s"`, `"1h30m"`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "name": "poisson", "user": "demo", "kind": "unordered", "max_wall_time": "5m",
    "component": [
        {"count": 4, "job_type": "single", "executable": "/usr/bin/solver", "arguments": ["--n", "48"]},
        {"count": 4, "job_type": "single", "executable": "/usr/bin/solver", "arguments": ["--n", "48"]}
    ]
}))]
pub struct JobSpec {
    pub name: Option<String>,
    pub user: Option<String>,
    /// `high` or `low` (KOALA's queues).
    pub priority: Option<String>,
    /// `ordered`, `unordered`, `flexible` or `total`.
    pub kind: Option<String>,
    /// Flexible and total jobs: processors to split over sites, and the smallest piece.
    pub total: Option<i64>,
    pub min_component: Option<i64>,
    #[schema(value_type = Option<Object>)]
    pub deadline: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub runtime_estimate: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub max_wall_time: Option<Value>,
    /// `{name, size, distribution}`: the job's input file.
    #[schema(value_type = Option<Object>)]
    pub input_file: Option<Value>,
    #[serde(default)]
    pub component: Vec<ComponentSpec>,
}

/// One component of a [`JobSpec`].
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"count": 4, "job_type": "single", "executable": "/bin/hostname"}))]
pub struct ComponentSpec {
    pub count: Option<i64>,
    /// Ordered jobs: the site it must run on.
    pub site: Option<String>,
    /// `required`, `interactive` or `optional` (or strict-barrier, loose-barrier, no-barrier).
    pub start_type: Option<String>,
    pub executable: Option<String>,
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub arguments: Vec<Value>,
    /// Environment variables, name to value.
    #[schema(value_type = Option<Object>)]
    pub environment: Option<Value>,
    pub directory: Option<String>,
    pub label: Option<String>,
    /// `single`, `multiple` or `mpi`.
    pub job_type: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub max_wall_time: Option<Value>,
    /// Attributes passed through verbatim: `{name, op, value}`.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub attribute: Vec<Value>,
}

/// `POST /v1/jobs`: the number the job was given (an array: its first element's, and the
/// array as `FIRST_[START-END]`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"job": 12, "array": "12_[0-999]"}))]
pub struct Submitted {
    pub job: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<String>,
    /// The queue was full (`max_queued`): the job waits in the admission backlog and enters
    /// the queue, in submission order, as room frees.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub awaiting_admission: bool,
}

/// `DELETE /v1/arrays/{id}`: the elements cancelled (those that had not ended).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"array": 12, "cancelled": [15, 16, 17]}))]
pub struct ArrayCancelled {
    pub array: u64,
    pub cancelled: Vec<u64>,
}

/// `POST /v1/jobs/batch`: many jobs in one request, each in the native JSON spec.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"jobs": [
    {"name": "a", "kind": "unordered", "component": [{"count": 1, "executable": "/bin/true"}]},
    {"name": "b", "kind": "unordered", "component": [{"count": 2, "executable": "/bin/true"}]}
]}))]
pub struct BatchBody {
    #[schema(value_type = Vec<JobSpec>)]
    pub jobs: Vec<Value>,
}

/// The answer to a batch: each job's number in the batch's order (`null` for one the
/// scheduler refused), and why each refused one was.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"jobs": [7, null], "errors": [{"index": 1, "error": "job needs 40 processors on one site; the largest has 16"}]}))]
pub struct BatchSubmitted {
    pub jobs: Vec<Option<u64>>,
    pub errors: Vec<BatchError>,
}

/// A job of a batch the scheduler refused.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"index": 1, "error": "job needs 40 processors on one site; the largest has 16"}))]
pub struct BatchError {
    /// Its place in the batch, from 0.
    pub index: usize,
    pub error: String,
}

/// One component of a job as the API shows it. The fields after `launch` are in
/// `GET /v1/jobs/{id}` only.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"index": 0, "count": 4, "state": "ready", "site": "alpha", "launch": 3,
    "remote": "L3", "checked_in": 1, "processes": 1, "executable": "/bin/sh", "label": "strip-0"}))]
pub struct ComponentView {
    pub index: usize,
    pub count: u32,
    /// idle, submitted, started, ready (at the barrier), finished, failed, deleted.
    pub state: String,
    pub site: Option<String>,
    pub launch: Option<u64>,
    /// The resource manager's handle of the launch (a Slurm job id, a local launch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// Processes of the launch that checked in at the barrier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_in: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Under reserve claiming (issue 31): the name of the component's reservation at its
    /// site, where it stands (asking, offered, requested, made, started, refused), and the
    /// common start promised to every component (ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promised_start: Option<i64>,
}

/// A job as the API shows it; times are milliseconds since the Unix epoch. The fields after
/// `last_abort` are in `GET /v1/jobs/{id}` only.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"id": 1, "name": "poisson", "user": "demo", "state": "running",
    "processors": 12, "submit": 1764078000000_i64, "start": 1764078000040_i64, "end": null,
    "components": [{"index": 0, "count": 4, "state": "ready", "site": "alpha", "launch": 1}],
    "placement_tries": 1, "claiming_tries": 0, "submit_failures": 0, "completion_failures": 0,
    "placed": 1764078000002_i64, "barrier_release": 1764078000040_i64, "wait_ms": 40,
    "response_ms": null, "run_ms": null, "sites": ["alpha"]}))]
pub struct JobView {
    pub id: u64,
    pub name: Option<String>,
    pub user: Option<String>,
    /// awaiting-admission (submitted while the queue was full), queued, claiming, starting,
    /// running, finished, failed.
    pub state: String,
    pub processors: u64,
    pub submit: i64,
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub components: Vec<ComponentView>,
    pub placement_tries: u32,
    #[serde(default)]
    pub claiming_tries: u32,
    pub submit_failures: u32,
    pub completion_failures: u32,
    /// Why the job's last start was aborted (or why it failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_abort: Option<String>,
    /// A queued job waiting out its retry back-off: when it is tried again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<i64>,
    /// An array's element: `FIRST_INDEX` (the array's first job, the element's index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier_release: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sites: Option<Vec<String>>,
    /// The input file's transfers of the current run (seed 000 §2.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfers: Option<Vec<TransferView>>,
}

/// A page of `GET /v1/jobs` or `GET /v1/history`: the jobs, by number, and where the next
/// page starts (`after=NEXT`); no `next` on the last page.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"jobs": [{"id": 1, "name": "batch-0", "user": "demo", "state": "queued",
    "processors": 4, "submit": 1764078000000_i64, "start": null, "end": null, "components": [],
    "placement_tries": 0, "claiming_tries": 0, "submit_failures": 0, "completion_failures": 0}],
    "next": 1}))]
pub struct JobList {
    pub jobs: Vec<JobView>,
    /// The cursor of the next page: pass it as `after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// `DELETE /v1/jobs/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"job": 1, "cancelled": true}))]
pub struct Cancelled {
    pub job: u64,
    pub cancelled: bool,
}

/// `POST /v1/jobs/{id}/edit`: `add` a component, `delete` or `substitute` the one at
/// `index` (seed 002 §3.2), before the job commits.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"op": "substitute", "index": 1,
    "component": {"count": 2, "job_type": "single", "executable": "/bin/hostname"}}))]
pub struct EditBody {
    /// add, delete or substitute.
    pub op: String,
    pub index: Option<usize>,
    /// A component in the native spec ([`ComponentSpec`]).
    #[schema(value_type = Option<ComponentSpec>)]
    pub component: Option<Value>,
}

/// `POST /v1/jobs/{id}/commit`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"job": 1, "committed": true}))]
pub struct Committed {
    pub job: u64,
    pub committed: bool,
}

/// The answer to an edit.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"job": 1, "edited": "substitute"}))]
pub struct Edited {
    pub job: u64,
    pub edited: String,
}

/// A cloud site's VMs and bill.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"vms": 2, "capacity": 4, "leases": 3, "lease_failures": 0, "peak_vms": 2,
    "vm_hours": 3, "cost": 0.195, "price_per_vm_hour": 0.065, "nodes": ["burst-vm1", "burst-vm2"]}))]
pub struct CloudView {
    pub vms: u32,
    pub capacity: u32,
    pub leases: u64,
    pub lease_failures: u64,
    pub peak_vms: u32,
    pub vm_hours: u64,
    /// Dollars billed so far.
    pub cost: f64,
    pub price_per_vm_hour: f64,
    pub nodes: Vec<String>,
}

/// One site with its load: processors in all, idle, held by coalloc and by other users.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "alpha", "kind": "cluster", "backend": "local", "processors": 16,
    "total": 16, "idle": 8, "coalloc": 4, "other": 4, "healthy": true, "usable": true,
    "submit_errors": 0, "completion_errors": 0, "failed_launches": 0, "cloud": null}))]
pub struct SiteView {
    pub name: String,
    /// cluster or cloud.
    pub kind: String,
    /// local or slurm.
    pub backend: String,
    pub processors: u32,
    pub total: u32,
    pub idle: u32,
    pub coalloc: u32,
    pub other: u32,
    pub healthy: bool,
    pub usable: Option<bool>,
    pub submit_errors: Option<u32>,
    pub completion_errors: Option<u32>,
    pub failed_launches: u64,
    pub cloud: Option<CloudView>,
    /// An agent site's link to its agent (absent for other sites).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkView>,
    /// `unreachable`: an agent site whose link has been down past its grace period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Why the site is not usable now (an operator's drain or down, its errors, its
    /// resource manager not answering); absent while it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_reason: Option<String>,
    /// Since when it has not been usable (milliseconds since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_since: Option<i64>,
    /// Let back in by a probe: its next error takes it out at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probation: bool,
    /// Bandwidth to other sites, configured and measured (absent when none is known).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bandwidth: Vec<BandwidthView>,
}

/// The link of an agent site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"connected": false, "down_for_ms": 4200, "unreachable": true}))]
pub struct LinkView {
    pub connected: bool,
    /// Milliseconds since the link went down (absent while connected).
    pub down_for_ms: Option<u64>,
    /// Down for longer than the site's grace period.
    pub unreachable: bool,
}

impl LinkView {
    /// A link as the core heard it (`coalloc_core::scheduler::link`), at `now`.
    pub fn of(
        link: coalloc_core::scheduler::link::LinkState,
        now: coalloc_core::model::Time,
    ) -> LinkView {
        use coalloc_core::scheduler::link::LinkState;
        let since = match link {
            LinkState::Up => None,
            LinkState::Disconnected { since, .. } | LinkState::Lost { since } => Some(since),
        };
        LinkView {
            connected: link.is_up(),
            down_for_ms: since.map(|s| now.saturating_sub(s).max(0) as u64),
            unreachable: matches!(link, LinkState::Lost { .. }),
        }
    }
}

/// `POST /v1/sites/{name}/agent-token`: a new enrolment token for an agent site.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"site": "s1", "server": "wss://10.200.0.1:7443",
    "fingerprint": "sha256:014f4fadb87d77a3e866a34530849a217b3897da7dbfc07aef1226bb1fa28972",
    "token": "coalloc-agent-1.eyJzZXJ2ZXIiOiJ3c3M6Ly8xMC4yMDAuMC4xOjc0NDMiLCJmaW5nZXJwcmludCI6InNoYTI1NjowMTRmNGZhZGI4N2Q3N2EzZTg2NmEzNDUzMDg0OWEyMTdiMzg5N2RhN2RiZmMwN2FlZjEyMjZiYjFmYTI4OTcyIiwic2l0ZSI6InMxIiwic2VjcmV0IjoiNWYxYzVmMWM1ZjFjNWYxYzVmMWM1ZjFjNWYxYzVmMWM1ZjFjNWYxYzVmMWM1ZjFjNWYxYzVmMWM1ZjFjNWYxYyJ9"}))]
pub struct AgentTokenView {
    pub site: String,
    /// The server's agent address.
    pub server: String,
    /// The other servers' agent addresses (standbys on the same journal, `server.agent_urls`),
    /// which the agent tries when it loses the first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<String>,
    /// The server certificate's fingerprint, which the agent pins.
    pub fingerprint: String,
    /// The enrolment token: give it to `coalloc agent --token-file`.
    pub token: String,
}

/// The scheduler's policies.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"policy": "fcfs", "fit": "worst", "claiming": "immediate"}))]
pub struct SchedulerView {
    pub policy: String,
    pub fit: String,
    pub claiming: String,
}

/// `GET /v1/sites`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"sites": [{"name": "alpha", "kind": "cluster", "backend": "local",
    "processors": 16, "total": 16, "idle": 16, "coalloc": 0, "other": 0, "healthy": true,
    "usable": true, "submit_errors": 0, "completion_errors": 0, "failed_launches": 0, "cloud": null}],
    "scheduler": {"policy": "fcfs", "fit": "worst", "claiming": "immediate"}}))]
pub struct SitesView {
    pub sites: Vec<SiteView>,
    pub scheduler: SchedulerView,
}

/// `PUT /v1/sites/{name}/usable`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"usable": false}))]
pub struct UsableBody {
    pub usable: bool,
}

/// `PUT /v1/sites/{name}/control`: an operator's drain, down or resume (Slurm's
/// `scontrol update state=`), with a reason.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"action": "drain", "reason": "disk swap at 14:00"}))]
pub struct ControlBody {
    /// drain (no new components; running ones finish), down (out until resumed), resume.
    #[schema(value_type = String)]
    pub action: coalloc_core::scheduler::sites::SiteControl,
    #[serde(default)]
    pub reason: String,
}

/// The answer to a site control.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"site": "alpha", "action": "drain"}))]
pub struct ControlAnswer {
    pub site: String,
    pub action: String,
}

/// The answer to a usable mark.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"site": "alpha", "usable": false}))]
pub struct UsableAnswer {
    pub site: String,
    pub usable: bool,
}

/// A barrier check-in (seed 002 §3.3): the launch (`COALLOC_LAUNCH`), the process's local
/// rank, and whether it started well (with a reason when not).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"launch": 3, "local_rank": 0, "ok": true, "reason": null}))]
pub struct CheckIn {
    pub launch: u64,
    #[serde(default)]
    pub local_rank: u32,
    pub ok: bool,
    pub reason: Option<String>,
}

/// What a barrier check-in hears.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
#[schema(example = json!({"state": "aborted", "reason": "component 2 failed to start"}))]
pub enum BarrierAnswer {
    Released,
    Aborted { reason: String },
    Waiting,
}

/// One `data:` line of the event stream (`GET /v1/events`): what happened (`event`:
/// submitted, placed, component_submitted, component_started, component_checked_in (every
/// process of the launch is at the barrier), component_finished,
/// component_failed, committed, requeued, interactive_failed, optional_failed, preempted,
/// cancelled, finished, failed, site_up, site_down, site_usable, site_unusable,
/// vm_requested, vm_leased, vm_released, transfer_started, transfer_progress, transfer_done,
/// transfer_failed, local_preempted), when (milliseconds since the Unix epoch), and the fields that apply to
/// it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"event": "component_submitted", "time": 1764078000002_i64, "job": 1,
    "component": 0, "launch": 1, "site": "alpha"}))]
pub struct StreamEvent {
    pub event: String,
    pub time: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<u64>,
    /// `submitted`: the queue was full, the job waits for admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_admission: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// `placed`: the site of each component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sites: Option<Vec<Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `local_preempted`: the processors GP asked the site to free by preempting its local
    /// jobs (seed 001 §2.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processors: Option<u32>,
    /// `preempted`: the job it made room for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Transfers (seed 000 §2.5): the core's transfer number, the logical file, its sites,
    /// bytes at the destination so far, the file's size; `transfer_done`: bytes this
    /// transfer moved and the milliseconds it took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<u64>,
}
