//! The server's configuration: one TOML file with a `[server]` table, the `[[site]]` list
//! (each site's `manager` table names its backend) and the `[scheduler]` table of the core
//! (`coalloc_core::spec::scheduler`). With no file, the embedded default: three local
//! clusters of processes on this machine and the modified worst fit under FCFS.
//!
//! ```toml
//! [server]
//! bind = "127.0.0.1:0"          # port 0: any free port, written to the state directory
//! socket = "/run/coalloc.sock"  # the Unix socket local users' CLI talks over, each known by
//!                               # its uid (default: coalloc.sock in the state directory)
//! run_as_owner = true           # components run as their job's owner (server runs as root)
//! monitor_interval = "200ms"    # how often each site's resource manager is polled
//! sample_interval = "2s"        # surveillance log period while jobs are live (changes are
//!                               # written at every monitor reading)
//! agent_bind = "0.0.0.0:7443"   # where site agents connect (needed when a site is an agent's)
//! agent_url = "wss://server.example.org:7443"   # what enrolment tokens carry (default: bind)
//! heartbeat = "1s"              # the server pings each agent this often
//! tls = "auto"                  # HTTPS on the API: "auto" (beyond loopback only; loopback is
//!                               # 127.0.0.0/8 and ::1), "on" (always) or "off" (never: a
//!                               # bind beyond loopback is then refused)
//! tls_cert = "/etc/coalloc/api.crt"  # the operator's certificate chain (PEM) and its key
//! tls_key = "/etc/coalloc/api.key"   # (PEM); without them, a self-signed certificate made
//!                               # once in the state directory (api-tls/), whose fingerprint
//!                               # `coalloc login` pins
//! min_job_age = "5m"            # an ended job leaves memory this long after its end (like
//!                               # Slurm's MinJobAge); `coalloc history` still finds it
//! journal = "postgres://coalloc@db.example.org/coalloc"   # the journal, snapshots and
//!                               # history in PostgreSQL (default: journal.sqlite and
//!                               # snapshot.bin in the state directory; see journal)
//! lease = "3s"                  # PostgreSQL only: the leader renews its lease on the
//!                               # journal every quarter of this; a standby server on the
//!                               # same database takes over once it has run out
//!                               # (journal::postgres::lease)
//! urls = ["https://a.example.org:8443", "https://b.example.org:8443"]   # PostgreSQL only:
//!                               # every server's API address (leader and standbys, this
//!                               # one's included), told to components (COALLOC_URL), which
//!                               # follow whichever leads
//! agent_urls = ["wss://a.example.org:7443", "wss://b.example.org:7443"]   # the same for
//!                               # agents: enrolment tokens list them all
//! snapshot_every = 25000        # journal entries after which the state is snapshotted and
//!                               # the journal compacted (0: never; see driver::snapshot)
//! cache_limit = "10GB"          # per site: bytes of input files kept after transfers (LRU)
//! transfer_timeout = "30m"      # a transfer not done by then fails (its file site's error)
//!
//! [[site]]
//! name = "alpha"
//! processors = 16
//! manager = { type = "local" }  # or { type = "slurm", slurm_conf = "/path/slurm.conf" }
//! # A Slurm site hands components over as batch jobs (`launch = "batch"`, the default) or
//! # as allocations started inside the request (`launch = "allocation"`; see
//! # coalloc_backends::slurm::alloc).
//! # A site on another host: manager = { type = "agent", grace = "30s" }; its agent
//! # (`coalloc agent` on the site's login node) runs the site's own manager there, and the
//! # site counts as failed when the agent's link has been down longer than `grace`.
//! # A Grid Engine cell: manager = { type = "gridengine", settings = "/ge/delta/common/settings.sh",
//! #   pe = "mpi" }: `settings` (the cell's settings.sh) or `sge_root` (+ `cell`,
//! #   `qmaster_port`, `execd_port`) select the cell; `queue` one cluster queue; `pe` the
//! #   parallel environment of components of more than one slot (see
//! #   coalloc_backends::kind, which reads every site's `manager` table).
//! # Other users of a local cluster: `background = 4` holds 4 slots; with
//! # `background_max = 12, background_period = "30s"` the held slots are drawn again every
//! # period, uniformly on [background, background_max].
//! ```

