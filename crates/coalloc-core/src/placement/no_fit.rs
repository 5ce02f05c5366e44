//! Why a job does not fit, in words that name the component and the numbers.

use std::fmt;

/// Why [`place`](super::place) found no placement. Not an error of the job: the job may fit
/// later, when processors free up. `Display` gives one sentence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NoFit {
    /// The job has no components.
    NoComponents,
    /// No usable site has room for an unordered or total job's component.
    NoRoom {
        component: usize,
        label: Option<String>,
        needs: u32,
        /// The most idle processors on any usable site when the component was fitted;
        /// `None` when no site is usable.
        most_idle: Option<u32>,
        /// Components of the job placed before this one (the larger ones).
        placed_before: usize,
    },
    /// A component of an ordered job names no site.
    NoSiteNamed {
        component: usize,
        label: Option<String>,
    },
    /// A component of an ordered job names a site that is not in the list.
    UnknownSite {
        component: usize,
        label: Option<String>,
        site: String,
    },
    /// A component of an ordered job names an unusable site.
    UnusableSite {
        component: usize,
        label: Option<String>,
        site: String,
    },
    /// The site an ordered job's component names has too few idle processors left.
    SiteFull {
        component: usize,
        label: Option<String>,
        site: String,
        needs: u32,
        /// Idle after the job's earlier components on the site.
        idle: u32,
        /// Idle before the job.
        idle_before: u32,
    },
    /// Close-to-Files: no usable site holds a replica of the input file.
    NoReplica {
        component: usize,
        label: Option<String>,
        file: String,
    },
    /// Close-to-Files: sites have room for the component but none of them can receive the
    /// input file from a replica (no bandwidth known).
    FileUnreachable {
        component: usize,
        label: Option<String>,
        needs: u32,
        file: String,
    },
    /// A flexible job's total is more than the usable sites have idle.
    FlexibleCapacity {
        label: Option<String>,
        total: u32,
        min_component: u32,
        /// Idle processors on all usable sites.
        idle: u64,
        /// Idle processors on usable sites with at least `min_component` idle.
        idle_on_big_enough: u64,
    },
    /// A flexible job's total cannot be split into pieces of at least `min_component`: at
    /// most `max_pieces` such pieces fit in the total, and the `max_pieces` usable sites with
    /// the most idle hold less than the total.
    FlexibleSplit {
        label: Option<String>,
        total: u32,
        min_component: u32,
        max_pieces: u32,
        idle_on_best_sites: u64,
    },
}

/// `component 2 (label `sub3`)`, or `component 2` without a label.
fn who(component: usize, label: &Option<String>) -> String {
    match label {
        Some(l) => format!("component {component} (label `{l}`)"),
        None => format!("component {component}"),
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl fmt::Display for NoFit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoFit::NoComponents => write!(f, "the job has no components"),
            NoFit::NoRoom {
                component,
                label,
                needs,
                most_idle,
                placed_before,
            } => {
                write!(f, "{} needs {needs} processors; ", who(*component, label))?;
                match most_idle {
                    None => write!(f, "no site is usable"),
                    Some(m) => {
                        write!(f, "the most idle on any usable site is {m}")?;
                        if *placed_before > 0 {
                            write!(
                                f,
                                " after placing {} of the job",
                                plural(*placed_before, "other component", "other components")
                            )?;
                        }
                        Ok(())
                    }
                }
            }
            NoFit::NoSiteNamed { component, label } => {
                write!(
                    f,
                    "{} of the ordered job names no site",
                    who(*component, label)
                )
            }
            NoFit::UnknownSite {
                component,
                label,
                site,
            } => write!(
                f,
                "site `{site}` named by {} is not in the site list",
                who(*component, label)
            ),
            NoFit::UnusableSite {
                component,
                label,
                site,
            } => write!(
                f,
                "site `{site}` named by {} is unusable",
                who(*component, label)
            ),
            NoFit::SiteFull {
                component,
                label,
                site,
                needs,
                idle,
                idle_before,
            } => {
                write!(
                    f,
                    "{} needs {needs} processors on site `{site}`, which has {idle} idle",
                    who(*component, label)
                )?;
                if idle != idle_before {
                    write!(
                        f,
                        " after the job's earlier components there ({idle_before} before)"
                    )?;
                }
                Ok(())
            }
            NoFit::NoReplica {
                component,
                label,
                file,
            } => write!(
                f,
                "{} needs input file `{file}`, and no usable site holds a replica of it",
                who(*component, label)
            ),
            NoFit::FileUnreachable {
                component,
                label,
                needs,
                file,
            } => write!(
                f,
                "{} needs {needs} processors and input file `{file}`: no usable site with room \
                 is reachable from a replica (no bandwidth known)",
                who(*component, label)
            ),
            NoFit::FlexibleCapacity {
                label,
                total,
                min_component,
                idle,
                idle_on_big_enough,
            } => {
                write!(
                    f,
                    "{} of the flexible job needs {total} processors; the usable sites have \
                     {idle} idle in all",
                    who(0, label)
                )?;
                if *min_component > 1 {
                    write!(
                        f,
                        ", {idle_on_big_enough} of them on sites with at least {min_component} \
                         idle (the smallest piece allowed)"
                    )?;
                }
                Ok(())
            }
            NoFit::FlexibleSplit {
                label,
                total,
                min_component,
                max_pieces,
                idle_on_best_sites,
            } => {
                let k = *max_pieces as usize;
                write!(
                    f,
                    "{} of the flexible job needs {total} processors in pieces of at least \
                     {min_component}, so on at most {}; ",
                    who(0, label),
                    plural(k, "site", "sites")
                )?;
                if k == 1 {
                    write!(
                        f,
                        "the usable site with the most idle has {idle_on_best_sites}"
                    )
                } else {
                    write!(
                        f,
                        "the {k} usable sites with the most idle have {idle_on_best_sites} in all"
                    )
                }
            }
        }
    }
}

impl std::error::Error for NoFit {}
