//! The scheduler's configuration as users write it: a `[scheduler]` table naming every
//! policy, with a sub-table of parameters per policy. The server's configuration and the
//! simulator's experiment files embed it beside the `[[site]]` list ([`super::sites`]).
//!
//! ```toml
//! [scheduler]
//! policy = "koala"           # fcfs fpfs easy conservative koala rpp ff rr sjf sjf-ideal hsdf tags-chain tags-sets
//! fit = "ctf"                # worst best first worst-plain ctf
//! flexible = "load-balancing" # cluster-filling load-balancing
//! claiming = "icp"           # immediate icp
//! max_submit_failures = 5    # or "none"
//! max_completion_failures = 3
//! pending_timeout = "10m"    # or "none"; the server's default is 10m, the simulator's none
//! barrier_timeout = "5m"     # or "none"; the server's default is 5m, the simulator's none
//! recancel_interval = "30s"  # or "none"; cancel a draining launch again this often until
//!                            # it is gone (the server's default is 30s, the simulator's none)
//! retry_backoff = "10s"      # wait before a failed job's next try, doubled each failure
//! retry_backoff_max = "10m"  # (server defaults; the simulator's are 0: at once)
//! max_queued = 100
//! admission = "backlog"      # beyond max_queued: backlog (the server's default: held back,
//!                            # admitted in order as room frees) or refuse (the simulator's)
//! site_errors = 3            # consecutive errors that make a site unusable
//! site_probe_after = "1m"    # probe such a site after this ("none": wait for an operator;
//!                            # the server's default is 1m, the simulator's none), doubled at
//!                            # each relapse on probation up to site_probe_max = "30m"
//! site_healthy_for = "30s"   # its monitor must read it healthy this long to be let back
//! interactive = "substitute" # substitute delete
//! default_estimate = "1h"
//! record_try_times = 16      # keep the times of each job's first 16 placement tries
//!
//! [scheduler.icp]            # seed 000 §3.2–3.3
//! l = 0.75
//! l_step = 0.125
//! l_min = 0.25
//! t = 0.0
//! max_claim_tries = "none"
//! preempt = true
//!
//! [scheduler.koala]          # seed 000 §3.1
//! s = 2
//! scan_interval = "4m"
//! max_tries = "none"
//!
//! [scheduler.rpp]            # seed 001 §2.2
//! lp = 0.7
//! mp = "none"
//! ignore = "10s"             # Wait-X's I; "none" = Wait-∞
//! priority = "gp"            # gp lp
//!
//! [scheduler.koala_c]        # seed 004 §IV-A (ff rr sjf sjf-ideal hsdf)
//! period = "30s"
//! default_runtime = "1h"
//!
//! [scheduler.tags]           # seed 004 §IV-B, §IV-C
//! sets = [["fs0", "fs1", "fs2"], ["fs1", "fs2"], ["fs2"]]   # tags-sets; a set may also be
//!                                                           # a subsystem's name
//! chains = [["a1", "a2"], ["b1", "b2"]]                     # tags-chain
//! limits = ["10m", "1h"]
//! dispatch = "rr"            # rr, or random (with seed = N)
//!
//! [scheduler.subsystems]     # seed 004 §III-A: named sets of sites, which may overlap
//! all = ["fs0", "fs1", "fs2"]
//! long = ["fs1", "fs2"]
//! ```
//!
//! Cloud sites (`kind = "cloud"` in the site list) are provisioned by a policy (seed 004
//! §III-B):
//!
//! ```toml
//! [scheduler]
//! provisioning = "on-demand" # on-demand (the default), static (clouds are fixed pools)
//!
//! [scheduler.on_demand]
//! idle_time = "5m"           # free clouds: release a VM idle this long
//! release_margin = "1m"      # paid clouds: release an idle VM this close to its next hour
//! lease_retry = "1m"         # after a failed lease, wait this long before leasing there again
//! ```

