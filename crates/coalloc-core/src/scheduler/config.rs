//! The scheduler's configuration: every policy chosen by name, with its parameters.

use super::sites::SiteFaultLimits;
use crate::model::Millis;
use crate::placement::{Fit, FlexibleFit};
use crate::queue::{fcfs::ArrivalOrder, QueuePolicy};

/// Which queue policy, by name.
#[derive(Debug, Clone, PartialEq)]
pub enum QueueConfig {
    Fcfs,
    Fpfs,
    Easy,
    Conservative,
    Koala(crate::queue::koala::KoalaParams),
    Rpp(crate::queue::rpp::RppParams),
    /// Seed 004 §IV-A's First-Fit ([`crate::queue::koala_c`]).
    Ff(crate::queue::koala_c::KoalaCParams),
    /// Seed 004 §IV-A's Round-Robin.
    Rr(crate::queue::koala_c::KoalaCParams),
    /// Seed 004 §IV-A's Shortest-Job-First with runtime predictions.
    Sjf(crate::queue::koala_c::KoalaCParams),
    /// Seed 004 §IV-A's SJF-ideal: `runtime_estimate` taken as the exact runtime.
    SjfIdeal(crate::queue::koala_c::KoalaCParams),
    /// Seed 004 §IV-A's Highest-SlowDown-First.
    Hsdf(crate::queue::koala_c::KoalaCParams),
    /// Seed 004 §IV-B's TAGS-chain ([`crate::queue::tags`]).
    TagsChain(crate::queue::tags::TagsChainParams),
    /// Seed 004 §IV-C's TAGS-sets.
    TagsSets(crate::queue::tags::TagsSetsParams),
}

impl QueueConfig {
    pub const NAMES: &'static [&'static str] = &[
        "fcfs",
        "fpfs",
        "easy",
        "conservative",
        "koala",
        "rpp",
        "ff",
        "rr",
        "sjf",
        "sjf-ideal",
        "hsdf",
        "tags-chain",
        "tags-sets",
    ];

    pub fn from_name(name: &str) -> Result<QueueConfig, String> {
        match name.to_ascii_lowercase().as_str() {
            "fcfs" => Ok(QueueConfig::Fcfs),
            "fpfs" => Ok(QueueConfig::Fpfs),
            "easy" => Ok(QueueConfig::Easy),
            "conservative" => Ok(QueueConfig::Conservative),
            "koala" => Ok(QueueConfig::Koala(Default::default())),
            "rpp" => Ok(QueueConfig::Rpp(Default::default())),
            "ff" => Ok(QueueConfig::Ff(Default::default())),
            "rr" => Ok(QueueConfig::Rr(Default::default())),
            "sjf" => Ok(QueueConfig::Sjf(Default::default())),
            "sjf-ideal" => Ok(QueueConfig::SjfIdeal(Default::default())),
            "hsdf" => Ok(QueueConfig::Hsdf(Default::default())),
            // The TAGS policies need their chains / sets and limits filled in.
            "tags-chain" => Ok(QueueConfig::TagsChain(Default::default())),
            "tags-sets" => Ok(QueueConfig::TagsSets(Default::default())),
            _ => Err(format!(
                "unknown queue policy `{name}` (expected one of: {})",
                Self::NAMES.join(", ")
            )),
        }
    }

    pub fn build(&self) -> Box<dyn QueuePolicy> {
        match self {
            QueueConfig::Fcfs => Box::new(ArrivalOrder::fcfs()),
            QueueConfig::Fpfs => Box::new(ArrivalOrder::fpfs()),
            QueueConfig::Easy => Box::new(crate::queue::backfill::Easy::new()),
            QueueConfig::Conservative => Box::new(crate::queue::backfill::Conservative::new()),
            QueueConfig::Koala(p) => Box::new(crate::queue::koala::Koala::new(*p)),
            QueueConfig::Rpp(p) => Box::new(crate::queue::rpp::Rpp::new(*p)),
            QueueConfig::Ff(p) => Box::new(crate::queue::koala_c::KoalaC::ff(*p)),
            QueueConfig::Rr(p) => Box::new(crate::queue::koala_c::KoalaC::rr(*p)),
            QueueConfig::Sjf(p) => Box::new(crate::queue::koala_c::KoalaC::sjf(*p)),
            QueueConfig::SjfIdeal(p) => Box::new(crate::queue::koala_c::KoalaC::sjf_ideal(*p)),
            QueueConfig::Hsdf(p) => Box::new(crate::queue::koala_c::KoalaC::hsdf(*p)),
            // Invalid parameters cannot fail here: every job fails with the reason instead.
            QueueConfig::TagsChain(p) => Box::new(
                crate::queue::tags::Tags::chain(p.clone())
                    .unwrap_or_else(|e| crate::queue::tags::Tags::misconfigured("tags-chain", e)),
            ),
            QueueConfig::TagsSets(p) => Box::new(
                crate::queue::tags::Tags::sets(p.clone())
                    .unwrap_or_else(|e| crate::queue::tags::Tags::misconfigured("tags-sets", e)),
            ),
        }
    }
}

