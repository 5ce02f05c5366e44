//! Jobs and their components (seed 002 §3.2, seed 003 §3.2.1, seed 000 §2.3, seed 001 §2).

use super::{Millis, Time};
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

/// Job priority: KOALA's two placement queues (seed 000 §2.4, §3.1).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum Priority {
    High,
    #[default]
    Low,
}

/// How a job says where its components go (seed 003 §3.2.1).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum JobKind {
    /// Every component names its site.
    Ordered,
    /// Every component gives its size; the scheduler picks the sites.
    Unordered,
    /// Only a total is given; the scheduler splits it over sites.
    Flexible,
    /// One component, on any one site (a single-cluster job).
    Total,
}

/// What a component's failure before commit does to the job (seed 002 §3.2).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum StartType {
    /// Its failure aborts the whole job (DUROC `strict-barrier`).
    #[default]
    Required,
    /// Its failure is reported; it may be deleted or substituted (DUROC `loose-barrier`).
    Interactive,
    /// Its failure is ignored (DUROC `no-barrier`).
    Optional,
}

/// How many processes a component starts.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum JobType {
    /// One process that gets all `count` processors (like `sbatch`'s batch script).
    #[default]
    Single,
    /// `count` independent processes (GRAM's `multiple`, its default).
    Multiple,
    /// `count` processes of one MPI program.
    Mpi,
}

/// How the job's input file reaches its components (seed 000 §2.3).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum FileDistribution {
    /// Every component gets the whole file.
    #[default]
    Whole,
    /// The file is split into one chunk per component, in proportion to component sizes.
    Chunks,
}

/// A relation operator of RSL, kept on pass-through attributes (seed 003 §2.2.4).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum RelOp {
    #[default]
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl RelOp {
    pub const ALL: [RelOp; 6] = [
        RelOp::Eq,
        RelOp::Ne,
        RelOp::Lt,
        RelOp::Le,
        RelOp::Gt,
        RelOp::Ge,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RelOp::Eq => "=",
            RelOp::Ne => "!=",
            RelOp::Lt => "<",
            RelOp::Le => "<=",
            RelOp::Gt => ">",
            RelOp::Ge => ">=",
        }
    }

    pub fn parse(s: &str) -> Option<RelOp> {
        RelOp::ALL.into_iter().find(|op| op.as_str() == s)
    }
}

impl fmt::Display for RelOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A value of a pass-through attribute: a string, or a (nested) sequence of values.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Value {
    Str(String),
    Seq(Vec<Value>),
}

/// An attribute coalloc does not interpret, kept verbatim and passed to the resource manager
/// (for example RSL's `(memory>=64)` or `(queue=short)`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Attribute {
    pub name: String,
    pub op: RelOp,
    /// The value sequence: `(arguments= "8" "4")` has two values.
    pub values: Vec<Value>,
}

/// The job's single input file (seed 000 §2.3), found through the replica catalog by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct InputFile {
    /// Logical file name.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    pub distribution: FileDistribution,
}

/// One part of a job: `count` processors on one site (DUROC's subjob).
///
/// What the scheduler decides on (size, site, start type, job type) is kept inline; what
/// only the resource manager needs (executable, arguments, environment, ...) sits in one
/// shared [`ComponentDetails`], absent when empty, so that a queued job stays small: the
/// scheduler makes components with equal details share one (see
/// [`SharedDetails`]; a change copies them first). Two components
/// are equal when their fields are, whether empty details are kept or absent.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Component {
    /// Processors (for a flexible job's template: the job's total).
    pub count: u32,
    pub start_type: StartType,
    pub job_type: JobType,
    /// The site, for ordered jobs only (a boxed string: 16 bytes, serialized as a `String`).
    pub site: Option<Box<str>>,
    /// Everything else; read it through the accessors, change it with
    /// [`Component::details_mut`].
    #[serde(default, deserialize_with = "read_shared")]
    pub details: Option<Arc<ComponentDetails>>,
}

