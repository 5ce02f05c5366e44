//! The native job spec: TOML and JSON documents that say everything the model can hold.
//!
//! ```toml
//! name = "poisson"
//! priority = "high"            # high | low (default low)
//! kind = "unordered"           # ordered | unordered | flexible | total (inferred when absent)
//! max_wall_time = "10m"        # seconds, or "90s", "10m", "1h30m"
//! barrier_timeout = "2m"       # a started component not at the barrier by then fails its
//!                              # start (default: the server's `barrier_timeout`)
//! hold_at_barrier = true       # wait at the barrier for `coalloc commit` (seed 002 §3.2)
//! reserve = true               # advance reservation at a common start (issue 31)
//! start = "2h"                 # with `reserve`: no earlier than this (the `submit` clock)
//! [input_file]
//! name = "poisson-grid.dat"    # logical name, looked up in the replica catalog
//! size = "4GB"                 # bytes, or "4GB", "512MiB"
//! distribution = "chunks"      # whole | chunks (seed 000 §2.3)
//! [[component]]
//! count = 8
//! executable = "poisson"
//! arguments = ["8", "4"]
//! environment = { OMP_NUM_THREADS = "1" }
//! ```
//!
//! Reading is two steps: serde checks the document's shape (unknown keys, wrong types: errors
//! with line and column), then [`JobDoc::to_job`] checks values and [`validate`] the job's
//! rules (errors with the field path). [`JobDoc::from_job`] writes the normalized form, with
//! every default spelled out.

use super::units::{format_duration, parse_duration, parse_size, Scalar};
use super::validate::{component_field, infer_kind, validate};
use crate::error::{Pos, SpecError};
use crate::model::{
    Attribute, Component, ComponentDetails, FileDistribution, Flexible, InputFile, Job, JobKind,
    JobType, Millis, Priority, RelOp, ReserveRequest, StartType, Time, Value,
};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// A job as the native spec writes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Flexible jobs: processors to split over sites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    /// Flexible jobs: the smallest piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_component: Option<i64>,
    /// Seconds on the job clock (or a duration since its origin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit: Option<Scalar>,
    /// The required start time, on the same clock as `submit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_estimate: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall_time: Option<Scalar>,
    /// This job's barrier timeout (seed 002 §3.2), instead of the server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier_timeout: Option<Scalar>,
    /// Held at the barrier for the owner's commit (seed 002 §3.2's interactive transaction).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold_at_barrier: bool,
    /// Co-allocate by advance reservation whatever the scheduler's default (issue 31).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reserve: bool,
    /// With `reserve`: the earliest common start, on the same clock as `submit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Scalar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_file: Option<InputFileDoc>,
    #[serde(default, rename = "component")]
    pub components: Vec<ComponentDoc>,
}

/// `[input_file]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputFileDoc {
    pub name: String,
    pub size: Scalar,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
}

/// `[[component]]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<Scalar>,
    #[serde(default, skip_serializing_if = "EnvDoc::is_empty")]
    pub environment: EnvDoc,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall_time: Option<Scalar>,
    /// Attributes passed through verbatim: `[[component.attribute]]` with `name`, `op`
    /// (default `=`) and `value` (a string, or a list whose items are strings or lists).
    #[serde(default, rename = "attribute", skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<AttributeDoc>,
}

/// A pass-through attribute.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttributeDoc {
    pub name: String,
    #[serde(default = "default_op")]
    pub op: String,
    pub value: ValueDoc,
}

fn default_op() -> String {
    "=".to_owned()
}

/// Environment variables in document order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnvDoc(pub Vec<(String, Scalar)>);