pub(crate) mod checks;

use coalloc_core::model::{Millis, Site};
use coalloc_core::scheduler::SchedulerConfig;
use coalloc_core::spec::native::toml_doc;
use coalloc_core::spec::scheduler::{scheduler_config_over, SchedulerDoc};
use coalloc_core::spec::sites::{sites_from_docs, SiteDoc};
use coalloc_core::spec::units::{parse_duration, parse_size, Scalar};
use coalloc_core::SpecError;
use serde::Deserialize;

/// The embedded default: three local clusters, FCFS with the modified worst fit.
pub const DEFAULT_CONFIG: &str = r#"
[server]
bind = "127.0.0.1:0"

[[site]]
name = "alpha"
processors = 16
manager = { type = "local" }

[[site]]
name = "beta"
processors = 16
manager = { type = "local" }

[[site]]
name = "gamma"
processors = 16
manager = { type = "local" }

[scheduler]
policy = "fcfs"
fit = "worst"
"#;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(default)]
    server: ServerDoc,
    #[serde(default)]
    site: Vec<SiteDoc>,
    #[serde(default)]
    scheduler: SchedulerDoc,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerDoc {
    bind: Option<String>,
    socket: Option<String>,
    run_as_owner: Option<bool>,
    monitor_interval: Option<Scalar>,
    sample_interval: Option<Scalar>,
    barrier_hold: Option<Scalar>,
    agent_bind: Option<String>,
    agent_url: Option<String>,
    heartbeat: Option<Scalar>,
    tls: Option<String>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
    min_job_age: Option<Scalar>,
    snapshot_every: Option<u64>,
    journal: Option<String>,
    lease: Option<Scalar>,
    urls: Option<Vec<String>>,
    agent_urls: Option<Vec<String>>,
    cache_limit: Option<Scalar>,
    transfer_timeout: Option<Scalar>,
}

pub use coalloc_backends::kind::{backend_of, BackendKind, PROVIDER_KEYS};

/// Where the server listens for site agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentListen {
    /// `HOST:PORT` to bind (`server.agent_bind`).
    pub bind: String,
    /// What enrolment tokens tell agents to reach, `wss://HOST:PORT` (`server.agent_url`;
    /// by default the bound address).
    pub url: Option<String>,
    /// How often the server pings each agent (`server.heartbeat`, default 1 s); three
    /// silent periods end a link.
    pub heartbeat: Millis,
}

/// When the API is served over HTTPS (`server.tls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Beyond loopback only (the default).
    Auto,
    /// Always, loopback included.
    On,
    /// Never: a bind beyond loopback is refused.
    Off,
}

/// The API's TLS settings (`server.tls`, `server.tls_cert`, `server.tls_key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiTls {
    pub mode: TlsMode,
    /// The operator's certificate chain and key (PEM files); `None`: the generated one.
    pub cert: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

