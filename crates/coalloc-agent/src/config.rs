//! An agent's configuration ([`AgentConfig`]): its `[agent]` table and the one `[[site]]` it
//! serves, whose `manager` table is read as the server reads a site's
//! ([`coalloc_backends::kind::backend_of`]).

use coalloc_backends::kind::{backend_of, BackendKind};
use coalloc_core::model::Site;
use coalloc_core::spec::native::toml_doc;
use coalloc_core::spec::sites::{sites_from_docs, SiteDoc};
use coalloc_core::SpecError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// An agent's configuration file: an `[agent]` table and the one `[[site]]` it serves.
///
/// ```toml
/// [agent]
/// relay_bind = "10.201.2.1:7100"   # where the site's compute nodes reach this agent
/// relay_url = "http://10.201.2.1:7100"   # what components are told (default: from the bind)
/// environment = { COALLOC_POISSON_HOST = "10.200.0.11" }   # added to every component
/// stop_after = "10m"   # stop the site's launches after this long without the server
///                      # (heartbeat stop; off by default)
/// reserve = false      # make no advance reservations even if the site's manager could
///                      # (default true: whatever the backend may)
///
/// [[site]]
/// name = "s1"
/// processors = 32
/// manager = { type = "slurm", slurm_conf = "/etc/slurm/slurm.conf" }
/// ```
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub site: Site,
    pub backend: BackendKind,
    pub relay_bind: String,
    pub relay_url: String,
    pub environment: Vec<(String, String)>,
    /// Heartbeat stop: the agent stops its launches after this long without the server
    /// (`None`: never, the default). Give it no less than the site's `manager.grace` at
    /// the server, which re-places the jobs only after that.
    pub stop_after: Option<Duration>,
    /// Whether this agent may make advance reservations on its site (issue 31 item 3), if
    /// its backend can: `false` forbids them whatever the rights the site grants (the
    /// hello says so, and the server's reservation calls are refused with the reason).
    pub reserve: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(default)]
    agent: AgentDoc,
    site: Vec<SiteDoc>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentDoc {
    relay_bind: Option<String>,
    relay_url: Option<String>,
    #[serde(default)]
    environment: BTreeMap<String, String>,
    stop_after: Option<coalloc_core::spec::units::Scalar>,
    reserve: Option<bool>,
}

impl AgentConfig {
    pub fn parse(text: &str) -> Result<AgentConfig, SpecError> {
        let doc: FileDoc = toml_doc(text)?;
        let sites = sites_from_docs(&doc.site)?;
        let [site] = <[Site; 1]>::try_from(sites).map_err(|s| {
            SpecError::invalid(
                "site",
                format!("an agent serves exactly one `[[site]]`, not {}", s.len()),
            )
        })?;
        let backend = backend_of(&site)?;
        if matches!(backend, BackendKind::Agent { .. }) {
            return Err(SpecError::invalid(
                format!("site `{}`: manager.type", site.name),
                "an agent runs the site's own manager (local, slurm, gridengine), not another agent",
            ));
        }
        if site.cloud.is_some() {
            return Err(SpecError::invalid(
                format!("site `{}`: kind", site.name),
                "cloud sites cannot be served by an agent yet",
            ));
        }
        let relay_bind = doc
            .agent
            .relay_bind
            .unwrap_or_else(|| "127.0.0.1:7100".into());
        let relay_url = match doc.agent.relay_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None if relay_bind.starts_with("0.0.0.0:") || relay_bind.starts_with("[::]:") => {
                return Err(SpecError::invalid(
                    "agent.relay_url",
                    "with a wildcard relay_bind, say which address compute nodes use, e.g. \"http://10.1.0.5:7100\"",
                ))
            }
            None => format!("http://{relay_bind}"),
        };
        let stop_after = match &doc.agent.stop_after {
            None => None,
            Some(v) => Some(Duration::from_millis(
                coalloc_core::spec::units::parse_duration(v)
                    .map_err(|r| SpecError::invalid("agent.stop_after", r))? as u64,
            )),
        };
        Ok(AgentConfig {
            site,
            backend,
            relay_bind,
            relay_url,
            environment: doc.agent.environment.into_iter().collect(),
            stop_after,
            reserve: doc.agent.reserve.unwrap_or(true),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SITE: &str = "[[site]]\nname = \"s1\"\nprocessors = 8\nmanager = { type = \"local\" }\n";

    #[test]
    fn a_configuration_names_one_site_and_its_relay() {
        let c = AgentConfig::parse(&format!(
            "[agent]\nrelay_bind = \"10.201.2.1:7100\"\nenvironment = {{ A = \"b\" }}\n{SITE}"
        ))
        .unwrap();
        assert_eq!(c.site.name, "s1");
        assert_eq!(c.relay_url, "http://10.201.2.1:7100");
        assert_eq!(c.environment, vec![("A".into(), "b".into())]);
        assert_eq!(c.stop_after, None, "heartbeat stop is off by default");
        let c = AgentConfig::parse(&format!("[agent]\nstop_after = \"10m\"\n{SITE}")).unwrap();
        assert_eq!(c.stop_after, Some(Duration::from_secs(600)));
        assert!(c.reserve, "reservations as the backend may, by default");
        let c = AgentConfig::parse(&format!("[agent]\nreserve = false\n{SITE}")).unwrap();
        assert!(!c.reserve);
        let e = AgentConfig::parse(&format!("[agent]\nstop_after = \"soon\"\n{SITE}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("agent.stop_after"), "{e}");
        for (bad, want) in [
            (
                format!("[agent]\nrelay_bind = \"0.0.0.0:7100\"\n{SITE}"),
                "relay_url",
            ),
            (format!("{SITE}{}", SITE.replace("s1", "s2")), "exactly one"),
            (
                "[[site]]\nname = \"s\"\nprocessors = 8\nmanager = { type = \"agent\" }\n".into(),
                "manager.type",
            ),
            (format!("[agent]\ncolour = 1\n{SITE}"), "colour"),
        ] {
            let e = AgentConfig::parse(&bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