impl EnvDoc {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for EnvDoc {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for EnvDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = EnvDoc;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of variable names to values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EnvDoc, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Scalar>()? {
                    out.push((k, v));
                }
                Ok(EnvDoc(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// An attribute's value sequence: a lone scalar is a sequence of one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValueDoc(pub Vec<Value>);

impl Serialize for ValueDoc {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Items<'a>(&'a [Value]);
        impl Serialize for Items<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut seq = s.serialize_seq(Some(self.0.len()))?;
                for v in self.0 {
                    match v {
                        Value::Str(x) => seq.serialize_element(x)?,
                        Value::Seq(items) => seq.serialize_element(&Items(items))?,
                    }
                }
                seq.end()
            }
        }
        match self.0.as_slice() {
            [Value::Str(x)] => s.serialize_str(x),
            items => Items(items).serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ValueDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Item(Value);
        impl<'de> Deserialize<'de> for Item {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(ItemVisitor).map(Item)
            }
        }
        struct ItemVisitor;
        impl<'de> Visitor<'de> for ItemVisitor {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a list of values")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Str(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Str(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
                Ok(Value::Str(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
                Ok(Value::Str(v.to_string()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
                Ok(Value::Str(v.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
                let mut out = Vec::new();
                while let Some(Item(v)) = seq.next_element()? {
                    out.push(v);
                }
                Ok(Value::Seq(out))
            }
        }
        Ok(match d.deserialize_any(ItemVisitor)? {
            Value::Seq(items) => ValueDoc(items),
            single => ValueDoc(vec![single]),
        })
    }
}

/// Read a TOML job spec.
pub fn from_toml(text: &str) -> Result<Job, SpecError> {
    toml_doc::<JobDoc>(text)?.to_job()
}

/// Read a JSON job spec.
pub fn from_json(text: &str) -> Result<Job, SpecError> {
    json_doc::<JobDoc>(text)?.to_job()
}

/// Read a JSON job spec already parsed (one job of a batch).
pub fn from_json_value(v: serde_json::Value) -> Result<Job, SpecError> {
    serde_json::from_value::<JobDoc>(v)
        .map_err(|e| SpecError::invalid("job", e.to_string()))?
        .to_job()
}

/// Deserialize a TOML document, with line and column on error.
pub fn toml_doc<T: de::DeserializeOwned>(text: &str) -> Result<T, SpecError> {
    toml::from_str(text).map_err(|e| {
        let pos = e
            .span()
            .map(|s| Pos::of_offset(text, s.start))
            .unwrap_or(Pos::new(1, 1));
        SpecError::syntax(pos, e.message().trim_end().to_owned())
    })
}

/// Deserialize a JSON document, with line and column on error.
pub fn json_doc<T: de::DeserializeOwned>(text: &str) -> Result<T, SpecError> {
    serde_json::from_str(text).map_err(|e| {
        let pos = Pos::new(e.line().max(1) as u32, e.column().max(1) as u32);
        let msg = e.to_string();
        let msg = match msg.rfind(" at line ") {
            Some(i) => msg[..i].to_owned(),
            None => msg,
        };
        SpecError::syntax(pos, msg)
    })
}

/// Write a job as TOML.
pub fn to_toml(job: &Job) -> String {
    toml::to_string(&JobDoc::from_job(job)).unwrap_or_else(|e| format!("# {e}\n"))
}

/// Write a job as pretty JSON.
pub fn to_json(job: &Job) -> String {
    serde_json::to_string_pretty(&JobDoc::from_job(job)).unwrap_or_else(|e| e.to_string())
}

/// Write a job as JSON on one line (the server's journal: about half the bytes).
pub fn to_json_line(job: &Job) -> String {
    serde_json::to_string(&JobDoc::from_job(job)).unwrap_or_else(|e| e.to_string())
}

fn named<T>(
    field: &str,
    v: &Option<String>,
    parse: fn(&str) -> Result<T, String>,
) -> Result<Option<T>, SpecError> {
    v.as_deref()
        .map(parse)
        .transpose()
        .map_err(|rule| SpecError::invalid(field, rule))
}

fn duration(field: &str, v: &Option<Scalar>) -> Result<Option<Millis>, SpecError> {
    v.as_ref()
        .map(parse_duration)
        .transpose()
        .map_err(|rule| SpecError::invalid(field, rule))
}

fn time(field: &str, v: &Option<Scalar>) -> Result<Option<Time>, SpecError> {
    duration(field, v)
}

fn positive_u32(field: &str, v: i64) -> Result<u32, SpecError> {
    if v < 1 {
        Err(SpecError::invalid(
            field,
            format!("must be at least 1 (got {v})"),
        ))
    } else {
        u32::try_from(v).map_err(|_| SpecError::invalid(field, format!("is too large ({v})")))
    }
}

impl JobDoc {
    /// Check the values and the job rules.
    pub fn to_job(&self) -> Result<Job, SpecError> {
        let declared = named("kind", &self.kind, JobKind::from_name)?;
        let kind = match declared {
            Some(k) => k,
            None if self.total.is_some() => JobKind::Flexible,
            None => infer_kind(self.components.iter().map(|c| c.site.as_deref()))?,
        };
        let flexible =
            match (kind, self.total) {
                (JobKind::Flexible, Some(total)) => Some(Flexible {
                    total: positive_u32("total", total)?,
                    min_component: self
                        .min_component
                        .map(|m| positive_u32("min_component", m))
                        .transpose()?,
                }),
                (_, None) if self.min_component.is_some() => {
                    return Err(SpecError::invalid(
                        "min_component",
                        "only flexible jobs (with `total`) have a minimum component size",
                    ))
                }
                (JobKind::Flexible, None) => return Err(SpecError::invalid(
                    "total",
                    "a flexible job needs `total`, the number of processors to split over sites",
                )),
                (_, Some(_)) => {
                    return Err(SpecError::invalid(
                        "total",
                        format!("only flexible jobs have a total; this job is {kind}"),
                    ))
                }
                _ => None,
            };
        let components = self
            .components
            .iter()
            .enumerate()
            .map(|(i, c)| c.to_component(i, flexible))
            .collect::<Result<Vec<_>, _>>()?;
        let input_file = self
            .input_file
            .as_ref()
            .map(|f| -> Result<InputFile, SpecError> {
                Ok(InputFile {
                    name: f.name.clone(),
                    size: parse_size(&f.size)
                        .map_err(|rule| SpecError::invalid("input_file.size", rule))?,
                    distribution: named(
                        "input_file.distribution",
                        &f.distribution,
                        FileDistribution::from_name,
                    )?
                    .unwrap_or_default(),
                })
            })
            .transpose()?;
        let barrier_timeout = duration("barrier_timeout", &self.barrier_timeout)?;
        if barrier_timeout.is_some_and(|t| t <= 0) {
            return Err(SpecError::invalid(
                "barrier_timeout",
                "must be longer than zero",
            ));
        }
        let mut job = Job::new(kind, components).with_limits(
            flexible,
            time("deadline", &self.deadline)?,
            duration("max_wall_time", &self.max_wall_time)?,
        );
        job.id = self.id;
        job.priority = named("priority", &self.priority, Priority::from_name)?.unwrap_or_default();
        job.submit = time("submit", &self.submit)?;
        job.runtime_estimate = duration("runtime_estimate", &self.runtime_estimate)?;
        let start = time("start", &self.start)?;
        if start.is_some() && !self.reserve {
            return Err(SpecError::invalid(
                "start",
                "is the common start of a reserved job: set `reserve = true` too",
            ));
        }
        let reserve = self.reserve.then_some(ReserveRequest { start });
        let job = job.with(|e| {
            e.name = self.name.as_deref().map(Into::into);
            e.user = self.user.as_deref().map(Into::into);
            e.input_file = input_file.map(Box::new);
            e.barrier_timeout = barrier_timeout;
            e.hold_at_barrier = self.hold_at_barrier;
            e.reserve = reserve;
        });
        validate(&job, &[])?;
        Ok(job)
    }

    /// The normalized document of a job: every default written out.
    pub fn from_job(job: &Job) -> JobDoc {
        let time = |t: Option<Time>| {
            t.map(|t| {
                if t % 1000 == 0 {
                    Scalar::Int(t / 1000)
                } else {
                    Scalar::Str(format_duration(t))
                }
            })
        };
        let dur = |d: Option<Millis>| d.map(|d| Scalar::Str(format_duration(d)));
        JobDoc {
            id: job.id,
            name: job.name().map(str::to_owned),
            user: job.user().map(str::to_owned),
            priority: Some(job.priority.name().to_owned()),
            kind: Some(job.kind.name().to_owned()),
            total: job.flexible().map(|f| i64::from(f.total)),
            min_component: job.flexible().and_then(|f| f.min_component).map(i64::from),
            submit: time(job.submit),
            deadline: time(job.deadline()),
            runtime_estimate: dur(job.runtime_estimate),
            max_wall_time: dur(job.max_wall_time()),
            barrier_timeout: dur(job.extra().barrier_timeout),
            hold_at_barrier: job.extra().hold_at_barrier,
            reserve: job.extra().reserve.is_some(),
            start: time(job.extra().reserve.and_then(|r| r.start)),
            input_file: job.extra().input_file.as_ref().map(|f| InputFileDoc {
                name: f.name.clone(),
                size: Scalar::Int(i64::try_from(f.size).unwrap_or(i64::MAX)),
                distribution: Some(f.distribution.name().to_owned()),
            }),
            components: job
                .components
                .iter()
                .map(|c| ComponentDoc {
                    count: (job.kind != JobKind::Flexible).then_some(i64::from(c.count)),
                    site: c.site.as_deref().map(str::to_owned),
                    start_type: Some(c.start_type.name().to_owned()),
                    executable: c.details().executable.clone(),
                    arguments: c
                        .details()
                        .arguments
                        .iter()
                        .cloned()
                        .map(Scalar::Str)
                        .collect(),
                    environment: EnvDoc(
                        c.details()
                            .environment
                            .iter()
                            .map(|(k, v)| (k.clone(), Scalar::Str(v.clone())))
                            .collect(),
                    ),
                    directory: c.details().directory.clone(),
                    label: c.details().label.clone(),
                    job_type: Some(c.job_type.name().to_owned()),
                    max_wall_time: dur(c.details().max_wall_time),
                    attributes: c
                        .details()
                        .attributes
                        .iter()
                        .map(|a| AttributeDoc {
                            name: a.name.clone(),
                            op: a.op.as_str().to_owned(),
                            value: ValueDoc(a.values.clone()),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

impl ComponentDoc {
    fn to_component(&self, i: usize, flexible: Option<Flexible>) -> Result<Component, SpecError> {
        let f = |name: &str| component_field(i, name);
        let count = match (flexible, self.count) {
            (Some(_), Some(_)) => {
                return Err(SpecError::invalid(
                    f("count"),
                    "a flexible job's pieces get their sizes from the split: leave `count` out",
                ))
            }
            (Some(flex), None) => flex.total,
            (None, Some(n)) => positive_u32(&f("count"), n)?,
            (None, None) => {
                return Err(SpecError::invalid(
                    f("count"),
                    "is required: the number of processors of this component",
                ))
            }
        };
        let attributes = self
            .attributes
            .iter()
            .enumerate()
            .map(|(j, a)| {
                let field = f(&format!("attribute[{j}]"));
                let op = RelOp::parse(&a.op).ok_or_else(|| {
                    SpecError::invalid(
                        &field,
                        format!(
                            "unknown operator `{}` (expected one of: =, !=, <, <=, >, >=)",
                            a.op
                        ),
                    )
                })?;
                Ok(Attribute {
                    name: a.name.clone(),
                    op,
                    values: a.value.0.clone(),
                })
            })
            .collect::<Result<Vec<_>, SpecError>>()?;
        let details = ComponentDetails {
            executable: self.executable.clone(),
            arguments: self.arguments.iter().map(Scalar::to_text).collect(),
            environment: self
                .environment
                .0
                .iter()
                .map(|(k, v)| (k.clone(), v.to_text()))
                .collect(),
            directory: self.directory.clone(),
            label: self.label.clone(),
            max_wall_time: duration(&f("max_wall_time"), &self.max_wall_time)?,
            attributes,
        };
        Ok(Component {
            count,
            site: self.site.as_deref().map(Into::into),
            start_type: named(&f("start_type"), &self.start_type, StartType::from_name)?
                .unwrap_or_default(),
            job_type: named(&f("job_type"), &self.job_type, JobType::from_name)?
                .unwrap_or_default(),
            details: None,
        }
        .with(|d| *d = details))
    }
}