/// What to do when an interactive component fails before commit and no agent says otherwise
/// (seed 002 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InteractiveDefault {
    /// Re-place it on another site; abort the job if none has room.
    #[default]
    Substitute,
    /// Delete it from the job.
    Delete,
}

/// How a placed job gets its processors.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Claiming {
    /// Start every component at once (DCS, seed 003 §4.3.5).
    #[default]
    Immediate,
    /// The Incremental Claiming Policy (seed 000 §3.2–3.3).
    Icp(super::icp::IcpParams),
    /// Advance reservation on every site at a common start (issue 31, [`super::reserve`]).
    Reserve(super::reserve::ReserveParams),
}

impl Claiming {
    pub const NAMES: &'static [&'static str] = &["immediate", "icp", "reserve"];

    /// The policy by name, with default parameters.
    pub fn from_name(name: &str) -> Result<Claiming, String> {
        match name.to_ascii_lowercase().as_str() {
            "immediate" => Ok(Claiming::Immediate),
            "icp" => Ok(Claiming::Icp(super::icp::IcpParams::default())),
            "reserve" => Ok(Claiming::Reserve(Default::default())),
            _ => Err(format!(
                "unknown claiming policy `{name}` (expected one of: {})",
                Self::NAMES.join(", ")
            )),
        }
    }
}

/// Everything the scheduler is configured with.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    pub queue: QueueConfig,
    pub fit: Fit,
    pub flexible_fit: FlexibleFit,
    pub claiming: Claiming,
    pub site_faults: SiteFaultLimits,
    /// Probe a site its errors made unusable and let it back on probation
    /// ([`super::recovery`]); `None` = it waits for an operator (seed 000 §3.4).
    pub site_recovery: Option<super::recovery::SiteRecovery>,
    /// Aborts before commit a job may suffer before it fails (seed 003 §4.3.4); `None` = no
    /// limit.
    pub max_submit_failures: Option<u32>,
    /// Failures after commit a job may suffer before it fails (seed 003 §4.3.5).
    pub max_completion_failures: Option<u32>,
    /// A launch not running after this long counts as failed (seed 003 §4.3.5's pending
    /// timeout).
    pub pending_timeout: Option<Millis>,
    /// A component that started but has not checked in at the barrier after this long has
    /// failed its start (seed 002 §3.2: "failure or timeout of a required resource"); a job
    /// may set its own (`barrier_timeout` in its spec). `None` = wait for ever.
    pub barrier_timeout: Option<Millis>,
    /// While a launch of a stopped committed run drains ([`super::draining`]), send its
    /// cancel again this long after the last one, until the driver answers with
    /// [`Event::CancelTaken`](crate::scheduler::Event::CancelTaken) or the site is given up
    /// on: a cancel is only asked for, and the one asked may be lost (an agent that gave it
    /// up after its tries, a resource manager down when it was sent), while the job's next
    /// run waits at its barrier (seed 002 §3.2). `None` = ask once: the simulator's cancels
    /// take effect at once (the documents' model); a server's default is
    /// [`SERVED_RECANCEL_INTERVAL`].
    pub recancel_interval: Option<Millis>,
    /// A job aborted before or after commit waits this long before it is queued again,
    /// doubled at each further failure of the job and capped at `retry_backoff_max`
    /// (Kueue's requeue back-off). 0 = back to the queue at once (the documents' model).
    pub retry_backoff: Millis,
    /// The longest wait between two tries of a job.
    pub retry_backoff_max: Millis,
    /// Most jobs waiting in the queue (seed 000 §4.2); what a submission beyond it meets is
    /// `admission`.
    pub max_queued: Option<usize>,
    /// With the queue at `max_queued`: refuse a submission (`false`, the simulator's users
    /// hold it back and submit it again), or take it into the admission backlog (`true`, a
    /// server's default), from which jobs enter the queue in order as room frees.
    pub admission_backlog: bool,
    pub interactive_default: InteractiveDefault,
    /// The runtime estimate of a job that gives neither an estimate nor a wall time
    /// (backfilling needs one).
    pub default_estimate: Millis,
    /// How many placement-try times each job's record keeps (`JobRecord::try_times`); the
    /// tries are always counted. 0 by default, so that a waiting job stays small.
    pub record_try_times: usize,
    /// How cloud sites grow and shrink (seed 004 §III-B); On-Demand by default.
    pub provisioning: crate::provisioning::Provisioning,
    /// Named sets of sites, which may overlap (seed 004 §III-A); policies may refer to them.
    pub subsystems: Vec<crate::model::Subsystem>,
    /// Drop a job's state when it ends, once its `JobFinished` / `JobFailed` command has
    /// carried its record out: the scheduler's memory then holds only the jobs that are
    /// queued or running. For drivers that keep what they need from the commands (trace
    /// replay: a replay of 28,475 KTH-SP2 jobs otherwise keeps about 900 bytes for each).
    /// [`crate::scheduler::Scheduler::job`] then knows no ended job, and events about one are
    /// refused as about an unknown job. Off by default (the server lists ended jobs).
    pub forget_ended: bool,
    /// Send [`Command::Notify`](crate::scheduler::Command::Notify) commands (placed,
    /// committed, requeued, ...). On by default; a driver that ignores every notice (trace
    /// replay) turns them off, and the scheduler then does not build them. Decisions do not
    /// depend on it.
    pub notices: bool,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            queue: QueueConfig::Fcfs,
            fit: Fit::Worst,
            flexible_fit: FlexibleFit::ClusterFilling,
            claiming: Claiming::Immediate,
            site_faults: SiteFaultLimits::default(),
            site_recovery: None,
            max_submit_failures: Some(5),
            max_completion_failures: Some(3),
            pending_timeout: None,
            barrier_timeout: None,
            recancel_interval: None,
            retry_backoff: 0,
            retry_backoff_max: 0,
            max_queued: None,
            admission_backlog: false,
            interactive_default: InteractiveDefault::Substitute,
            default_estimate: crate::model::HOUR,
            record_try_times: 0,
            provisioning: crate::provisioning::Provisioning::default(),
            subsystems: Vec::new(),
            forget_ended: false,
            notices: true,
        }
    }
}