/// A component's fields that only the resource manager reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct ComponentDetails {
    pub executable: Option<String>,
    pub arguments: Vec<String>,
    /// Environment variables, in the order given; names are unique.
    pub environment: Vec<(String, String)>,
    pub directory: Option<String>,
    /// A name unique within the job.
    pub label: Option<String>,
    /// Overrides the job's max wall time for this component.
    pub max_wall_time: Option<Millis>,
    /// Every other attribute, verbatim.
    pub attributes: Vec<Attribute>,
}

/// How many distinct component details [`SharedDetails`] remembers.
const SHARED_DETAILS: usize = 8;

/// The component details seen last, so that submitted jobs whose components run the same
/// program the same way (every job of a batch or an array, as a rule) share one copy of
/// them instead of holding one each: what keeps a queued job small when its components name
/// an executable (issue 23, item 1). The few most recently seen distinct details are kept,
/// most recent first; not in a snapshot (a restored core shares its jobs' details again).
#[derive(Debug, Default)]
pub struct SharedDetails {
    recent: VecDeque<Arc<ComponentDetails>>,
}

impl SharedDetails {
    /// Make `job`'s components share details equal to ones seen lately, and trim its
    /// component vector to its length.
    pub fn share(&mut self, job: &mut Job) {
        for d in job.components.iter_mut().filter_map(|c| c.details.as_mut()) {
            if self.recent.front().is_some_and(|r| Arc::ptr_eq(r, d)) {
                continue;
            }
            if let Some(r) = self.find(d) {
                *d = r;
            } else {
                self.remember(Arc::clone(d));
            }
        }
        job.components.shrink_to_fit();
    }

    /// `d`, or details equal to it seen lately.
    fn intern(&mut self, d: ComponentDetails) -> Arc<ComponentDetails> {
        self.find(&d).unwrap_or_else(|| {
            let d = Arc::new(d);
            self.remember(Arc::clone(&d));
            d
        })
    }

    /// Details equal to `d` seen lately (now the most recent). The same copy is found
    /// without comparing fields (a restored core shares details its snapshot's reading
    /// threads already shared), and the most recent is found without reordering.
    fn find(&mut self, d: &ComponentDetails) -> Option<Arc<ComponentDetails>> {
        let i = self
            .recent
            .iter()
            .position(|r| std::ptr::eq(&**r, d))
            .or_else(|| self.recent.iter().position(|r| **r == *d))?;
        if i > 0 {
            let r = self.recent.remove(i)?;
            self.recent.push_front(r);
        }
        self.recent.front().cloned()
    }

    fn remember(&mut self, d: Arc<ComponentDetails>) {
        self.recent.truncate(SHARED_DETAILS - 1);
        self.recent.push_front(d);
    }
}

thread_local! {
    /// The details read last on this thread ([`read_shared`]).
    static READ: std::cell::RefCell<SharedDetails> = std::cell::RefCell::default();
}

/// Read a component's details, sharing them with equal ones read lately on this thread: a
/// snapshot of a million queued jobs restores one copy of the details they have in common,
/// not a million that are then dropped for a shared one (their memory would stay with the
/// allocator).
fn read_shared<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Arc<ComponentDetails>>, D::Error> {
    use serde::Deserialize;
    let details = Option::<ComponentDetails>::deserialize(d)?;
    Ok(details.map(|x| READ.with(|r| r.borrow_mut().intern(x))))
}

static NO_DETAILS: ComponentDetails = ComponentDetails {
    executable: None,
    arguments: Vec::new(),
    environment: Vec::new(),
    directory: None,
    label: None,
    max_wall_time: None,
    attributes: Vec::new(),
};

impl Component {
    /// A component of `count` processors with every other field at its default.
    pub fn new(count: u32) -> Component {
        Component {
            count,
            ..Component::default()
        }
    }

    /// The details (all empty when none were given).
    pub fn details(&self) -> &ComponentDetails {
        self.details.as_deref().unwrap_or(&NO_DETAILS)
    }

    /// The details, to change them (made on first use; copied first if shared).
    pub fn details_mut(&mut self) -> &mut ComponentDetails {
        Arc::make_mut(self.details.get_or_insert_with(Arc::default))
    }

    /// This component with its details changed by `f`.
    pub fn with(mut self, f: impl FnOnce(&mut ComponentDetails)) -> Component {
        f(self.details_mut());
        if self.details.as_deref() == Some(&NO_DETAILS) {
            self.details = None;
        }
        self
    }