/// Everything the server runs with.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub bind: String,
    /// HTTPS on the API.
    pub tls: ApiTls,
    /// The Unix socket local clients talk over, identified by their uid (`server.socket`;
    /// default `coalloc.sock` in the state directory).
    pub socket: Option<std::path::PathBuf>,
    /// Run each job's components as its owner (`server.run_as_owner`; the server must run
    /// as root): the local backend sets their uid and gid, Slurm's sbatch gets `--uid` and
    /// `--gid`. Refused with a Grid Engine site (qsub has no such option).
    pub run_as_owner: bool,
    pub monitor_interval: Millis,
    pub sample_interval: Millis,
    /// How long a barrier check-in is held before it answers "waiting".
    pub barrier_hold: Millis,
    /// How long an ended job stays in memory (and in `GET /v1/jobs`) after its end before
    /// it moves to the history table (`server.min_job_age`, default 5 minutes, as Slurm's
    /// MinJobAge).
    pub min_job_age: Millis,
    /// Journal entries after the last snapshot that make the driver take a new one and
    /// compact the journal (`server.snapshot_every`, default 25,000; 0: never).
    pub snapshot_every: u64,
    /// Where the journal, the snapshots and the history are kept (`server.journal`:
    /// `"sqlite"`, the default, in the state directory; or a `postgres://` connection
    /// string).
    pub journal: crate::journal::Backing,
    /// The term of the leader's lease on a PostgreSQL journal (`server.lease`, default 3 s,
    /// at least 200 ms): a standby takes over this long after the leader's last renewal.
    pub lease: Millis,
    /// Every server's API address on the same journal (`server.urls`; empty: this one's
    /// only): components are told all of them, this server's first.
    pub urls: Vec<String>,
    /// Every server's agent address on the same journal (`server.agent_urls`; empty: this
    /// one's only): enrolment tokens list them all.
    pub agent_urls: Vec<String>,
    /// The agent listener; `None` when no site is reached through an agent.
    pub agents: Option<AgentListen>,
    pub sites: Vec<Site>,
    pub backends: Vec<BackendKind>,
    /// The provider of each cloud site's VMs (`None` for clusters).
    pub providers: Vec<Option<ProviderKind>>,
    pub scheduler: SchedulerConfig,
    /// The program that starts each local cluster's long-lived launcher; set by the program
    /// that runs the server (`coalloc serve` names itself), not by the file. `None`: every
    /// local launch under a `/bin/sh` wrapper of its own.
    pub local_launcher: Option<coalloc_backends::local::LauncherCommand>,
    /// The program an `mpi` component runs under, `PROGRAM pmi-proxy -- EXECUTABLE ARGS`
    /// (coalloc-runtime's PMI proxy); set like `local_launcher` (`coalloc serve` names
    /// itself). `None`: `mpi` components fail to start, with the reason.
    pub pmi_proxy: Option<std::path::PathBuf>,
    /// Input-file transfers (seed 000 §2.5).
    pub files: FilesConfig,
}

/// How input files are moved and kept (see `catalog` and `transfer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilesConfig {
    /// Bytes of transfer-made replicas each site keeps at most (`server.cache_limit`).
    pub cache_limit: u64,
    /// A transfer not done after this long fails (`server.transfer_timeout`).
    pub transfer_timeout: Millis,
}

impl Default for FilesConfig {
    fn default() -> Self {
        FilesConfig {
            cache_limit: 10_000_000_000,
            transfer_timeout: 1_800_000,
        }
    }
}

/// How a cloud site's VMs are leased and released (coalloc-backends' providers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderKind {
    /// Extra local slots after the site's lease latency: the default of a local cloud site.
    Local,
    /// `lease_program SITE VM` prints the node; `release_program SITE VM NODE` gives it back.
    Command {
        lease: String,
        release: String,
        timeout: Millis,
    },
}

fn provider_of(site: &Site, backend: &BackendKind) -> Result<Option<ProviderKind>, SpecError> {
    let field = |k: &str| format!("site `{}`: manager.{k}", site.name);
    let get = |k: &str| site.manager.get(k).cloned();
    if site.cloud.is_none() {
        return match PROVIDER_KEYS.iter().find(|k| get(k).is_some()) {
            Some(k) => Err(SpecError::invalid(
                field(k),
                "only cloud sites (`kind = \"cloud\"`) have a provider",
            )),
            None => Ok(None),
        };
    }
    let default = match backend {
        BackendKind::Local { .. } => "local",
        BackendKind::Slurm { .. } | BackendKind::GridEngine(_) => "command",
        BackendKind::Agent { .. } => {
            return Err(SpecError::invalid(
                field("type"),
                "a cloud site cannot be reached through an agent yet",
            ))
        }
    };
    match get("provider").as_deref().unwrap_or(default) {
        "local" => Ok(Some(ProviderKind::Local)),
        "command" => {
            let program = |k: &str| {
                get(k).filter(|p| !p.trim().is_empty()).ok_or_else(|| {
                    SpecError::invalid(field(k), "a command provider needs this program")
                })
            };
            let timeout = match get("provider_timeout") {
                None => 600_000,
                Some(t) => parse_duration(&Scalar::Str(t))
                    .map_err(|r| SpecError::invalid(field("provider_timeout"), r))?,
            };
            Ok(Some(ProviderKind::Command {
                lease: program("lease_program")?,
                release: program("release_program")?,
                timeout,
            }))
        }
        other => Err(SpecError::invalid(
            field("provider"),
            format!("unknown provider `{other}` (known: local, command)"),
        )),
    }
}