/// The server's pending timeout unless its configuration says otherwise.
pub const SERVED_PENDING_TIMEOUT: Millis = 10 * crate::model::MINUTE;
/// The server's barrier timeout unless its configuration or the job says otherwise: long
/// enough for a large MPI start-up on a busy node, short enough that a silent component
/// does not hold the processors of the others for long.
pub const SERVED_BARRIER_TIMEOUT: Millis = 5 * crate::model::MINUTE;
/// The server's wait between two cancels of a draining launch unless its configuration says
/// otherwise: a lost cancel holds the job's next run at its barrier for at most about this
/// long once the site takes cancels again, and a site is asked at most twice a minute.
pub const SERVED_RECANCEL_INTERVAL: Millis = 30 * crate::model::SECOND;
/// The server's first wait before a failed job is tried again.
pub const SERVED_RETRY_BACKOFF: Millis = 10 * crate::model::SECOND;
/// The server's longest wait between two tries of a job.
pub const SERVED_RETRY_BACKOFF_MAX: Millis = 10 * crate::model::MINUTE;

impl SchedulerConfig {
    /// What a server runs with when its configuration says nothing: [`Default`] (the
    /// documents' model, which the simulator reproduces) plus the timeouts, back-off and
    /// repeated cancels a real grid needs, so that no launch or barrier waits for ever
    /// (issue 20).
    pub fn served() -> SchedulerConfig {
        SchedulerConfig {
            pending_timeout: Some(SERVED_PENDING_TIMEOUT),
            barrier_timeout: Some(SERVED_BARRIER_TIMEOUT),
            recancel_interval: Some(SERVED_RECANCEL_INTERVAL),
            retry_backoff: SERVED_RETRY_BACKOFF,
            retry_backoff_max: SERVED_RETRY_BACKOFF_MAX,
            site_recovery: Some(super::recovery::SiteRecovery::default()),
            admission_backlog: true,
            ..SchedulerConfig::default()
        }
    }

    /// The wait before try `failures + 1` of a job that has failed `failures` times (from
    /// 1): `retry_backoff` doubled at each failure after the first, at most
    /// `retry_backoff_max`.
    pub fn backoff_after(&self, failures: u32) -> Millis {
        doubled(self.retry_backoff, failures, self.retry_backoff_max)
    }
}

/// An exponential back-off: the wait before try `n + 1` after `n` failures (from 1), `base`
/// doubled at each failure after the first and at most `cap` (or `base`, if larger); 0 when
/// `base` is not positive.
pub fn doubled(base: Millis, n: u32, cap: Millis) -> Millis {
    if base <= 0 {
        return 0;
    }
    let doublings = n.saturating_sub(1).min(30);
    base.saturating_mul(1 << doublings).min(cap.max(base))
}
