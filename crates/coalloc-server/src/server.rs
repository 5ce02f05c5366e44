//! Putting the server together: the state directory, the backends of the configured sites,
//! the driver thread, the HTTP listener, the Unix socket local users' clients talk over
//! (their uid is who they are; see [`crate::users`]), and `server.json` so that clients
//! find it.

use crate::api::{router, AppState};
use crate::config::{AgentListen, BackendKind, ProviderKind, ServerConfig};
use crate::driver::{Driver, StartError};
use crate::link::hub::Hub;
use crate::link::remote::{AgentBackend, AgentSite};
use crate::link::tls;
use crate::msg::Msg;
use crate::state::StateDir;
use coalloc_backends::provider::{CommandProvider, LocalProvider, Provider};
use coalloc_backends::Backend;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("state directory {0}: {1}")]
    State(String, std::io::Error),
    #[error("cannot listen on {0}: {1}")]
    Bind(String, std::io::Error),
    #[error("site `{0}`: {1}")]
    Backend(String, String),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The configuration asks for what this server cannot do here.
    #[error("{0}")]
    Refused(String),
}

/// What the server holds of one site: its resource manager and, for a cloud site, the
/// provider of its VMs; for an agent site, its link.
pub struct SiteParts {
    pub backend: Arc<dyn Backend>,
    pub provider: Option<Arc<dyn Provider>>,
    pub agent: Option<Arc<AgentSite>>,
}

/// Make the backend and provider of every site.
pub fn site_parts(
    config: &ServerConfig,
    state: &StateDir,
    hub: Option<&Hub>,
) -> Result<Vec<SiteParts>, ServeError> {
    let backends = backends(config, state, hub)?;
    Ok(backends
        .into_iter()
        .zip(config.sites.iter().zip(&config.providers))
        .map(|(backend, (site, p))| {
            let latency = site.cloud.as_ref().map_or(0, |c| c.lease_latency);
            let provider: Option<Arc<dyn Provider>> = match p {
                None => None,
                Some(ProviderKind::Local) => Some(Arc::new(LocalProvider {
                    site: site.name.clone(),
                    latency: Duration::from_millis(latency as u64),
                })),
                Some(ProviderKind::Command {
                    lease,
                    release,
                    timeout,
                }) => Some(Arc::new(CommandProvider {
                    site: site.name.clone(),
                    lease_program: lease.clone(),
                    release_program: release.clone(),
                    timeout: Duration::from_millis(*timeout as u64),
                })),
            };
            let agent = hub
                .and_then(|h| h.sites.get(&site.name))
                .map(|(_, s)| s.clone());
            SiteParts {
                backend,
                provider,
                agent,
            }
        })
        .collect())
}

/// Make the backend of every site. A cloud site provisioned on demand starts with no
/// processors: they come with its leased VMs. An agent site's backend is its link.
pub fn backends(
    config: &ServerConfig,
    state: &StateDir,
    hub: Option<&Hub>,
) -> Result<Vec<Arc<dyn Backend>>, ServeError> {
    let on_demand = matches!(
        config.scheduler.provisioning,
        coalloc_core::provisioning::Provisioning::OnDemand(_)
    );
    let tag = state.name_tag();
    config
        .sites
        .iter()
        .zip(&config.backends)
        .enumerate()
        .map(|(i, (site, kind))| {
            if let BackendKind::Agent { .. } = kind {
                let link = hub
                    .and_then(|h| h.sites.get(&site.name))
                    .map(|(_, s)| s.clone())
                    .ok_or_else(|| {
                        ServeError::Backend(site.name.clone(), "no agent listener".into())
                    })?;
                return Ok(Arc::new(AgentBackend(link)) as Arc<dyn Backend>);
            }
            let made = BackendParts {
                index: i,
                work_dir: state.site_dir(&site.name),
                launcher: config.local_launcher.clone(),
                cloud_on_demand: on_demand && site.cloud.is_some(),
                name_tag: tag.clone(),
            };
            backend_for(site, kind, made).map_err(|e| ServeError::Backend(site.name.clone(), e))
        })
        .collect()
}

pub use coalloc_backends::kind::{backend_for, BackendParts};

/// Bind `addr`. With port 0, the address of the last run (kept in the state directory's
/// file `memo`) is tried first: components and agents of that run know the server by it,
/// and find it again after a restart.
async fn listen(
    addr: &str,
    state: &StateDir,
    memo: &str,
) -> Result<tokio::net::TcpListener, ServeError> {
    let listener = bind_again(addr, state, memo).await?;
    std::fs::write(
        state.root.join(memo),
        format!("{}\n", listener.local_addr()?),
    )?;
    Ok(listener)
}