    pub fn executable(&self) -> Option<&str> {
        self.details().executable.as_deref()
    }

    pub fn arguments(&self) -> &[String] {
        &self.details().arguments
    }

    pub fn environment(&self) -> &[(String, String)] {
        &self.details().environment
    }

    pub fn directory(&self) -> Option<&str> {
        self.details().directory.as_deref()
    }

    pub fn label(&self) -> Option<&str> {
        self.details().label.as_deref()
    }

    pub fn max_wall_time(&self) -> Option<Millis> {
        self.details().max_wall_time
    }

    pub fn attributes(&self) -> &[Attribute] {
        &self.details().attributes
    }
}

impl PartialEq for Component {
    fn eq(&self, other: &Component) -> bool {
        self.count == other.count
            && self.start_type == other.start_type
            && self.job_type == other.job_type
            && self.site == other.site
            && self.details() == other.details()
    }
}

impl Eq for Component {}

impl std::hash::Hash for Component {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.count, self.start_type, self.job_type, &self.site).hash(state);
        self.details().hash(state);
    }
}

/// Splitting rule of a flexible job (seed 003 §3.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Flexible {
    /// Processors in all.
    pub total: u32,
    /// No piece smaller than this (1 when not given).
    pub min_component: Option<u32>,
}

/// A job's fields that the scheduler rarely reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct JobExtra {
    /// Boxed strings (16 bytes, not 24) and a boxed input file keep this box small; their
    /// serialized form is a `String`'s and an `InputFile`'s.
    pub name: Option<Box<str>>,
    pub user: Option<Box<str>>,
    pub input_file: Option<Box<InputFile>>,
    /// This job's own barrier timeout, instead of the scheduler's (seed 002 §3.2).
    pub barrier_timeout: Option<Millis>,
    /// An interactive transaction the way DUROC meant it (seed 002 §3.2): the job is held
    /// at the barrier for its owner's commit, and its interactive components' failures are
    /// left to the owner (edit: add, delete, substitute) instead of handled automatically.
    pub hold_at_barrier: bool,
    /// Asks for reserve claiming (issue 31) whatever the scheduler's default, with an
    /// earliest common start. Not serialized with the job: the scheduler copies it into its
    /// own state at submission (a snapshot's job slots keep their form), so a driver that
    /// journals submissions must journal it beside the job.
    #[serde(skip)]
    pub reserve: Option<ReserveRequest>,
}

/// A job's own request for advance reservation (issue 31): reserve every component at a
/// common start no earlier than `start` (on the scheduler's clock).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct ReserveRequest {
    pub start: Option<Time>,
}

static NO_EXTRA: JobExtra = JobExtra {
    name: None,
    user: None,
    input_file: None,
    barrier_timeout: None,
    hold_at_barrier: false,
    reserve: None,
};

impl PartialEq for Job {
    fn eq(&self, o: &Job) -> bool {
        self.id == o.id
            && self.extra() == o.extra()
            && self.priority == o.priority
            && self.kind == o.kind
            && self.components == o.components
            && self.flexible() == o.flexible()
            && self.submit == o.submit
            && self.deadline() == o.deadline()
            && self.runtime_estimate == o.runtime_estimate
            && self.max_wall_time() == o.max_wall_time()
    }
}

impl Eq for Job {}

impl std::hash::Hash for Job {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (
            self.id,
            self.extra(),
            self.priority,
            self.kind,
            &self.components,
        )
            .hash(state);
        (
            self.flexible(),
            self.submit,
            self.deadline(),
            self.runtime_estimate,
            self.max_wall_time(),
        )
            .hash(state);
    }
}