use super::native::toml_doc;
use super::sites::{sites_from_docs, SiteDoc};
use super::units::{parse_duration, Scalar};
use crate::error::SpecError;
use crate::model::Subsystem;
use crate::model::{Millis, Site};
use crate::placement::{Fit, FlexibleFit};
use crate::provisioning::{OnDemandParams, Provisioning};
use crate::queue::koala::KoalaParams;
use crate::queue::koala_c::KoalaCParams;
use crate::queue::rpp::{GlobalPriority, RppParams};
use crate::queue::tags::{ChainDispatch, TagsChainParams, TagsSetsParams};
use crate::scheduler::recovery::SiteRecovery;
use crate::scheduler::{Claiming, IcpParams, InteractiveDefault, QueueConfig, SchedulerConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `[scheduler]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerDoc {
    pub policy: Option<String>,
    pub fit: Option<String>,
    pub flexible: Option<String>,
    pub claiming: Option<String>,
    pub max_submit_failures: Option<Scalar>,
    pub max_completion_failures: Option<Scalar>,
    pub pending_timeout: Option<Scalar>,
    pub barrier_timeout: Option<Scalar>,
    pub recancel_interval: Option<Scalar>,
    pub retry_backoff: Option<Scalar>,
    pub retry_backoff_max: Option<Scalar>,
    pub max_queued: Option<Scalar>,
    pub admission: Option<String>,
    pub site_errors: Option<Scalar>,
    pub site_probe_after: Option<Scalar>,
    pub site_healthy_for: Option<Scalar>,
    pub site_probe_max: Option<Scalar>,
    pub completion_errors: Option<Scalar>,
    pub interactive: Option<String>,
    pub default_estimate: Option<Scalar>,
    pub record_try_times: Option<Scalar>,
    pub icp: Option<IcpDoc>,
    pub koala: Option<KoalaDoc>,
    pub rpp: Option<RppDoc>,
    pub koala_c: Option<KoalaCDoc>,
    pub tags: Option<TagsDoc>,
    pub provisioning: Option<String>,
    pub on_demand: Option<OnDemandDoc>,
    /// Subsystem name → site names (seed 004 §III-A).
    pub subsystems: Option<BTreeMap<String, Vec<String>>>,
}

/// `[scheduler.on_demand]` (seed 004 §III-B).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnDemandDoc {
    pub idle_time: Option<Scalar>,
    pub release_margin: Option<Scalar>,
    pub lease_retry: Option<Scalar>,
}

/// A set of sites in `tags.sets`: site names, or a subsystem's name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SiteSetDoc {
    Subsystem(String),
    Sites(Vec<String>),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IcpDoc {
    pub l: Option<f64>,
    pub l_step: Option<f64>,
    pub l_min: Option<f64>,
    pub t: Option<f64>,
    pub max_claim_tries: Option<Scalar>,
    pub preempt: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KoalaDoc {
    pub s: Option<i64>,
    pub scan_interval: Option<Scalar>,
    pub max_tries: Option<Scalar>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RppDoc {
    pub lp: Option<f64>,
    pub mp: Option<Scalar>,
    pub ignore: Option<Scalar>,
    pub priority: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KoalaCDoc {
    pub period: Option<Scalar>,
    pub default_runtime: Option<Scalar>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TagsDoc {
    #[serde(default)]
    pub sets: Vec<SiteSetDoc>,
    #[serde(default)]
    pub chains: Vec<Vec<String>>,
    #[serde(default)]
    pub limits: Vec<Scalar>,
    pub dispatch: Option<String>,
    pub seed: Option<u64>,
    pub period: Option<Scalar>,
}

/// A file with a site list and a scheduler table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigDoc {
    #[serde(default)]
    pub site: Vec<SiteDoc>,
    #[serde(default)]
    pub scheduler: SchedulerDoc,
}

/// Read a file of `[[site]]` tables and an optional `[scheduler]` table.
pub fn parse_config(text: &str) -> Result<(Vec<Site>, SchedulerConfig), SpecError> {
    let doc: ConfigDoc = toml_doc(text)?;
    let sites = sites_from_docs(&doc.site)?;
    let config = scheduler_config(&doc.scheduler, &sites)?;
    Ok((sites, config))
}

fn bad(field: &str, rule: impl Into<String>) -> SpecError {
    SpecError::invalid(format!("scheduler.{field}"), rule)
}

fn dur(field: &str, v: &Option<Scalar>) -> Result<Option<Millis>, SpecError> {
    v.as_ref()
        .map(parse_duration)
        .transpose()
        .map_err(|r| bad(field, r))
}

/// A duration, `"none"` for no timeout (`None`), or `default` when absent.
fn timeout(
    field: &str,
    v: &Option<Scalar>,
    default: Option<Millis>,
) -> Result<Option<Millis>, SpecError> {
    match v {
        None => Ok(default),
        Some(Scalar::Str(s)) if s.eq_ignore_ascii_case("none") => Ok(None),
        Some(_) => match dur(field, v)? {
            Some(t) if t <= 0 => Err(bad(field, "must be longer than zero, or \"none\"")),
            t => Ok(t),
        },
    }
}

/// A count, or `"none"` for no limit.
fn limit(field: &str, v: &Option<Scalar>, default: Option<u32>) -> Result<Option<u32>, SpecError> {
    match v {
        None => Ok(default),
        Some(Scalar::Str(s)) if s.eq_ignore_ascii_case("none") => Ok(None),
        Some(Scalar::Int(n)) if *n >= 0 => u32::try_from(*n)
            .map(Some)
            .map_err(|_| bad(field, format!("is too large ({n})"))),
        Some(other) => Err(bad(
            field,
            format!("expected a count of zero or more, or \"none\" (got {other})"),
        )),
    }
}

fn fraction(field: &str, v: Option<f64>, default: f64, low_open: bool) -> Result<f64, SpecError> {
    let x = v.unwrap_or(default);
    let ok = x.is_finite() && x <= 1.0 && if low_open { x > 0.0 } else { x >= 0.0 };
    if ok {
        Ok(x)
    } else {
        let range = if low_open {
            "0 < x ≤ 1"
        } else {
            "0 ≤ x ≤ 1"
        };
        Err(bad(field, format!("must be in {range} (got {x})")))
    }
}

fn site_lists(
    field: &str,
    lists: &[Vec<String>],
    sites: &[Site],
) -> Result<Vec<Vec<usize>>, SpecError> {
    lists
        .iter()
        .map(|list| {
            list.iter()
                .map(|name| {
                    sites.iter().position(|s| &s.name == name).ok_or_else(|| {
                        bad(
                            field,
                            format!("names site `{name}`, which is not in the site list"),
                        )
                    })
                })
                .collect()
        })
        .collect()
}

/// Turn a `[scheduler]` table into a configuration for these sites; what it leaves out is
/// [`SchedulerConfig::default`]'s.
pub fn scheduler_config(doc: &SchedulerDoc, sites: &[Site]) -> Result<SchedulerConfig, SpecError> {
    scheduler_config_over(doc, sites, SchedulerConfig::default())
}

/// [`scheduler_config`] with what the table leaves out taken from `d` (the server's
/// [`SchedulerConfig::served`]).
pub fn scheduler_config_over(
    doc: &SchedulerDoc,
    sites: &[Site],
    d: SchedulerConfig,
) -> Result<SchedulerConfig, SpecError> {
    let fit = match &doc.fit {
        Some(f) => Fit::from_name(f).map_err(|r| bad("fit", r))?,
        None => d.fit,
    };
    let flexible_fit = match &doc.flexible {
        Some(f) => FlexibleFit::from_name(f).map_err(|r| bad("flexible", r))?,
        None => d.flexible_fit,
    };
    let claiming = match doc.claiming.as_deref().unwrap_or("immediate") {
        c if c.eq_ignore_ascii_case("icp") => {
            let i = doc.icp.clone().unwrap_or_default();
            let p = IcpParams::default();
            Claiming::Icp(IcpParams {
                l: fraction("icp.l", i.l, p.l, true)?,
                l_step: fraction("icp.l_step", i.l_step, p.l_step, false)?,
                l_min: fraction("icp.l_min", i.l_min, p.l_min, true)?,
                t: fraction("icp.t", i.t, p.t, false)?,
                max_claim_tries: limit(
                    "icp.max_claim_tries",
                    &i.max_claim_tries,
                    p.max_claim_tries,
                )?,
                preempt: i.preempt.unwrap_or(p.preempt),
            })
        }
        other => Claiming::from_name(other).map_err(|r| bad("claiming", r))?,
    };
    let queue = queue_config(doc, sites)?;
    let interactive_default = match doc
        .interactive
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("substitute") => InteractiveDefault::Substitute,
        Some("delete") => InteractiveDefault::Delete,
        Some(other) => {
            return Err(bad(
                "interactive",
                format!("unknown action `{other}` (expected one of: substitute, delete)"),
            ))
        }
    };
    let mut site_faults = d.site_faults;
    // "none" means no threshold: a site is never made unusable by its errors (0).
    site_faults.submit_errors = limit(
        "site_errors",
        &doc.site_errors,
        Some(site_faults.submit_errors),
    )?
    .unwrap_or(0);
    site_faults.completion_errors = limit(
        "completion_errors",
        &doc.completion_errors,
        Some(site_faults.completion_errors),
    )?
    .unwrap_or(0);
    let site_recovery = site_recovery(doc, d.site_recovery)?;
    Ok(SchedulerConfig {
        site_recovery,
        queue,
        fit,
        flexible_fit,
        claiming,
        site_faults,
        max_submit_failures: limit(
            "max_submit_failures",
            &doc.max_submit_failures,
            d.max_submit_failures,
        )?,
        max_completion_failures: limit(
            "max_completion_failures",
            &doc.max_completion_failures,
            d.max_completion_failures,
        )?,
        pending_timeout: timeout("pending_timeout", &doc.pending_timeout, d.pending_timeout)?,
        barrier_timeout: timeout("barrier_timeout", &doc.barrier_timeout, d.barrier_timeout)?,
        recancel_interval: timeout(
            "recancel_interval",
            &doc.recancel_interval,
            d.recancel_interval,
        )?,
        retry_backoff: dur("retry_backoff", &doc.retry_backoff)?
            .unwrap_or(d.retry_backoff)
            .max(0),
        retry_backoff_max: dur("retry_backoff_max", &doc.retry_backoff_max)?
            .unwrap_or(d.retry_backoff_max)
            .max(0),
        max_queued: limit("max_queued", &doc.max_queued, None)?.map(|n| n as usize),
        admission_backlog: match doc
            .admission
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None => d.admission_backlog,
            Some("backlog") => true,
            Some("refuse") => false,
            Some(other) => {
                return Err(bad(
                    "admission",
                    format!("unknown admission `{other}` (expected one of: backlog, refuse)"),
                ))
            }
        },
        interactive_default,
        default_estimate: dur("default_estimate", &doc.default_estimate)?
            .unwrap_or(d.default_estimate),
        record_try_times: limit("record_try_times", &doc.record_try_times, Some(0))?.unwrap_or(0)
            as usize,
        provisioning: provisioning(doc)?,
        subsystems: subsystems(doc, sites)?,
        // A driver's choice, not a setting of the file.
        forget_ended: d.forget_ended,
        notices: d.notices,
    })
}

/// `site_probe_after`, `site_healthy_for`, `site_probe_max` ([`SiteRecovery`]).
fn site_recovery(
    doc: &SchedulerDoc,
    d: Option<SiteRecovery>,
) -> Result<Option<SiteRecovery>, SpecError> {
    let base = d.unwrap_or_default();
    let Some(probe_after) = timeout(
        "site_probe_after",
        &doc.site_probe_after,
        d.map(|r| r.probe_after),
    )?
    else {
        return Ok(None);
    };
    Ok(Some(SiteRecovery {
        probe_after,
        healthy_for: dur("site_healthy_for", &doc.site_healthy_for)?
            .unwrap_or(base.healthy_for)
            .max(0),
        probe_max: dur("site_probe_max", &doc.site_probe_max)?
            .unwrap_or(base.probe_max)
            .max(probe_after),
    }))
}

/// `provisioning` and `[scheduler.on_demand]`.
fn provisioning(doc: &SchedulerDoc) -> Result<Provisioning, SpecError> {
    let name = doc.provisioning.as_deref().unwrap_or("on-demand");
    let chosen = Provisioning::from_name(name).map_err(|r| bad("provisioning", r))?;
    let Provisioning::OnDemand(d) = chosen else {
        return Ok(chosen);
    };
    let o = doc.on_demand.clone().unwrap_or_default();
    let p = OnDemandParams {
        idle_time: dur("on_demand.idle_time", &o.idle_time)?.unwrap_or(d.idle_time),
        release_margin: dur("on_demand.release_margin", &o.release_margin)?
            .unwrap_or(d.release_margin),
        lease_retry: dur("on_demand.lease_retry", &o.lease_retry)?.unwrap_or(d.lease_retry),
    };
    p.validate().map_err(|r| bad("on_demand", r))?;
    Ok(Provisioning::OnDemand(p))
}

/// `[scheduler.subsystems]`: every set non-empty, its sites known and named once.
fn subsystems(doc: &SchedulerDoc, sites: &[Site]) -> Result<Vec<Subsystem>, SpecError> {
    let mut out = Vec::new();
    for (name, list) in doc.subsystems.iter().flatten() {
        let field = format!("subsystems.{name}");
        if list.is_empty() {
            return Err(bad(&field, "names no site"));
        }
        let ids = site_lists(&field, std::slice::from_ref(list), sites)?.remove(0);
        if let Some(dup) = list
            .iter()
            .enumerate()
            .find(|(i, n)| list[..*i].contains(n))
        {
            return Err(bad(&field, format!("names site `{}` twice", dup.1)));
        }
        out.push(Subsystem {
            name: name.clone(),
            sites: ids,
        });
    }
    Ok(out)
}

/// `tags.sets`: each a list of site names or a subsystem's name, as site names.
fn tags_sets(doc: &SchedulerDoc, sets: &[SiteSetDoc]) -> Result<Vec<Vec<String>>, SpecError> {
    sets.iter()
        .map(|set| match set {
            SiteSetDoc::Sites(names) => Ok(names.clone()),
            SiteSetDoc::Subsystem(name) => doc
                .subsystems
                .as_ref()
                .and_then(|m| m.get(name))
                .cloned()
                .ok_or_else(|| {
                    bad(
                        "tags.sets",
                        format!("names subsystem `{name}`, which [scheduler.subsystems] lacks"),
                    )
                }),
        })
        .collect()
}

fn queue_config(doc: &SchedulerDoc, sites: &[Site]) -> Result<QueueConfig, SpecError> {
    let name = doc.policy.as_deref().unwrap_or("fcfs");
    let queue = QueueConfig::from_name(name).map_err(|r| bad("policy", r))?;
    Ok(match queue {
        QueueConfig::Koala(_) => {
            let k = doc.koala.clone().unwrap_or_default();
            let p = KoalaParams::default();
            let s = k.s.unwrap_or(i64::from(p.s));
            if s < 1 {
                return Err(bad("koala.s", format!("must be at least 1 (got {s})")));
            }
            QueueConfig::Koala(KoalaParams {
                s: u32::try_from(s).map_err(|_| bad("koala.s", "is too large"))?,
                scan_interval: dur("koala.scan_interval", &k.scan_interval)?
                    .unwrap_or(p.scan_interval),
                max_tries: limit("koala.max_tries", &k.max_tries, p.max_tries)?,
            })
        }
        QueueConfig::Rpp(_) => {
            let r = doc.rpp.clone().unwrap_or_default();
            let p = RppParams::default();
            let ignore = match &r.ignore {
                Some(Scalar::Str(s)) if s.eq_ignore_ascii_case("none") => None,
                other => dur("rpp.ignore", other)?,
            };
            let priority = match &r.priority {
                Some(name) => {
                    GlobalPriority::from_name(name).map_err(|e| bad("rpp.priority", e))?
                }
                None => p.priority,
            };
            QueueConfig::Rpp(RppParams {
                lp: fraction("rpp.lp", r.lp, p.lp, true)?,
                mp: limit("rpp.mp", &r.mp, p.mp)?,
                ignore,
                priority,
            })
        }
        QueueConfig::Ff(_)
        | QueueConfig::Rr(_)
        | QueueConfig::Sjf(_)
        | QueueConfig::SjfIdeal(_)
        | QueueConfig::Hsdf(_) => {
            let k = doc.koala_c.clone().unwrap_or_default();
            let p = KoalaCParams {
                period: dur("koala_c.period", &k.period)?,
                default_runtime: dur("koala_c.default_runtime", &k.default_runtime)?
                    .unwrap_or(KoalaCParams::default().default_runtime),
            };
            match queue {
                QueueConfig::Ff(_) => QueueConfig::Ff(p),
                QueueConfig::Rr(_) => QueueConfig::Rr(p),
                QueueConfig::Sjf(_) => QueueConfig::Sjf(p),
                QueueConfig::SjfIdeal(_) => QueueConfig::SjfIdeal(p),
                _ => QueueConfig::Hsdf(p),
            }
        }
        QueueConfig::TagsChain(_) | QueueConfig::TagsSets(_) => {
            let t = doc.tags.clone().unwrap_or_default();
            let limits = t
                .limits
                .iter()
                .map(|l| parse_duration(l).map_err(|r| bad("tags.limits", r)))
                .collect::<Result<Vec<_>, _>>()?;
            let period = dur("tags.period", &t.period)?;
            if matches!(queue, QueueConfig::TagsSets(_)) {
                let p = TagsSetsParams {
                    sets: site_lists("tags.sets", &tags_sets(doc, &t.sets)?, sites)?,
                    limits,
                    period,
                };
                p.validate()
                    .and_then(|()| p.check_sites(sites.len()))
                    .map_err(|r| bad("tags", r))?;
                QueueConfig::TagsSets(p)
            } else {
                let dispatch = match t
                    .dispatch
                    .as_deref()
                    .map(str::to_ascii_lowercase)
                    .as_deref()
                {
                    None | Some("rr") | Some("round-robin") => ChainDispatch::RoundRobin,
                    Some("random") => ChainDispatch::Random {
                        seed: t.seed.unwrap_or(0),
                    },
                    Some(other) => {
                        return Err(bad(
                            "tags.dispatch",
                            format!("unknown dispatch `{other}` (expected one of: rr, random)"),
                        ))
                    }
                };
                let p = TagsChainParams {
                    chains: site_lists("tags.chains", &t.chains, sites)?,
                    limits,
                    dispatch,
                    period,
                };
                p.validate()
                    .and_then(|()| p.check_sites(sites.len()))
                    .map_err(|r| bad("tags", r))?;
                QueueConfig::TagsChain(p)
            }
        }
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SITES: &str =
        "[[site]]\nname = \"a\"\nprocessors = 32\n[[site]]\nname = \"b\"\nprocessors = 32\n";

    fn parse(extra: &str) -> Result<SchedulerConfig, String> {
        parse_config(&format!("{SITES}{extra}"))
            .map(|(_, c)| c)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn none_means_no_error_threshold() {
        let c =
            parse("[scheduler]\nsite_errors = \"none\"\ncompletion_errors = \"none\"\n").unwrap();
        assert_eq!(
            (c.site_faults.submit_errors, c.site_faults.completion_errors),
            (0, 0)
        );
        let d = parse("[scheduler]\nsite_errors = 5\n").unwrap();
        assert_eq!(
            (d.site_faults.submit_errors, d.site_faults.completion_errors),
            (5, 3)
        );
    }

    #[test]
    fn timeouts_and_back_off_are_read_and_none_turns_a_timeout_off() {
        let c = parse("[scheduler]\nbarrier_timeout = \"90s\"\npending_timeout = \"none\"\nretry_backoff = \"5s\"\nretry_backoff_max = \"1m\"\n").unwrap();
        assert_eq!(c.barrier_timeout, Some(90_000));
        assert_eq!(c.pending_timeout, None);
        assert_eq!((c.retry_backoff, c.retry_backoff_max), (5_000, 60_000));
        assert_eq!(
            [1, 2, 3, 4, 5, 6].map(|n| c.backoff_after(n)),
            [5_000, 10_000, 20_000, 40_000, 60_000, 60_000]
        );
        let e = parse("[scheduler]\nbarrier_timeout = \"0s\"\n").unwrap_err();
        assert!(e.contains("barrier_timeout"), "{e}");
        // What the file leaves out comes from the defaults given: the simulator's are off.
        let d = parse("").unwrap();
        assert_eq!(
            (d.barrier_timeout, d.pending_timeout, d.retry_backoff),
            (None, None, 0)
        );
        let (sites, _) = parse_config(SITES).unwrap();
        let served =
            scheduler_config_over(&SchedulerDoc::default(), &sites, SchedulerConfig::served())
                .unwrap();
        assert_eq!(served.barrier_timeout, Some(5 * 60_000));
        assert_eq!(served.pending_timeout, Some(10 * 60_000));
        assert_eq!(served.backoff_after(1), 10_000);
        assert_eq!(served.site_recovery, Some(SiteRecovery::default()));
        assert_eq!(d.site_recovery, None);
        let r = parse("[scheduler]\nsite_probe_after = \"2m\"\nsite_healthy_for = \"10s\"\n")
            .unwrap()
            .site_recovery
            .expect("on");
        assert_eq!((r.probe_after, r.healthy_for), (120_000, 10_000));
    }

    #[test]
    fn the_recancel_interval_is_read_and_none_turns_it_off() {
        assert_eq!(
            parse("[scheduler]\nrecancel_interval = \"45s\"\n")
                .unwrap()
                .recancel_interval,
            Some(45_000)
        );
        let (sites, _) = parse_config(SITES).unwrap();
        let served = |doc: &SchedulerDoc| {
            scheduler_config_over(doc, &sites, SchedulerConfig::served()).map_err(|e| e.to_string())
        };
        // A server cancels a draining launch again every 30 s; the simulator asks once.
        let dflt = served(&SchedulerDoc::default()).unwrap();
        assert_eq!(dflt.recancel_interval, Some(30_000));
        assert_eq!(parse("").unwrap().recancel_interval, None);
        let off = SchedulerDoc {
            recancel_interval: Some(Scalar::Str("none".into())),
            ..SchedulerDoc::default()
        };
        assert_eq!(served(&off).unwrap().recancel_interval, None);
        let e = parse("[scheduler]\nrecancel_interval = \"0s\"\n").unwrap_err();
        assert!(e.contains("recancel_interval"), "{e}");
    }

    #[test]
    fn every_policy_is_reachable_by_name() {
        for name in QueueConfig::NAMES {
            let tags = "[scheduler.tags]\nsets = [[\"a\", \"b\"], [\"b\"]]\nchains = [[\"a\", \"b\"]]\nlimits = [\"10m\"]\n";
            let text = format!("[scheduler]\npolicy = \"{name}\"\n{tags}");
            let c = parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(c.queue.build().name(), *name);
        }
    }

    #[test]
    fn parameters_are_read_and_checked() {
        let c = parse("[scheduler]\npolicy = \"koala\"\nclaiming = \"icp\"\nfit = \"ctf\"\n[scheduler.koala]\ns = 3\nscan_interval = \"2m\"\nmax_tries = 10\n[scheduler.icp]\nl = 0.5\nt = 1\n").unwrap();
        assert_eq!(
            c.queue,
            QueueConfig::Koala(KoalaParams {
                s: 3,
                scan_interval: 120_000,
                max_tries: Some(10)
            })
        );
        assert!(matches!(c.claiming, Claiming::Icp(p) if p.l == 0.5 && p.t == 1.0));
        assert_eq!(c.fit, Fit::CloseToFiles);
        let tags = parse("[scheduler]\npolicy = \"tags-sets\"\n[scheduler.tags]\nsets = [[\"a\", \"b\"], [\"b\"]]\nlimits = [\"10m\"]\n").unwrap();
        assert_eq!(
            tags.queue,
            QueueConfig::TagsSets(TagsSetsParams {
                sets: vec![vec![0, 1], vec![1]],
                limits: vec![600_000],
                period: None
            })
        );
        assert_eq!(
            parse("[scheduler]\npolicy = \"lottery\"\n").unwrap_err(),
            format!(
                "scheduler.policy: unknown queue policy `lottery` (expected one of: {})",
                QueueConfig::NAMES.join(", ")
            )
        );
        assert_eq!(
            parse("[scheduler]\nclaiming = \"icp\"\n[scheduler.icp]\nl = 1.5\n").unwrap_err(),
            "scheduler.icp.l: must be in 0 < x ≤ 1 (got 1.5)"
        );
        assert_eq!(
            parse(
                "[scheduler]\npolicy = \"tags-sets\"\n[scheduler.tags]\nsets = [[\"a\", \"z\"]]\n"
            )
            .unwrap_err(),
            "scheduler.tags.sets: names site `z`, which is not in the site list"
        );
        assert!(parse("[scheduler]\npolcy = \"fcfs\"\n")
            .unwrap_err()
            .contains("unknown field `polcy`"));
    }
}
