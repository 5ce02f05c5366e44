//! Active and standby servers on one PostgreSQL journal (issue 32, item 2): a second
//! `coalloc serve` beside a [`Server`], on its configuration, that waits as a standby until
//! the journal's lease is its own; the signals that kill or freeze a leader; and the restarts
//! of a supervisor (a server that exits when its journal's database is lost).

use super::{unsafe_kill, Server};
use std::time::{Duration, Instant};

impl Server {
    /// A standby of `leader` (whose configuration's journal is a PostgreSQL database):
    /// `coalloc serve` on a copy of that configuration from a state directory of its own
    /// (named after `name`), with the leader's token and the leader's local sites' folder
    /// (`sites`, a symbolic link: the stand-in for sites that both servers' hosts reach).
    /// It is not waited for to lead: its URL is its API's, which answers 503 until it does
    /// ([`Server::wait_leading`]).
    pub fn standby_of(leader: &Server, name: &str) -> Server {
        let config = std::fs::read_to_string(&leader.config).unwrap();
        Server::standby_with(leader, name, &config)
    }

    /// [`Server::standby_of`] on a configuration of its own (another `bind` and
    /// `agent_bind`: another host's addresses).
    pub fn standby_with(leader: &Server, name: &str, config: &str) -> Server {
        let root = std::env::temp_dir().join(format!("coalloc-e2e-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let mut s = Server::new(&leader.bin, &root, leader.env.clone(), false);
        std::fs::write(&s.config, config).unwrap();
        std::fs::create_dir_all(&s.dir).unwrap();
        std::fs::copy(leader.dir.join("token"), s.dir.join("token")).unwrap();
        // The leader's may be a link already (a standby's standby): its target.
        let sites = std::fs::canonicalize(leader.dir.join("sites")).unwrap();
        std::os::unix::fs::symlink(sites, s.dir.join("sites")).unwrap();
        s.launch();
        // The API listens (and its address is written) before the lease is waited for.
        let t = Instant::now();
        loop {
            let address = std::fs::read_to_string(s.dir.join("address")).unwrap_or_default();
            if address.ends_with('\n') {
                s.url = format!("http://{}", address.trim());
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "the standby did not listen: {}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s.token = leader.token.clone();
        s
    }

    /// Wait up to `secs` for a standby to lead (its `server.json`).
    pub fn wait_leading(&mut self, secs: u64) {
        self.wait_served(Duration::from_secs(secs));
    }

    /// Send signal `sig` to the server's process (`libc::SIGSTOP`, `libc::SIGCONT`, ...).
    pub fn signal(&self, sig: i32) {
        unsafe_kill(self.pid().expect("the server runs") as i32, sig);
    }

    /// Wait up to `secs` for the server's process to exit by itself: its exit status, or
    /// `None` if it still runs.
    pub fn wait_exit(&mut self, secs: u64) -> Option<std::process::ExitStatus> {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(secs) {
            if let Ok(Some(status)) = self.child.as_mut()?.try_wait() {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Start the server again each time it has exited, 100 ms later (as a supervisor with
    /// `Restart=always` does), until it serves: how many starts that took. Panics after
    /// `secs`.
    pub fn restart_until_served(&mut self, secs: u64) -> u32 {
        let t = Instant::now();
        let mut starts = 0;
        loop {
            if self.child.is_none() {
                self.launch();
                starts += 1;
            }
            if self.served() {
                return starts;
            }
            if let Ok(Some(_)) = self.child.as_mut().unwrap().try_wait() {
                self.child = None;
                std::thread::sleep(Duration::from_millis(100));
            }
            assert!(
                t.elapsed() < Duration::from_secs(secs),
                "the server did not serve again: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