async fn bind_again(
    addr: &str,
    state: &StateDir,
    memo: &str,
) -> Result<tokio::net::TcpListener, ServeError> {
    if addr.ends_with(":0") {
        if let Ok(last) = std::fs::read_to_string(state.root.join(memo)) {
            let last = last.trim();
            let same_host =
                last.rsplit_once(':').map(|(h, _)| h) == addr.rsplit_once(':').map(|(h, _)| h);
            if same_host {
                if let Ok(l) = tokio::net::TcpListener::bind(last).await {
                    return Ok(l);
                }
                tracing::warn!("the last address {last} is taken; components of the last run cannot reach this server");
            }
        }
    }
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| ServeError::Bind(addr.to_string(), e))
}

/// The agent listener, its TLS identity and the agent sites' links.
async fn agent_hub(
    config: &ServerConfig,
    listen_on: &AgentListen,
    state: &StateDir,
    mirror: Option<crate::state::Mirror>,
) -> Result<(Arc<Hub>, tokio::net::TcpListener, Arc<rustls::ServerConfig>), ServeError> {
    let dir = state.root.join("agents");
    let (cert, key) =
        tls::server_identity(&dir).map_err(|e| ServeError::State(dir.display().to_string(), e))?;
    let fingerprint = tls::fingerprint(&cert);
    let tls = tls::server_config(cert, key)
        .map_err(|e| ServeError::Backend("agents".into(), format!("TLS: {e}")))?;
    let listener = listen(&listen_on.bind, state, "agent-address").await?;
    let url = match &listen_on.url {
        Some(u) => u.clone(),
        None => format!("wss://{}", listener.local_addr()?),
    };
    let sites = config
        .sites
        .iter()
        .zip(&config.backends)
        .enumerate()
        .filter_map(|(i, (site, kind))| match kind {
            BackendKind::Agent { .. } => {
                let link = AgentSite::new(
                    site.name.clone(),
                    i,
                    Duration::from_millis(config.monitor_interval as u64),
                );
                Some((site.name.clone(), (i, Arc::new(link))))
            }
            _ => None,
        })
        .collect();
    let heartbeat = Duration::from_millis(listen_on.heartbeat as u64);
    let hub = Hub::new(
        sites,
        url,
        fingerprint,
        heartbeat,
        dir.join("credentials.json"),
    )
    .with_peers(&config.agent_urls, mirror);
    Ok((Arc::new(hub), listener, tls))
}

/// Refuse to start when a server answers on the Unix socket at `path` (the same state
/// directory's).
fn refuse_if_served(path: &Path) -> Result<(), ServeError> {
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(ServeError::Bind(
            path.display().to_string(),
            std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another server answers on this socket",
            ),
        ));
    }
    Ok(())
}

/// Listen on the Unix socket at `path` (a stale socket file of a past run is replaced),
/// open to every local user: the server tells them apart by their uid.
fn listen_unix(path: &Path) -> Result<tokio::net::UnixListener, ServeError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let bind_err = |e| ServeError::Bind(path.display().to_string(), e);
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        refuse_if_served(path)?;
        std::fs::remove_file(path).map_err(bind_err)?;
    }
    let l = tokio::net::UnixListener::bind(path).map_err(bind_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(bind_err)?;
    Ok(l)
}

/// A running server.
pub struct Running {
    pub url: String,
    pub tx: std::sync::mpsc::Sender<Msg>,
    driver: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Stop the driver and wait for it.
    pub fn stop(mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(d) = self.driver.take() {
            let _ = d.join();
        }
    }
}

