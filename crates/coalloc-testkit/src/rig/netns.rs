//! A topology of scripts/netns/sites.sh of a test's own (its prefix, network and state
//! file, so that it never meets another test's or the agent rig's): up when made, down
//! (exactly what it made, processes inside killed) when dropped. Where namespaces cannot be
//! made (not root, no iproute2, or `NO_AGENTS=1`) it is not made and the test skips, saying
//! so, unless `COALLOC_REQUIRE_AGENTS` is set (scripts/test.sh, where they can be): then it
//! fails.

use std::os::fd::AsRawFd;
use std::process::{Command, Output, Stdio};

/// The namespaces `PREFIX-site1..N` on the bridge `PREFIX-wan` (`NET.0.1`); site I is at
/// `NET.0.(10+I)`.
pub struct Topology {
    prefix: String,
    net: String,
    state: String,
}

impl Topology {
    /// `sites.sh up N ARGS` with `prefix` and `net` (its first two octets); `None` (skipped,
    /// said so for `test`) where namespaces cannot be made.
    pub fn up(test: &str, prefix: &str, net: &str, n: u32, args: &[&str]) -> Option<Topology> {
        if std::env::var("NO_AGENTS").is_ok_and(|v| v == "1") {
            eprintln!("{test}: skipped (NO_AGENTS=1: no network namespaces)");
            return None;
        }
        let probe = format!("{prefix}-probe{}", std::process::id());
        let made = Command::new("ip")
            .args(["netns", "add", &probe])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !made {
            assert!(
                std::env::var_os("COALLOC_REQUIRE_AGENTS").is_none(),
                "{test}: COALLOC_REQUIRE_AGENTS is set but `ip netns add` fails (root is needed)"
            );
            eprintln!("{test}: skipped (network namespaces cannot be made here: root and iproute2 are needed)");
            return None;
        }
        let _ = Command::new("ip").args(["netns", "del", &probe]).status();
        let t = Topology {
            prefix: prefix.into(),
            net: net.into(),
            state: format!("/run/{prefix}-test.list"),
        };
        // What a killed earlier run left, first.
        let _ = t.sites_sh(&["down"]);
        let out = t.sites_sh(&[&["up", &n.to_string()], args].concat());
        assert!(
            out.status.success(),
            "sites.sh up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(t)
    }

    fn sites_sh(&self, args: &[&str]) -> Output {
        Command::new("bash")
            .arg(crate::repo().join("scripts/netns/sites.sh"))
            .args(args)
            .env("CA_SITES_PREFIX", &self.prefix)
            .env("CA_SITES_NET", &self.net)
            .env("CA_SITES_STATE", &self.state)
            .output()
            .unwrap()
    }

    /// Site `i`'s namespace.
    pub fn netns(&self, i: u32) -> String {
        format!("{}-site{i}", self.prefix)
    }

    /// Site `i`'s address on the bridge.
    pub fn addr(&self, i: u32) -> String {
        format!("{}.0.{}", self.net, 10 + i)
    }

    /// Site `i`'s link (its veth's end on the bridge), down or up.
    pub fn link(&self, i: u32, up: bool) {
        let dev = format!("{}-s{i}-h", self.prefix);
        let st = Command::new("ip")
            .args(["link", "set", &dev, if up { "up" } else { "down" }])
            .status()
            .unwrap();
        assert!(st.success(), "ip link set {dev}");
    }

    /// Change site `i`'s rate, both directions.
    pub fn rate(&self, i: u32, rate: &str) {
        let tbf = [
            "root", "tbf", "rate", rate, "burst", "64kb", "latency", "200ms",
        ];
        let host = format!("{}-s{i}-h", self.prefix);
        let st = Command::new("tc")
            .args(["qdisc", "change", "dev", &host])
            .args(tbf)
            .status()
            .unwrap();
        assert!(st.success(), "tc qdisc change {rate}");
        let (ns, dev) = (self.netns(i), format!("{}-s{i}-n", self.prefix));
        let st = Command::new("ip")
            .args(["netns", "exec", &ns, "tc", "qdisc", "change", "dev", &dev])
            .args(tbf)
            .status()
            .unwrap();
        assert!(st.success(), "tc qdisc change {rate}");
    }

    /// Move the calling thread into site `i`'s namespace: its connections, and the
    /// processes and threads it starts from then on, are that site's (a namespace is a
    /// thread's, and what a thread starts inherits it).
    pub fn enter(&self, i: u32) {
        let ns = self.netns(i);
        let f = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
        // SAFETY: setns on a file descriptor this function owns; it changes the calling
        // thread's network namespace only.
        let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {ns}: {}", std::io::Error::last_os_error());
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let out = self.sites_sh(&["down"]);
        if !out.status.success() {
            eprintln!("sites.sh down: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}