/// A job: one or more components that must start together.
///
/// Its name, user and input file sit in one boxed [`JobExtra`], absent when empty, and its
/// splitting rule, deadline and wall-time limit in one boxed `JobLimits`, absent when
/// empty, so that a queued job stays small; two jobs are equal when their fields are,
/// whether an empty box is kept or absent. The serialized form is the one the fields had
/// inline (`JobForm`).
#[derive(Debug, Clone)]
pub struct Job {
    /// Set by the server or taken from a trace; a spec file may leave it out.
    pub id: Option<u64>,
    /// Name, user, input file: read them through the accessors, change them with
    /// [`Job::extra_mut`].
    pub extra: Option<Box<JobExtra>>,
    pub priority: Priority,
    pub kind: JobKind,
    /// For a flexible job: exactly one template component whose `count` is the total.
    pub components: Vec<Component>,
    /// When the job was submitted, if the spec says (traces, simulations).
    pub submit: Option<Time>,
    /// The user's runtime estimate (what backfilling and predictors see).
    pub runtime_estimate: Option<Millis>,
    /// Read through [`Job::flexible`], [`Job::deadline`] and [`Job::max_wall_time`].
    limits: Option<Box<JobLimits>>,
}

/// A job's fields that few jobs set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct JobLimits {
    /// Present exactly when `kind` is [`JobKind::Flexible`].
    flexible: Option<Flexible>,
    /// The time by which the job must have started (seed 001 §2.2).
    deadline: Option<Time>,
    /// Default wall-time limit of every component.
    max_wall_time: Option<Millis>,
}

/// [`Job`]'s serialized form: its fields in the order and of the types they had when they
/// were all inline (written borrowed, read owned).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename = "Job")]
struct JobForm<E, C> {
    id: Option<u64>,
    extra: E,
    priority: Priority,
    kind: JobKind,
    components: C,
    flexible: Option<Flexible>,
    submit: Option<Time>,
    deadline: Option<Time>,
    runtime_estimate: Option<Millis>,
    max_wall_time: Option<Millis>,
}

impl serde::Serialize for Job {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        JobForm {
            id: self.id,
            extra: &self.extra,
            priority: self.priority,
            kind: self.kind,
            components: &self.components,
            flexible: self.flexible(),
            submit: self.submit,
            deadline: self.deadline(),
            runtime_estimate: self.runtime_estimate,
            max_wall_time: self.max_wall_time(),
        }
        .serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Job {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Job, D::Error> {
        let f = JobForm::<Option<Box<JobExtra>>, Vec<Component>>::deserialize(d)?;
        Ok(Job {
            id: f.id,
            extra: f.extra,
            priority: f.priority,
            kind: f.kind,
            components: f.components,
            submit: f.submit,
            runtime_estimate: f.runtime_estimate,
            limits: None,
        }
        .with_limits(f.flexible, f.deadline, f.max_wall_time))
    }
}

impl Job {
    /// A job of the given kind and components with every optional field empty.
    pub fn new(kind: JobKind, components: Vec<Component>) -> Job {
        Job {
            id: None,
            extra: None,
            priority: Priority::default(),
            kind,
            components,
            submit: None,
            runtime_estimate: None,
            limits: None,
        }
    }

    /// For a flexible job: its splitting rule (present exactly when `kind` is
    /// [`JobKind::Flexible`]).
    pub fn flexible(&self) -> Option<Flexible> {
        self.limits.as_ref().and_then(|l| l.flexible)
    }

    /// The time by which the job must have started (seed 001 §2.2).
    pub fn deadline(&self) -> Option<Time> {
        self.limits.as_ref().and_then(|l| l.deadline)
    }

    /// Default wall-time limit of every component.
    pub fn max_wall_time(&self) -> Option<Millis> {
        self.limits.as_ref().and_then(|l| l.max_wall_time)
    }

    pub fn set_flexible(&mut self, f: Option<Flexible>) {
        super::set_boxed(&mut self.limits, |l| l.flexible = f);
    }

    pub fn set_deadline(&mut self, t: Option<Time>) {
        super::set_boxed(&mut self.limits, |l| l.deadline = t);
    }

    pub fn set_max_wall_time(&mut self, t: Option<Millis>) {
        super::set_boxed(&mut self.limits, |l| l.max_wall_time = t);
    }

    /// This job with its splitting rule, deadline and wall-time limit as given.
    pub fn with_limits(
        mut self,
        flexible: Option<Flexible>,
        deadline: Option<Time>,
        max_wall_time: Option<Millis>,
    ) -> Job {
        super::set_boxed(&mut self.limits, |l| {
            *l = JobLimits {
                flexible,
                deadline,
                max_wall_time,
            }
        });
        self
    }

