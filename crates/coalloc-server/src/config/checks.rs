//! Configurations the server refuses at startup with the reason: GP where a site cannot
//! preempt its local jobs (seed 001 §2.2), and `run_as_owner` with a site that cannot run a
//! component as another user (issue 20 items 6 and 8).

use super::BackendKind;
use coalloc_core::error::SpecError;
use coalloc_core::model::Site;
use coalloc_core::queue::rpp::GlobalPriority;
use coalloc_core::scheduler::{QueueConfig, SchedulerConfig};

/// GP (RPP with `priority = "gp"`) kills local jobs at a global job's deadline; every site
/// must be able to: a local cluster preempts its other users' load, a Slurm site the jobs
/// of its `preempt_partition` or `preempt_qos`.
pub fn gp_preempts_everywhere(
    scheduler: &SchedulerConfig,
    sites: &[Site],
    backends: &[BackendKind],
) -> Result<(), SpecError> {
    if !matches!(&scheduler.queue, QueueConfig::Rpp(p) if p.priority == GlobalPriority::Gp) {
        return Ok(());
    }
    for (site, b) in sites.iter().zip(backends) {
        let why = match b {
            BackendKind::Local { .. } | BackendKind::Slurm { preempt: Some(_), .. } => continue,
            BackendKind::Slurm { preempt: None, .. } => "a Slurm site needs manager.preempt_partition or manager.preempt_qos (the local jobs GP may requeue or cancel)",
            BackendKind::GridEngine(_) => "a Grid Engine site cannot preempt its local jobs here",
            BackendKind::Agent { .. } => {
                "an agent site cannot preempt its local jobs (the agent link does not carry it)"
            }
        };
        return Err(SpecError::invalid(
            "scheduler.rpp.priority",
            format!(
                "GP kills local jobs at a global job's deadline (seed 001 §2.2), but site `{}` cannot: {why}; use priority = \"lp\"",
                site.name
            ),
        ));
    }
    Ok(())
}

/// `run_as_owner`: a Grid Engine cell cannot (qsub has no option to submit as another user).
pub fn run_as_owner_everywhere(
    on: bool,
    sites: &[Site],
    backends: &[BackendKind],
) -> Result<(), SpecError> {
    let ge = sites
        .iter()
        .zip(backends)
        .find(|(_, b)| matches!(b, BackendKind::GridEngine(_)));
    match ge {
        Some((site, _)) if on => Err(SpecError::invalid(
            "server.run_as_owner",
            format!(
                "site `{}` is a Grid Engine cell: qsub cannot submit as another user, so its components could not run as their owner",
                site.name
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::ServerConfig;

    fn refusal(text: &str) -> String {
        ServerConfig::parse(text)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    }

    const GP: &str = "[scheduler]\npolicy = \"rpp\"\n[scheduler.rpp]\npriority = \"gp\"\n";

    #[test]
    fn gp_is_refused_where_a_site_cannot_preempt_and_taken_where_all_can() {
        let local = "[[site]]\nname = \"a\"\nprocessors = 4\nmanager = { type = \"local\", background = 2 }\n";
        let slurm = |extra: &str| {
            format!("[[site]]\nname = \"s\"\nprocessors = 4\nmanager = {{ type = \"slurm\", slurm_conf = \"/x\"{extra} }}\n")
        };
        let ge = "[[site]]\nname = \"g\"\nprocessors = 4\nmanager = { type = \"gridengine\", settings = \"/ge/settings.sh\" }\n";
        let e = refusal(&format!("{local}{}{GP}", slurm("")));
        assert!(e.starts_with("scheduler.rpp.priority: GP kills local jobs at a global job's deadline (seed 001 §2.2), but site `s` cannot: a Slurm site needs manager.preempt_partition"), "{e}");
        let e = refusal(&format!("{local}{ge}{GP}"));
        assert!(
            e.contains("site `g` cannot: a Grid Engine site cannot preempt"),
            "{e}"
        );
        let e = refusal(&format!("{local}[[site]]\nname = \"r\"\nprocessors = 4\nmanager = {{ type = \"agent\" }}\n[server]\nagent_bind = \"127.0.0.1:0\"\n{GP}"));
        assert!(e.contains("site `r` cannot: an agent site"), "{e}");
        // Every site can: taken, with the Slurm site's preemption settings.
        let c = ServerConfig::parse(&format!(
            "{local}{}{GP}",
            slurm(", preempt_partition = \"local\", preempt_action = \"cancel\"")
        ))
        .unwrap();
        assert!(matches!(
            &c.backends[1],
            crate::config::BackendKind::Slurm { preempt: Some(p), .. }
                if p.partition.as_deref() == Some("local") && !p.requeue
        ));
        // LP kills nothing: any site will do.
        ServerConfig::parse(&format!(
            "{local}{ge}[scheduler]\npolicy = \"rpp\"\n[scheduler.rpp]\npriority = \"lp\"\n"
        ))
        .unwrap();
        let e = refusal(&slurm(", preempt_qos = \"q\", preempt_action = \"kill\""));
        assert!(
            e.contains("unknown action `kill` (known: requeue, cancel)"),
            "{e}"
        );
    }

    #[test]
    fn run_as_owner_is_refused_with_a_grid_engine_site() {
        let ge = "[server]\nrun_as_owner = true\n[[site]]\nname = \"g\"\nprocessors = 4\nmanager = { type = \"gridengine\", settings = \"/ge/settings.sh\" }\n";
        assert!(refusal(ge).starts_with("server.run_as_owner: site `g` is a Grid Engine cell"));
    }
}
