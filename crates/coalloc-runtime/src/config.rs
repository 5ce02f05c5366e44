//! The component's configuration: the `COALLOC_*` environment the server gives every process
//! of every component (table in the crate documentation; seed 002 §3.3 — the co-allocator
//! tells each subjob who it is, where it sits in the job and how to reach the barrier).

use crate::error::RuntimeError;
use std::str::FromStr;
use std::time::Duration;

/// How long calls keep retrying an unreachable server by default (seed 002 §3.3: a restart
/// of the co-allocator must not kill components waiting at the barrier).
pub const DEFAULT_PATIENCE: Duration = Duration::from_secs(300);

/// Everything a component process knows about itself and its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The server's base URL, without a trailing `/` (`COALLOC_URL`'s first).
    pub url: String,
    /// Every server's base URL (`COALLOC_URL`, comma-separated: the leader and its
    /// standbys, issue 32 item 2): a call that cannot reach one goes on at the next.
    pub urls: Vec<String>,
    /// The barrier check-in URL (`COALLOC_BARRIER_URL`).
    pub barrier_url: String,
    /// The SHA-256 fingerprint (`sha256:HEX`) of the certificate the server presents when
    /// its URL is `https://` (`COALLOC_SERVER_FINGERPRINT`): the only certificate trusted.
    pub fingerprint: Option<String>,
    /// The job's secret, the bearer token of every call (`COALLOC_SECRET`).
    pub secret: String,
    /// The job's number (`COALLOC_JOB_ID`).
    pub job_id: u64,
    /// This start of this component (`COALLOC_LAUNCH`).
    pub launch: u64,
    /// This component's index, from 0 (`COALLOC_COMPONENT`).
    pub component: usize,
    /// Components in the job (`COALLOC_COMPONENTS`).
    pub components: usize,
    /// Every component's size, by index (`COALLOC_SIZES`).
    pub sizes: Vec<u32>,
    /// Job-wide rank of this component's first process (`COALLOC_RANK_OFFSET`).
    pub rank_offset: u64,
    /// The job's total size (`COALLOC_TOTAL`).
    pub total: u64,
    /// The site's name (`COALLOC_SITE`).
    pub site: String,
    /// Processes in this component (`COALLOC_PROCESSES`).
    pub processes: u32,
    /// This process's index in its component (`COALLOC_LOCAL_RANK`; 0 when unset, for
    /// backends that start a single process per component).
    pub local_rank: u32,
    /// This process's job-wide rank (`COALLOC_RANK`; `rank_offset + local_rank` when unset).
    pub rank: u64,
    /// The job's barrier timeout (`COALLOC_BARRIER_TIMEOUT_MS`, milliseconds): the barrier
    /// gives up after it, even while the server cannot be reached (the server fails the
    /// component at the same time, so nothing waits for ever; seed 002 §3.2).
    pub barrier_timeout: Option<Duration>,
    /// How long a call retries an unreachable server before giving up. Not from the
    /// environment: `DEFAULT_PATIENCE` (5 minutes) unless the program (or a test) changes it.
    pub patience: Duration,
}

impl Config {
    /// Read the configuration from the process environment.
    pub fn from_env() -> Result<Config, RuntimeError> {
        Config::from_vars(|name| std::env::var(name).ok())
    }