/// Start everything; the HTTP server runs on the current tokio runtime until `shutdown`
/// resolves. Returns when the server has stopped.
pub async fn serve(
    config: ServerConfig,
    state_dir: &Path,
    bind: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    on_ready: impl FnOnce(&str),
) -> Result<(), ServeError> {
    // SAFETY: geteuid has no preconditions.
    if config.run_as_owner && unsafe { libc::geteuid() } != 0 {
        return Err(ServeError::Refused(
            "server.run_as_owner: components run as their owner only when the server runs as root (it sets their uid and gid, and sbatch's --uid is root's)".into(),
        ));
    }
    let state = StateDir::create(state_dir)
        .map_err(|e| ServeError::State(state_dir.display().to_string(), e))?;
    // The files the servers of a PostgreSQL journal share, as the database has them now
    // (the API's certificate among them, which a standby presents too).
    crate::standby::adopt_shared(&config, &state, None)?;
    let addr = bind.unwrap_or_else(|| config.bind.clone());
    let listener = listen(&addr, &state, "address").await?;
    let bound = listener.local_addr()?;
    let tls_wanted = crate::api_tls::wanted(&config.tls, &bound).map_err(ServeError::Refused)?;
    let root = state.root.clone();
    let api_identity = || -> Result<_, ServeError> {
        Ok(match tls_wanted {
            true => {
                Some(crate::api_tls::identity(&config.tls, &root).map_err(ServeError::Refused)?)
            }
            false => None,
        })
    };
    let api_tls = api_identity()?;
    let scheme = if api_tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{bound}");
    let socket_path = config
        .socket
        .clone()
        .unwrap_or_else(|| state.root.join("coalloc.sock"));
    // On PostgreSQL, a standby waits here (answering 503s) until the journal's lease is its
    // own; SQLite goes on at once. The same server started twice is refused first: the
    // second would take the lease at once (a restart's right) from the first.
    if config.journal != crate::journal::Backing::Sqlite {
        refuse_if_served(&socket_path)?;
    }
    let led = crate::standby::lead(&config, &state, &url, &listener, api_tls.as_ref())
        .await
        .map_err(StartError::from)?;
    let state = match led.as_ref().and_then(|j| j.name_tag()) {
        Some(tag) => state.shared_tag(tag.to_string()),
        None => state,
    };
    // Leading now: the shared files again (the leader may have changed them meanwhile).
    let shared = led.as_ref().map(|j| j.shared_files());
    let api_tls = match crate::standby::adopt_shared(&config, &state, shared.as_ref())? {
        true => api_identity()?,
        false => api_tls,
    };
    let token = state
        .token()
        .map_err(|e| ServeError::State(state_dir.display().to_string(), e))?;
    // A socket's path holds at most 107 bytes: a deep state directory goes without the
    // default one (with a warning); a configured one must work.
    let socket = if config.socket.is_none() && socket_path.as_os_str().len() > 107 {
        tracing::warn!(path = %socket_path.display(), "the state directory's path is too long for a Unix socket: no local socket (set server.socket)");
        None
    } else {
        Some(listen_unix(&socket_path)?)
    };
    let mut users = crate::users::Users::open(state.root.join("users.json"))
        .map_err(|e| ServeError::State(state_dir.display().to_string(), e))?;
    let mirror = crate::standby::mirror(shared.as_ref());
    if let Some(m) = &mirror {
        users = users.mirrored(m.clone());
    }
    let agents = match &config.agents {
        Some(a) => Some(agent_hub(&config, a, &state, mirror).await?),
        None => None,
    };
    if let Some(s) = &shared {
        s.offer(&state.root).map_err(ServeError::Refused)?;
    }
    let hub = agents.as_ref().map(|(h, _, _)| h.clone());
    let backends = site_parts(&config, &state, hub.as_deref())?;
    let hold = Duration::from_millis(config.barrier_hold as u64);
    let (tx, rx) = std::sync::mpsc::channel();
    let fingerprint = api_tls.as_ref().map(|t| t.fingerprint.clone());
    let storage = crate::journal::open(&config.journal, &state, led).map_err(StartError::from)?;
    let history = storage.history;
    let component_url = match config.urls.is_empty() {
        true => url.clone(),
        false => config.urls.join(","),
    };
    let (driver, shared) = Driver::start(
        config,
        backends,
        state.clone(),
        component_url,
        fingerprint,
        tx.clone(),
        storage.journal,
    )?;
    let thread = std::thread::Builder::new()
        .name("driver".into())
        .spawn(move || driver.run(rx))?;
    let running = Running {
        url: url.clone(),
        tx,
        driver: Some(thread),
    };
    let info = serde_json::json!({ "url": url, "pid": std::process::id(),
        "socket": socket.as_ref().map(|_| &socket_path),
        "fingerprint": api_tls.as_ref().map(|t| &t.fingerprint) });
    std::fs::write(state.server_file(), format!("{info}\n"))?;
    on_ready(&url);
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let app = router(AppState {
        shared,
        token,
        hold,
        stopping,
        hub,
        history,
        users: Arc::new(users),
        output: state.root.join("output"),
    });
    if let Some((hub, listener, tls)) = agents {
        tokio::spawn(hub.listen(listener, tls, app.clone(), running.tx.clone()));
    }
    // The Unix socket: the same API, each connection's caller known by its peer's uid.
    let local = socket.map(|socket| {
        let mut socket_stop = stop.subscribe();
        tokio::spawn(std::future::IntoFuture::into_future(
            axum::serve(
                socket,
                app.clone()
                    .into_make_service_with_connect_info::<crate::api::auth::PeerUid>(),
            )
            .with_graceful_shutdown(async move {
                let _ = socket_stop.wait_for(|s| *s).await;
            }),
        ))
    });
    let shutdown = async move {
        shutdown.await;
        let _ = stop.send(true);
    };
    let result = match api_tls {
        Some(t) => {
            axum::serve(crate::api_tls::TlsListener::new(listener, t.config)?, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
    };
    if let Some(local) = local {
        let _ = local.await;
        let _ = std::fs::remove_file(&socket_path);
    }
    let _ = std::fs::remove_file(state.server_file());
    running.stop();
    result.map_err(ServeError::Io)
}
