//! Putting the server together: the state directory, the backends of the configured sites,
//! the driver thread, the HTTP listener, and `server.json` so that clients find it.

use crate::api::{router, AppState};
use crate::config::{BackendKind, ProviderKind, ServerConfig};
use crate::driver::msg::Msg;
use crate::driver::{Driver, StartError};
use crate::state::StateDir;
use coalloc_backends::gridengine::GridEngineCell;
use coalloc_backends::local::{BackgroundLoad, LocalCluster, LocalConfig};
use coalloc_backends::provider::{CommandProvider, LocalProvider, Provider};
use coalloc_backends::slurm::{SlurmCluster, SlurmConfig};
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
}

/// What the server holds of one site: its resource manager and, for a cloud site, the
/// provider of its VMs.
pub struct SiteParts {
    pub backend: Arc<dyn Backend>,
    pub provider: Option<Arc<dyn Provider>>,
}

/// Make the backend and provider of every site.
pub fn site_parts(config: &ServerConfig, state: &StateDir) -> Result<Vec<SiteParts>, ServeError> {
    let backends = backends(config, state)?;
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
            SiteParts { backend, provider }
        })
        .collect())
}

/// Make the backend of every site. A cloud site provisioned on demand starts with no
/// processors: they come with its leased VMs.
pub fn backends(
    config: &ServerConfig,
    state: &StateDir,
) -> Result<Vec<Arc<dyn Backend>>, ServeError> {
    let on_demand = matches!(
        config.scheduler.provisioning,
        coalloc_core::provisioning::Provisioning::OnDemand(_)
    );
    config
        .sites
        .iter()
        .zip(&config.backends)
        .enumerate()
        .map(
            |(i, (site, kind))| -> Result<Arc<dyn Backend>, ServeError> {
                let err = |e: String| ServeError::Backend(site.name.clone(), e);
                match kind {
                    BackendKind::Local {
                        background,
                        varying,
                    } => {
                        let c = LocalCluster::new(LocalConfig {
                            name: site.name.clone(),
                            slots: site.processors,
                            initial_slots: (on_demand && site.cloud.is_some()).then_some(0),
                            work_dir: state.site_dir(&site.name),
                            background: varying.map(|(max, period)| BackgroundLoad {
                                min: *background,
                                max,
                                period: Duration::from_millis(period as u64),
                                seed: i as u64,
                            }),
                            launcher: config.local_launcher.clone(),
                        })
                        .map_err(|e| err(e.to_string()))?;
                        if *background > 0 && varying.is_none() {
                            c.set_background_slots(*background);
                        }
                        Ok(Arc::new(c))
                    }
                    BackendKind::Slurm {
                        conf,
                        cluster,
                        partition,
                        launch,
                    } => {
                        let mut c = SlurmConfig::new(site.name.clone());
                        c.launch = *launch;
                        c.slurm_conf = conf.as_ref().map(Into::into);
                        c.cluster = cluster.clone();
                        c.partition = partition.clone();
                        c.name_tag = Some(state.name_tag());
                        Ok(Arc::new(SlurmCluster::new(c)))
                    }
                    BackendKind::GridEngine(c) => {
                        let mut c = c.clone();
                        c.name_tag = Some(state.name_tag());
                        Ok(Arc::new(GridEngineCell::new(c)))
                    }
                }
            },
        )
        .collect()
}

/// Bind `addr`. With port 0, the address of the last run is tried first: components of
/// that run know the server by it, and find it again after a restart.
async fn listen(addr: &str, state: &StateDir) -> Result<tokio::net::TcpListener, ServeError> {
    if addr.ends_with(":0") {
        if let Ok(last) = std::fs::read_to_string(state.root.join("address")) {
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
    let state = StateDir::create(state_dir)
        .map_err(|e| ServeError::State(state_dir.display().to_string(), e))?;
    let token = state
        .token()
        .map_err(|e| ServeError::State(state_dir.display().to_string(), e))?;
    let addr = bind.unwrap_or_else(|| config.bind.clone());
    let listener = listen(&addr, &state).await?;
    let url = format!("http://{}", listener.local_addr()?);
    std::fs::write(
        state.root.join("address"),
        format!("{}\n", listener.local_addr()?),
    )?;
    let backends = site_parts(&config, &state)?;
    let hold = Duration::from_millis(config.barrier_hold as u64);
    let (tx, rx) = std::sync::mpsc::channel();
    let (driver, shared) = Driver::start(config, backends, state.clone(), url.clone(), tx.clone())?;
    let thread = std::thread::Builder::new()
        .name("driver".into())
        .spawn(move || driver.run(rx))?;
    let running = Running {
        url: url.clone(),
        tx,
        driver: Some(thread),
    };
    let info = serde_json::json!({ "url": url, "pid": std::process::id() });
    std::fs::write(state.server_file(), format!("{info}\n"))?;
    on_ready(&url);
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let app = router(AppState {
        shared,
        token,
        hold,
        stopping,
    });
    let shutdown = async move {
        shutdown.await;
        let _ = stop.send(true);
    };
    let result = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await;
    let _ = std::fs::remove_file(state.server_file());
    running.stop();
    result.map_err(ServeError::Io)
}