    /// Read the configuration through `get` (a variable's value, or `None` when unset), so
    /// that it can be built from any map. Every failure names the variable at fault.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Config, RuntimeError> {
        let text = |var: &'static str| -> Result<String, RuntimeError> {
            match get(var) {
                Some(v) if !v.trim().is_empty() => Ok(v.trim().to_owned()),
                _ => Err(RuntimeError::MissingVar(var)),
            }
        };
        let urls: Vec<String> = text("COALLOC_URL")?
            .split(',')
            .map(|u| u.trim().trim_end_matches('/').to_owned())
            .filter(|u| !u.is_empty())
            .collect();
        let url = urls.first().cloned().unwrap_or_default();
        let barrier_url = text("COALLOC_BARRIER_URL")?;
        let secret = text("COALLOC_SECRET")?;
        let fingerprint = get("COALLOC_SERVER_FINGERPRINT")
            .map(|f| f.trim().to_owned())
            .filter(|f| !f.is_empty());
        let job_id = number(&get, "COALLOC_JOB_ID")?;
        let launch = number(&get, "COALLOC_LAUNCH")?;
        let component: usize = number(&get, "COALLOC_COMPONENT")?;
        let components: usize = number(&get, "COALLOC_COMPONENTS")?;
        let sizes = parse_sizes(&text("COALLOC_SIZES")?)?;
        let rank_offset: u64 = number(&get, "COALLOC_RANK_OFFSET")?;
        let total = number(&get, "COALLOC_TOTAL")?;
        let site = text("COALLOC_SITE")?;
        let processes: u32 = number(&get, "COALLOC_PROCESSES")?;
        let local_rank: u32 = optional(&get, "COALLOC_LOCAL_RANK")?.unwrap_or(0);
        let rank: u64 = match optional(&get, "COALLOC_RANK")? {
            Some(r) => r,
            None => rank_offset.saturating_add(u64::from(local_rank)),
        };
        let barrier_timeout: Option<u64> = optional(&get, "COALLOC_BARRIER_TIMEOUT_MS")?;
        let bad = |var: &'static str, reason: String| RuntimeError::BadVar { var, reason };
        let all = urls.iter().map(|u| ("COALLOC_URL", u));
        for (var, u) in all.chain([("COALLOC_BARRIER_URL", &barrier_url)]) {
            if !u.starts_with("http://") && !u.starts_with("https://") {
                return Err(bad(var, format!("`{u}` is not an http:// URL")));
            }
        }
        if barrier_url.starts_with("https://") || urls.iter().any(|u| u.starts_with("https://")) {
            match &fingerprint {
                None => return Err(RuntimeError::MissingVar("COALLOC_SERVER_FINGERPRINT")),
                Some(f) if !f.starts_with("sha256:") => {
                    let why = format!("`{f}` is not a sha256: fingerprint");
                    return Err(bad("COALLOC_SERVER_FINGERPRINT", why));
                }
                Some(_) => {}
            }
        }
        if components == 0 {
            return Err(bad("COALLOC_COMPONENTS", "must be at least 1".into()));
        }
        if component >= components {
            let why = format!("{component} is not below COALLOC_COMPONENTS={components}");
            return Err(bad("COALLOC_COMPONENT", why));
        }
        if sizes.len() != components {
            let why = format!("{} sizes for {components} components", sizes.len());
            return Err(bad("COALLOC_SIZES", why));
        }
        if processes == 0 {
            return Err(bad("COALLOC_PROCESSES", "must be at least 1".into()));
        }
        if local_rank >= processes {
            let why = format!("{local_rank} is not below COALLOC_PROCESSES={processes}");
            return Err(bad("COALLOC_LOCAL_RANK", why));
        }
        Ok(Config {
            url,
            urls,
            barrier_url,
            fingerprint,
            secret,
            job_id,
            launch,
            component,
            components,
            sizes,
            rank_offset,
            total,
            site,
            processes,
            local_rank,
            rank,
            barrier_timeout: barrier_timeout.map(Duration::from_millis),
            patience: DEFAULT_PATIENCE,
        })
    }

    /// `url` at the server after the one it names (the next of [`Config::urls`], in turn),
    /// or `None` when there is no other: where a call goes on when its server cannot be
    /// reached or stands by.
    pub fn next_server(&self, url: &str) -> Option<String> {
        if self.urls.len() < 2 {
            return None;
        }
        let (i, rest) = self.urls.iter().enumerate().find_map(|(i, base)| {
            let rest = url.strip_prefix(base.as_str())?;
            (rest.is_empty() || rest.starts_with('/')).then_some((i, rest))
        })?;
        Some(format!("{}{rest}", self.urls[(i + 1) % self.urls.len()]))
    }

    /// The URL of rendezvous key `key` (percent-encoded into one path segment).
    pub fn kv_url(&self, key: &str) -> String {
        format!(
            "{}/v1/jobs/{}/kv/{}",
            self.url,
            self.job_id,
            crate::http::encode_segment(key)
        )
    }
}

fn optional<T: FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
) -> Result<Option<T>, RuntimeError>
where
    T::Err: std::fmt::Display,
{
    match get(var) {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|e| RuntimeError::BadVar {
                var,
                reason: format!("`{v}`: {e}"),
            }),
    }
}

fn number<T: FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
) -> Result<T, RuntimeError>
where
    T::Err: std::fmt::Display,
{
    optional(get, var)?.ok_or(RuntimeError::MissingVar(var))
}