    /// How long a started component of this job may take to check in at the barrier: its
    /// own `barrier_timeout`, else `default` (the scheduler's).
    pub fn barrier_timeout_or(&self, default: Option<Millis>) -> Option<Millis> {
        self.extra().barrier_timeout.or(default)
    }

    /// The name, user and input file (all empty when none were given).
    pub fn extra(&self) -> &JobExtra {
        self.extra.as_deref().unwrap_or(&NO_EXTRA)
    }

    /// The name, user and input file, to change them (boxed on first use).
    pub fn extra_mut(&mut self) -> &mut JobExtra {
        self.extra.get_or_insert_with(Box::default)
    }

    /// This job with its name, user or input file changed by `f`.
    pub fn with(mut self, f: impl FnOnce(&mut JobExtra)) -> Job {
        f(self.extra_mut());
        if self.extra.as_deref() == Some(&NO_EXTRA) {
            self.extra = None;
        }
        self
    }

    pub fn name(&self) -> Option<&str> {
        self.extra().name.as_deref()
    }

    pub fn user(&self) -> Option<&str> {
        self.extra().user.as_deref()
    }

    pub fn input_file(&self) -> Option<&InputFile> {
        self.extra().input_file.as_deref()
    }

    /// Processors the whole job needs.
    pub fn total_processors(&self) -> u64 {
        match self.flexible() {
            Some(f) => u64::from(f.total),
            None => self.components.iter().map(|c| u64::from(c.count)).sum(),
        }
    }

    /// The wall-time limit that applies to component `i`.
    pub fn wall_time_of(&self, i: usize) -> Option<Millis> {
        self.components
            .get(i)
            .and_then(|c| c.max_wall_time().or(self.max_wall_time()))
    }