/// The list `server.NAME` (every server's address of one kind), each beginning with one of
/// `schemes`; only with a PostgreSQL journal (`journal`), the one servers can share.
fn peer_urls(
    name: &str,
    list: &Option<Vec<String>>,
    schemes: &[&str],
    journal: &Option<String>,
) -> Result<Vec<String>, SpecError> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let key = format!("server.{name}");
    if !journal
        .as_deref()
        .is_some_and(|j| j.starts_with("postgres"))
    {
        return Err(SpecError::invalid(
            key,
            "several servers share a PostgreSQL journal only: set journal = \"postgres://...\"",
        ));
    }
    let mut out = Vec::new();
    for u in list {
        let u = u.trim().trim_end_matches('/');
        if !schemes.iter().any(|s| u.starts_with(s)) || u.contains(',') {
            return Err(SpecError::invalid(
                key,
                format!("`{u}` is not a {} URL", schemes.join(" or ")),
            ));
        }
        out.push(u.to_string());
    }
    Ok(out)
}

impl ServerConfig {
    /// Read a configuration from TOML text.
    pub fn parse(text: &str) -> Result<ServerConfig, SpecError> {
        let doc: FileDoc = toml_doc(text)?;
        if doc.site.is_empty() {
            return Err(SpecError::invalid(
                "site",
                "the configuration lists no `[[site]]`",
            ));
        }
        let sites = sites_from_docs(&doc.site)?;
        let scheduler = scheduler_config_over(&doc.scheduler, &sites, SchedulerConfig::served())?;
        let backends = sites
            .iter()
            .map(backend_of)
            .collect::<Result<Vec<_>, _>>()?;
        let providers = sites
            .iter()
            .zip(&backends)
            .map(|(s, b)| provider_of(s, b))
            .collect::<Result<Vec<_>, _>>()?;
        checks::gp_preempts_everywhere(&scheduler, &sites, &backends)?;
        checks::run_as_owner_everywhere(doc.server.run_as_owner == Some(true), &sites, &backends)?;
        let dur = |name: &str, v: &Option<Scalar>, default: Millis| -> Result<Millis, SpecError> {
            match v {
                None => Ok(default),
                Some(v) => {
                    parse_duration(v).map_err(|r| SpecError::invalid(format!("server.{name}"), r))
                }
            }
        };
        let s = &doc.server;
        let any_agent = backends
            .iter()
            .any(|b| matches!(b, BackendKind::Agent { .. }));
        let agents = match (&s.agent_bind, any_agent) {
            (Some(bind), _) => Some(AgentListen {
                bind: bind.clone(),
                url: match &s.agent_url {
                    Some(u) if !u.starts_with("wss://") => {
                        return Err(SpecError::invalid(
                            "server.agent_url",
                            "must be wss://HOST:PORT",
                        ))
                    }
                    u => u.clone(),
                },
                heartbeat: dur("heartbeat", &s.heartbeat, 1_000)?.max(50),
            }),
            (None, true) => {
                return Err(SpecError::invalid(
                    "server.agent_bind",
                    "agent sites need an address to listen for their agents on, e.g. agent_bind = \"0.0.0.0:7443\"",
                ))
            }
            (None, false) => None,
        };
        let mode = match s.tls.as_deref() {
            None | Some("auto") => TlsMode::Auto,
            Some("on") => TlsMode::On,
            Some("off") => TlsMode::Off,
            Some(other) => {
                return Err(SpecError::invalid(
                    "server.tls",
                    format!("`{other}` is not one of auto, on, off"),
                ))
            }
        };
        let cert = match (&s.tls_cert, &s.tls_key) {
            (Some(c), Some(k)) => Some((c.into(), k.into())),
            (None, None) => None,
            _ => return Err(SpecError::invalid(
                "server.tls_cert",
                "tls_cert and tls_key go together (PEM files of the certificate chain and its key)",
            )),
        };
        if cert.is_some() && mode == TlsMode::Off {
            return Err(SpecError::invalid(
                "server.tls",
                "\"off\" with a tls_cert: say which is meant",
            ));
        }
        Ok(ServerConfig {
            agents,
            tls: ApiTls { mode, cert },
            bind: s.bind.clone().unwrap_or_else(|| "127.0.0.1:0".into()),
            socket: s.socket.as_ref().map(Into::into),
            run_as_owner: s.run_as_owner.unwrap_or(false),
            monitor_interval: dur("monitor_interval", &s.monitor_interval, 200)?.max(10),
            sample_interval: dur("sample_interval", &s.sample_interval, 2_000)?.max(100),
            barrier_hold: dur("barrier_hold", &s.barrier_hold, 25_000)?.max(10),
            min_job_age: dur("min_job_age", &s.min_job_age, 300_000)?,
            snapshot_every: s.snapshot_every.unwrap_or(25_000),
            journal: match s.journal.as_deref() {
                None | Some("sqlite") => crate::journal::Backing::Sqlite,
                Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                    crate::journal::Backing::Postgres(url.to_string())
                }
                Some(other) => {
                    return Err(SpecError::invalid(
                        "server.journal",
                        format!(
                            "`{}` is neither \"sqlite\" nor a postgres:// connection string",
                            crate::journal::postgres::shown(other)
                        ),
                    ))
                }
            },
            lease: dur("lease", &s.lease, 3_000)?.max(200),
            urls: peer_urls("urls", &s.urls, &["http://", "https://"], &s.journal)?,
            agent_urls: peer_urls("agent_urls", &s.agent_urls, &["wss://"], &s.journal)?,
            sites,
            backends,
            providers,
            scheduler,
            local_launcher: None,
            pmi_proxy: None,
            files: FilesConfig {
                cache_limit: match &s.cache_limit {
                    None => FilesConfig::default().cache_limit,
                    Some(v) => {
                        parse_size(v).map_err(|r| SpecError::invalid("server.cache_limit", r))?
                    }
                },
                transfer_timeout: dur(
                    "transfer_timeout",
                    &s.transfer_timeout,
                    FilesConfig::default().transfer_timeout,
                )?
                .max(10),
            },
        })
    }

    /// The embedded default.
    pub fn embedded() -> ServerConfig {
        ServerConfig::parse(DEFAULT_CONFIG).expect("the embedded default parses")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coalloc_backends::slurm::Launch;

    #[test]
    fn the_journal_is_sqlite_or_a_postgres_url_and_a_bad_one_is_shown_without_its_password() {
        use crate::journal::Backing;
        assert_eq!(ServerConfig::embedded().journal, Backing::Sqlite);
        let with = |j: &str| {
            ServerConfig::parse(&format!(
                "[server]\njournal = \"{j}\"\n[[site]]\nname = \"a\"\nprocessors = 1\nmanager = {{ type = \"local\" }}\n"
            ))
        };
        assert_eq!(with("sqlite").unwrap().journal, Backing::Sqlite);
        assert_eq!(
            with("postgres://coalloc@db/coalloc").unwrap().journal,
            Backing::Postgres("postgres://coalloc@db/coalloc".into())
        );
        // The lease's term: 3 s by default, at least 200 ms.
        assert_eq!(ServerConfig::embedded().lease, 3_000);
        let lease = |l: &str| {
            ServerConfig::parse(&format!(
                "[server]\nlease = \"{l}\"\n[[site]]\nname = \"a\"\nprocessors = 1\nmanager = {{ type = \"local\" }}\n"
            ))
            .map(|c| c.lease)
        };
        assert_eq!(lease("10s").unwrap(), 10_000);
        assert_eq!(lease("50ms").unwrap(), 200);
        assert!(lease("soon")
            .unwrap_err()
            .to_string()
            .contains("server.lease"));
        let e = with("mysql://ann:s3cret@db/x").unwrap_err().to_string();
        assert!(
            e.contains("mysql://ann@db/x") && !e.contains("s3cret"),
            "{e}"
        );
    }

    #[test]
    fn the_servers_addresses_are_listed_with_a_shared_journal_only() {
        let parse = |server: &str| {
            ServerConfig::parse(&format!(
                "[server]\n{server}\n[[site]]\nname = \"a\"\nprocessors = 1\nmanager = {{ type = \"local\" }}\n"
            ))
        };
        let pg = "journal = \"postgres://coalloc@db/coalloc\"\n";
        let c = parse(&format!(
            "{pg}urls = [\"https://a:8443/\", \"https://b:8443\"]\nagent_urls = [\"wss://a:7443\", \"wss://b:7443\"]"
        ))
        .unwrap();
        assert_eq!(c.urls, ["https://a:8443", "https://b:8443"]);
        assert_eq!(c.agent_urls, ["wss://a:7443", "wss://b:7443"]);
        assert!(ServerConfig::embedded().urls.is_empty());
        let e = parse("urls = [\"https://a:8443\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("server.urls") && e.contains("PostgreSQL"), "{e}");
        let e = parse(&format!("{pg}agent_urls = [\"https://a:7443\"]"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("server.agent_urls") && e.contains("wss://"),
            "{e}"
        );
    }

    #[test]
    fn the_embedded_default_has_three_local_clusters() {
        let c = ServerConfig::embedded();
        assert_eq!(c.sites.len(), 3);
        assert!(c.backends.iter().all(|b| *b
            == BackendKind::Local {
                background: 0,
                varying: None
            }));
        assert_eq!(c.bind, "127.0.0.1:0");
        assert_eq!(c.monitor_interval, 200);
        // Nothing waits for ever on a server (issue 20).
        assert_eq!(c.scheduler.barrier_timeout, Some(5 * 60_000));
        assert_eq!(c.scheduler.pending_timeout, Some(10 * 60_000));
        assert_eq!(c.scheduler.retry_backoff, 10_000);
    }

    #[test]
    fn bad_configurations_name_the_field() {
        let cases = [
            (
                "[[site]]\nname = \"a\"\nprocessors = 4\nmanager = { type = \"pbs\" }\n",
                "manager.type",
            ),
            (
                "[[site]]\nname = \"a\"\nprocessors = 4\nmanager = { type = \"slurm\" }\n",
                "slurm_conf",
            ),
            (
                "[[site]]\nname = \"a\"\nprocessors = 4\nmanager = { colour = \"x\" }\n",
                "manager.colour",
            ),
            ("[server]\nbind = \"x\"\n", "site"),
            (
                "[server]\nport = 3\n[[site]]\nname = \"a\"\nprocessors = 4\n",
                "port",
            ),
            (
                "[server]\nmonitor_interval = \"soon\"\n[[site]]\nname = \"a\"\nprocessors = 4\n",
                "monitor_interval",
            ),
        ];
        for (text, want) in cases {
            let e = ServerConfig::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn reserve_claiming_is_served() {
        let c = ServerConfig::parse(
            "[scheduler]\nclaiming = \"reserve\"\n[[site]]\nname = \"a\"\nprocessors = 4\n",
        )
        .unwrap();
        assert!(matches!(
            c.scheduler.claiming,
            coalloc_core::scheduler::Claiming::Reserve(_)
        ));
    }

    #[test]
    fn a_slurm_site_launches_batch_jobs_unless_told_otherwise() {
        let site = |m: &str| {
            format!(
                "[[site]]\nname = \"a\"\nprocessors = 8\nmanager = {{ type = \"slurm\", slurm_conf = \"/s.conf\"{m} }}\n"
            )
        };
        let launch = |m: &str| match &ServerConfig::parse(&site(m)).unwrap().backends[0] {
            BackendKind::Slurm { launch, .. } => *launch,
            other => panic!("{other:?}"),
        };
        assert_eq!(launch(""), Launch::Batch);
        assert_eq!(launch(", launch = \"batch\""), Launch::Batch);
        assert_eq!(launch(", launch = \"allocation\""), Launch::Allocation);
        let e = ServerConfig::parse(&site(", launch = \"srun\""))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("manager.launch") && e.contains("batch, allocation"),
            "{e}"
        );
    }

    #[test]
    fn a_varying_background_load_is_checked() {
        let site = |m: &str| {
            format!(
                "[[site]]\nname = \"a\"\nprocessors = 8\nmanager = {{ type = \"local\", {m} }}\n"
            )
        };
        let c = ServerConfig::parse(&site(
            "background = 2, background_max = 6, background_period = \"500ms\"",
        ))
        .unwrap();
        assert_eq!(
            c.backends[0],
            BackendKind::Local {
                background: 2,
                varying: Some((6, 500))
            }
        );
        for bad in [
            "background = 2, background_max = 9",
            "background = 4, background_max = 3",
            "background_max = 4, background_period = \"soon\"",
        ] {
            assert!(ServerConfig::parse(&site(bad)).is_err(), "{bad}");
        }
    }
}
