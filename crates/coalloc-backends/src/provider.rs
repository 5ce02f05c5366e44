//! Cloud providers: what the server calls to lease and release the VMs of a cloud site when
//! the core's On-Demand policy asks (seed 004 §III-B). The core decides when and how many;
//! a provider only carries a lease or a release out, blocking until it is done, and says
//! which node it got.
//!
//! - [`CommandProvider`]: configured programs, in the manner of Slurm's `ResumeProgram` and
//!   `SuspendProgram`: `LEASE_PROGRAM SITE VM` prints the node it leased (its first
//!   non-empty line of output) and exits 0; `RELEASE_PROGRAM SITE VM NODE` gives it back.
//!   Any other exit, or no answer within the timeout, is a failed lease or release. A lease
//!   that was under way when the server stopped is asked for again after the restart, with
//!   the same VM number: a lease program must treat a number it has seen as the same VM.
//! - [`LocalProvider`]: "leases" extra slots of this machine after the lease latency, so
//!   the whole path runs on one machine (the site's local backend grows by the VM's
//!   processors when the lease is reported).

use crate::BackendError;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Leases and releases one cloud site's VMs.
pub trait Provider: Send + Sync {
    /// Lease VM `vm` (the core's number for it); returns the node's name once it is usable.
    fn lease(&self, vm: u64) -> Result<String, BackendError>;
    /// Give VM `vm`, leased as `node`, back.
    fn release(&self, vm: u64, node: &str) -> Result<(), BackendError>;
}

/// A provider made of two programs (see the module's documentation).
#[derive(Debug, Clone)]
pub struct CommandProvider {
    pub site: String,
    /// Run through `/bin/sh -c`, with the site, the VM and (for a release) the node as
    /// `$1`, `$2`, `$3`; also in `COALLOC_SITE`, `COALLOC_VM`, `COALLOC_NODE`.
    pub lease_program: String,
    pub release_program: String,
    /// The longest a program may run before it is killed and the call fails.
    pub timeout: Duration,
}

impl CommandProvider {
    fn run(&self, program: &str, vm: u64, node: Option<&str>) -> Result<String, BackendError> {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(format!("{program} \"$@\""))
            .arg("coalloc-provider")
            .arg(&self.site)
            .arg(vm.to_string())
            .env("COALLOC_SITE", &self.site)
            .env("COALLOC_VM", vm.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(n) = node {
            cmd.arg(n).env("COALLOC_NODE", n);
        }
        let mut child = cmd.spawn()?;
        let deadline = Instant::now() + self.timeout;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(BackendError::Unavailable(format!(
                    "`{program}` did not answer within {:?}",
                    self.timeout
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        let mut err = String::new();
        if let Some(mut o) = child.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        if !status.success() {
            return Err(BackendError::Unavailable(format!(
                "`{program}` failed ({status}): {}",
                err.trim()
            )));
        }
        Ok(out)
    }
}

impl Provider for CommandProvider {
    fn lease(&self, vm: u64) -> Result<String, BackendError> {
        let out = self.run(&self.lease_program, vm, None)?;
        out.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
            .ok_or_else(|| {
                BackendError::Unavailable(format!("`{}` printed no node name", self.lease_program))
            })
    }

    fn release(&self, vm: u64, node: &str) -> Result<(), BackendError> {
        self.run(&self.release_program, vm, Some(node)).map(|_| ())
    }
}

/// Extra slots of this machine, usable `latency` after they are asked for.
#[derive(Debug, Clone)]
pub struct LocalProvider {
    pub site: String,
    pub latency: Duration,
}

impl Provider for LocalProvider {
    fn lease(&self, vm: u64) -> Result<String, BackendError> {
        std::thread::sleep(self.latency);
        Ok(format!("{}-vm{vm}", self.site))
    }

    fn release(&self, _vm: u64, _node: &str) -> Result<(), BackendError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(lease: &str, release: &str) -> CommandProvider {
        CommandProvider {
            site: "cloud".into(),
            lease_program: lease.into(),
            release_program: release.into(),
            timeout: Duration::from_secs(2),
        }
    }

    #[test]
    fn the_lease_program_names_the_node_and_gets_its_arguments() {
        let p = provider("printf '\\n%s-%s\\n'", "f() { test \"$3\" = node-7; }; f");
        assert_eq!(p.lease(7).unwrap(), "cloud-7");
        p.release(7, "node-7").unwrap();
        assert!(p.release(7, "other").is_err());
    }

    #[test]
    fn a_failing_silent_or_slow_program_is_an_error() {
        let e = provider("echo quota exceeded >&2; exit 3", "true").lease(1);
        assert!(matches!(e, Err(BackendError::Unavailable(m)) if m.contains("quota exceeded")));
        assert!(provider("true", "true").lease(1).is_err());
        let slow = CommandProvider {
            timeout: Duration::from_millis(200),
            ..provider("sleep 5", "true")
        };
        let t = Instant::now();
        assert!(slow.lease(1).is_err());
        assert!(t.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn the_local_provider_waits_the_lease_latency() {
        let p = LocalProvider {
            site: "c".into(),
            latency: Duration::from_millis(100),
        };
        let t = Instant::now();
        assert_eq!(p.lease(3).unwrap(), "c-vm3");
        assert!(t.elapsed() >= Duration::from_millis(100));
    }
}