    /// How long the job says it runs: its runtime estimate, else its longest wall time
    /// (`None`: the scheduler's default estimate applies).
    pub fn own_estimate(&self) -> Option<Millis> {
        self.runtime_estimate.or_else(|| {
            (0..self.components.len())
                .filter_map(|i| self.wall_time_of(i))
                .max()
        })
    }
}

/// Names of the enums as they appear in every text format.
macro_rules! named_enum {
    ($ty:ty, $what:literal, [$(($variant:expr, $name:literal $(, $alias:literal)*)),+ $(,)?]) => {
        impl $ty {
            /// The canonical name.
            pub fn name(self) -> &'static str {
                $(if self == $variant { return $name; })+
                unreachable!()
            }

            /// Every accepted spelling, canonical names first.
            pub const NAMES: &'static [&'static str] = &[$($name,)+ $($($alias,)*)+];

            /// Parse a name (canonical or alias, case-insensitive).
            pub fn from_name(s: &str) -> Result<Self, String> {
                let lower = s.to_ascii_lowercase();
                $(if lower == $name $(|| lower == $alias)* { return Ok($variant); })+
                Err(format!(
                    "unknown {} `{}` (expected one of: {})",
                    $what,
                    s,
                    Self::NAMES.join(", ")
                ))
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named_enum!(
    Priority,
    "priority",
    [(Priority::High, "high"), (Priority::Low, "low")]
);
named_enum!(
    JobKind,
    "job kind",
    [
        (JobKind::Ordered, "ordered"),
        (JobKind::Unordered, "unordered"),
        (JobKind::Flexible, "flexible"),
        (JobKind::Total, "total"),
    ]
);
named_enum!(
    StartType,
    "start type",
    [
        (StartType::Required, "required", "strict-barrier"),
        (StartType::Interactive, "interactive", "loose-barrier"),
        (StartType::Optional, "optional", "no-barrier"),
    ]
);
named_enum!(
    JobType,
    "job type",
    [
        (JobType::Single, "single"),
        (JobType::Multiple, "multiple"),
        (JobType::Mpi, "mpi"),
    ]
);
named_enum!(
    FileDistribution,
    "file distribution",
    [
        (FileDistribution::Whole, "whole"),
        (FileDistribution::Chunks, "chunks"),
    ]
);

impl StartType {
    /// DUROC's name for this start type (`subjobStartType` in RSL).
    pub fn duroc_name(self) -> &'static str {
        match self {
            StartType::Required => "strict-barrier",
            StartType::Interactive => "loose-barrier",
            StartType::Optional => "no-barrier",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_names_round_trip_and_aliases_parse() {
        for t in [
            StartType::Required,
            StartType::Interactive,
            StartType::Optional,
        ] {
            assert_eq!(StartType::from_name(t.name()), Ok(t));
            assert_eq!(StartType::from_name(t.duroc_name()), Ok(t));
        }
        assert_eq!(JobKind::from_name("Ordered"), Ok(JobKind::Ordered));
        assert_eq!(
            StartType::from_name("strict").unwrap_err(),
            "unknown start type `strict` (expected one of: required, interactive, optional, \
             strict-barrier, loose-barrier, no-barrier)"
        );
    }

    #[test]
    fn totals_and_wall_times() {
        let mut job = Job::new(
            JobKind::Unordered,
            vec![
                Component::new(8).with(|d| d.max_wall_time = Some(60_000)),
                Component::new(4),
            ],
        );
        job.set_max_wall_time(Some(120_000));
        assert_eq!(job.total_processors(), 12);
        assert_eq!(job.wall_time_of(0), Some(60_000));
        assert_eq!(job.wall_time_of(1), Some(120_000));
        assert_eq!(job.wall_time_of(2), None);
    }

    /// `Job` as it was with every field inline, and its extra's strings as `String`s: the
    /// reference form (journals and snapshots written before keep reading).
    #[derive(serde::Serialize)]
    struct InlineJob {
        id: Option<u64>,
        extra: Option<InlineExtra>,
        priority: Priority,
        kind: JobKind,
        components: Vec<InlineComponent>,
        flexible: Option<Flexible>,
        submit: Option<Time>,
        deadline: Option<Time>,
        runtime_estimate: Option<Millis>,
        max_wall_time: Option<Millis>,
    }

    #[derive(serde::Serialize)]
    struct InlineExtra {
        name: Option<String>,
        user: Option<String>,
        input_file: Option<InputFile>,
        barrier_timeout: Option<Millis>,
        hold_at_barrier: bool,
    }

    #[derive(serde::Serialize)]
    struct InlineComponent {
        count: u32,
        start_type: StartType,
        job_type: JobType,
        site: Option<String>,
        details: Option<ComponentDetails>,
    }

    #[test]
    fn a_job_is_written_as_its_fields_were_inline_and_read_back_equal() {
        let file = InputFile {
            name: "in".into(),
            size: 5,
            distribution: FileDistribution::Whole,
        };
        for limits in [false, true] {
            let mut c = Component::new(3);
            c.site = Some("s1".into());
            let mut job = Job::new(JobKind::Ordered, vec![c]).with(|e| {
                e.name = Some("j".into());
                e.user = Some("u".into());
                e.input_file = Some(Box::new(file.clone()));
            });
            job.submit = Some(10);
            job.runtime_estimate = Some(20);
            if limits {
                job.set_deadline(Some(30));
                job.set_max_wall_time(Some(40));
            }
            let inline = InlineJob {
                id: None,
                extra: Some(InlineExtra {
                    name: Some("j".into()),
                    user: Some("u".into()),
                    input_file: Some(file.clone()),
                    barrier_timeout: None,
                    hold_at_barrier: false,
                }),
                priority: Priority::Low,
                kind: JobKind::Ordered,
                components: vec![InlineComponent {
                    count: 3,
                    start_type: StartType::default(),
                    job_type: JobType::default(),
                    site: Some("s1".into()),
                    details: None,
                }],
                flexible: None,
                submit: Some(10),
                deadline: limits.then_some(30),
                runtime_estimate: Some(20),
                max_wall_time: limits.then_some(40),
            };
            let text = serde_json::to_string(&job).unwrap();
            assert_eq!(text, serde_json::to_string(&inline).unwrap());
            let back: Job = serde_json::from_str(&text).unwrap();
            assert_eq!(back, job);
            assert_eq!(
                back.limits.is_some(),
                limits,
                "no box for a job without limits"
            );
        }
        assert!(size_of::<Job>() <= 96 && size_of::<JobExtra>() <= 80);
        assert!(size_of::<Component>() <= 32);
    }
}