fn parse_sizes(text: &str) -> Result<Vec<u32>, RuntimeError> {
    text.split(',')
        .map(|s| {
            s.trim().parse::<u32>().map_err(|e| RuntimeError::BadVar {
                var: "COALLOC_SIZES",
                reason: format!("`{text}`: {e}"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars() -> HashMap<&'static str, String> {
        [
            ("COALLOC_URL", "http://127.0.0.1:4417/"),
            (
                "COALLOC_BARRIER_URL",
                "http://127.0.0.1:4417/v1/jobs/7/barrier",
            ),
            ("COALLOC_SECRET", "s3cret"),
            ("COALLOC_JOB_ID", "7"),
            ("COALLOC_LAUNCH", "12"),
            ("COALLOC_COMPONENT", "1"),
            ("COALLOC_COMPONENTS", "3"),
            ("COALLOC_SIZES", "8, 8,16"),
            ("COALLOC_RANK_OFFSET", "8"),
            ("COALLOC_TOTAL", "32"),
            ("COALLOC_SITE", "kth"),
            ("COALLOC_PROCESSES", "8"),
            ("COALLOC_LOCAL_RANK", "3"),
            ("COALLOC_RANK", "11"),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_owned()))
        .collect()
    }

    fn parse(m: &HashMap<&'static str, String>) -> Result<Config, RuntimeError> {
        Config::from_vars(|k| m.get(k).cloned())
    }

    #[test]
    fn parses_a_full_environment() {
        let c = parse(&vars()).unwrap();
        assert_eq!(c.url, "http://127.0.0.1:4417");
        assert_eq!(c.job_id, 7);
        assert_eq!(c.launch, 12);
        assert_eq!((c.component, c.components), (1, 3));
        assert_eq!(c.sizes, vec![8, 8, 16]);
        assert_eq!((c.rank_offset, c.total, c.processes), (8, 32, 8));
        assert_eq!((c.local_rank, c.rank), (3, 11));
        assert_eq!(c.site, "kth");
        assert_eq!(c.patience, DEFAULT_PATIENCE);
        assert_eq!(
            c.kv_url("a/b c"),
            "http://127.0.0.1:4417/v1/jobs/7/kv/a%2Fb%20c"
        );
    }

    #[test]
    fn https_needs_the_servers_fingerprint() {
        let mut m = vars();
        m.insert("COALLOC_URL", "https://10.0.0.1:4417".into());
        let e = parse(&m).unwrap_err();
        assert!(
            matches!(e, RuntimeError::MissingVar("COALLOC_SERVER_FINGERPRINT")),
            "{e}"
        );
        let pin = format!("sha256:{}", "ab".repeat(32));
        m.insert("COALLOC_SERVER_FINGERPRINT", pin.clone());
        assert_eq!(parse(&m).unwrap().fingerprint, Some(pin));
        assert_eq!(parse(&vars()).unwrap().fingerprint, None);
    }

    #[test]
    fn several_servers_are_tried_in_turn() {
        let mut m = vars();
        m.insert(
            "COALLOC_URL",
            "http://10.0.0.1:4417/, http://10.0.0.2:4417".into(),
        );
        let c = parse(&m).unwrap();
        assert_eq!(c.url, "http://10.0.0.1:4417");
        assert_eq!(c.urls, ["http://10.0.0.1:4417", "http://10.0.0.2:4417"]);
        let b = "http://127.0.0.1:4417/v1/jobs/7/barrier";
        assert_eq!(c.next_server(b), None, "not one of the servers: no other");
        let kv = c.kv_url("k");
        assert_eq!(kv, "http://10.0.0.1:4417/v1/jobs/7/kv/k");
        let next = c.next_server(&kv).unwrap();
        assert_eq!(next, "http://10.0.0.2:4417/v1/jobs/7/kv/k");
        assert_eq!(c.next_server(&next).unwrap(), kv);
        // A prefix of a longer port is not the server.
        assert_eq!(c.next_server("http://10.0.0.1:44170/v1"), None);
        assert_eq!(parse(&vars()).unwrap().next_server(b), None);
        m.insert("COALLOC_URL", "http://10.0.0.1:4417,ftp://x".into());
        assert!(matches!(
            parse(&m),
            Err(RuntimeError::BadVar {
                var: "COALLOC_URL",
                ..
            })
        ));
    }

    #[test]
    fn per_process_variables_default() {
        let mut m = vars();
        m.remove("COALLOC_LOCAL_RANK");
        m.remove("COALLOC_RANK");
        let c = parse(&m).unwrap();
        assert_eq!((c.local_rank, c.rank), (0, 8));
    }

    #[test]
    fn errors_name_the_variable() {
        let mut m = vars();
        m.remove("COALLOC_SECRET");
        let e = parse(&m).unwrap_err();
        assert!(
            matches!(e, RuntimeError::MissingVar("COALLOC_SECRET")),
            "{e}"
        );
        assert!(e.to_string().contains("COALLOC_SECRET"));

        for (var, value) in [
            ("COALLOC_JOB_ID", "seven"),
            ("COALLOC_SIZES", "8,x"),
            ("COALLOC_SIZES", "8,8"),
            ("COALLOC_COMPONENT", "3"),
            ("COALLOC_LOCAL_RANK", "8"),
            ("COALLOC_URL", "ftp://x"),
            ("COALLOC_COMPONENTS", "0"),
            ("COALLOC_SERVER_FINGERPRINT", "md5:ab"),
        ] {
            let mut m = vars();
            if var == "COALLOC_SERVER_FINGERPRINT" {
                m.insert("COALLOC_URL", "https://10.0.0.1:4417".into());
            }
            m.insert(var, value.into());
            match parse(&m) {
                Err(RuntimeError::BadVar { var: v, .. }) => assert_eq!(v, var, "{value}"),
                other => panic!("{var}={value}: {other:?}"),
            }
        }
    }
}
