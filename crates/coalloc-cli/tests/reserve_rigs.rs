//! Reserve claiming against real resource managers (issue 31, "Show it"): `coalloc serve`
//! on two Slurm clusters of scripts/slurm/ and a Grid Engine cell of scripts/gridengine/,
//! each running another user's job, with a 3-component job submitted with
//! `coalloc submit --reserve --start`. Skipped, with a line on stderr, unless both rigs are
//! up (`COALLOC_SLURM_RIG`, `COALLOC_GE_RIG`).
//!
//! ```sh
//! scripts/slurm/up.sh /tmp/coalloc-slurm; scripts/gridengine/up.sh /tmp/coalloc-ge
//! COALLOC_SLURM_RIG=/tmp/coalloc-slurm COALLOC_GE_RIG=/tmp/coalloc-ge \
//!     cargo test -p coalloc-cli --test reserve_rigs
//! ```
//!
//! Each component writes two lines to a shared file: when its manager started its process
//! (before the barrier) and when its program began (after the barrier released it). The
//! promise checked: every program begins within 2 s of the promised start, on every site,
//! once; every process was started by its manager inside its reservation (which begins the
//! site's `start_delay` before the promised start, `scheduler::reserve::start_delay`).
//! What the managers hold afterwards is read from the managers themselves
//! (`scontrol show reservation`, `qrstat`).

mod common;

use coalloc_testkit::rig::gridengine::GeScenario;
use coalloc_testkit::rig::slurm::Scenario;
use coalloc_testkit::rig::SERVER;
use coalloc_testkit::server::{barrier_component, Server};
use common::COALLOC;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The Slurm sites' and the Grid Engine site's default `start_delay` (3 s).
const DELAY: i64 = 3_000;

fn now_ms() -> i64 {
    coalloc_server::driver::wall_ms()
}

/// Both rigs, each locked for this test; `None` (skipped) without either.
struct Rigs {
    slurm: Scenario,
    ge: GeScenario,
}

impl Rigs {
    fn begin(test: &str) -> Option<Rigs> {
        let ge = GeScenario::begin(test)?;
        let slurm = Scenario::begin(test)?;
        Some(Rigs { slurm, ge })
    }

    /// The site names: Slurm clusters 0 and 1, Grid Engine cell 0.
    fn names(&self) -> [String; 3] {
        [
            self.slurm.rig.name(0).to_owned(),
            self.slurm.rig.name(1).to_owned(),
            self.ge.rig.cells[0].name.clone(),
        ]
    }

    /// A server configuration: the three sites, each allowed to reserve, the second Slurm
    /// cluster with `beta_extra` manager keys; failed tries wait 10 minutes (so that a
    /// rolled-back job does not reserve again while a test looks).
    fn config(&self, beta_extra: &str) -> String {
        let reserving = |site: String, extra: &str| {
            site.replacen(" }\n", &format!(", reserve = true{extra} }}\n"), 1)
        };
        format!(
            "{SERVER}{}{}{}[scheduler]\npolicy = \"fcfs\"\nfit = \"worst\"\nretry_backoff = \"10m\"\n",
            reserving(self.slurm.rig.site(0, "batch"), ""),
            reserving(self.slurm.rig.site(1, "batch"), beta_extra),
            self.ge.rig.site(0, ", reserve = true"),
        )
    }

    /// Other users' jobs running on every site (cancelled when the scenarios end).
    fn other_users(&self) {
        self.slurm.rig.foreign_job(0, "8", 3600);
        self.slurm.rig.foreign_job(1, "8", 3600);
        self.ge.rig.foreign_job(0, 2, 3600);
    }

    /// Every reservation of job `id` the three managers list now.
    fn held_of(&self, id: u64) -> Vec<String> {
        let mine = format!("coalloc-J{id}-");
        let slurm = (0..2).flat_map(|i| {
            let shown = self
                .slurm
                .rig
                .slurm(i, "scontrol", &["show", "reservation", "-o"]);
            shown
                .lines()
                .filter(|l| l.contains(&mine))
                .map(|l| format!("{}: {l}", self.slurm.rig.name(i)))
                .collect::<Vec<_>>()
        });
        let shown = self.ge.rig.ge(0, "qrstat", &["-u", "*", "-xml"]);
        let ge = shown
            .lines()
            .filter(|l| l.contains(&mine))
            .map(|l| format!("ge: {}", l.trim()));
        slurm.chain(ge).collect()
    }

    /// No manager lists a reservation of job `id`, within 10 s (deletions follow the job's
    /// end on the site workers' threads).
    fn assert_nothing_held(&self, id: u64) {
        let t = Instant::now();
        while !self.held_of(id).is_empty() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(200));
        }
        assert_eq!(self.held_of(id), Vec::<String>::new());
    }
}

/// A 3-component ordered job, one component of 4 processors on each of `sites`, each writing
/// `proc JOB.C MS` when started and `prog JOB.C MS` when the barrier lets it go to `starts`.
fn job_file(dir: &Path, starts: &Path, sites: &[String; 3]) -> PathBuf {
    let line = |what: &str| {
        format!(
            "echo \"{what} $COALLOC_JOB_ID.$COALLOC_COMPONENT $(date +%s%3N)\" >> {};",
            starts.display()
        )
    };
    let comps: Vec<Value> = sites
        .iter()
        .map(|site| {
            let mut c = barrier_component(COALLOC, 4, &line("proc"), &(line("prog") + "sleep 1"));
            c["site"] = json!(site);
            c
        })
        .collect();
    let job = json!({ "kind": "ordered", "max_wall_time": "2m", "component": comps });
    let path = dir.join("job.json");
    std::fs::write(&path, job.to_string()).unwrap();
    path
}

/// Components whose reservation is in `state`.
fn in_state(j: &Value, state: &str) -> usize {
    j["components"].as_array().map_or(0, |c| {
        c.iter().filter(|c| c["reservation_state"] == state).count()
    })
}

/// `(what, JOB.C, ms)` of every line written.
fn starts_of(starts: &Path) -> Vec<(String, String, i64)> {
    std::fs::read_to_string(starts)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].to_owned(), f[1].to_owned(), f[2].parse().unwrap())
        })
        .collect()
}

/// Each component of job `id` started once, inside its reservation, and its program began
/// within 2 s of the promised start `t`.
fn assert_started_together(starts: &Path, id: u64, t: i64) {
    let all = starts_of(starts);
    eprintln!("promised {t}; seen (ms after it): {:?}", {
        all.iter()
            .map(|(w, c, at)| format!("{w} {c} {:+}", at - t))
            .collect::<Vec<_>>()
    });
    for what in ["proc", "prog"] {
        let mut who: Vec<&str> = all
            .iter()
            .filter(|x| x.0 == what)
            .map(|x| x.1.as_str())
            .collect();
        who.sort();
        let want: Vec<String> = (0..3).map(|c| format!("{id}.{c}")).collect();
        assert_eq!(who, want, "each component's {what} once: {all:?}");
    }
    for (what, who, at) in &all {
        let ok = match what.as_str() {
            "proc" => (t - DELAY..=t + 2_000).contains(at),
            _ => (t..=t + 2_000).contains(at),
        };
        assert!(
            ok,
            "{what} of {who} at {at}, promised {t} ({:+} ms)",
            at - t
        );
    }
}

/// `coalloc_reservations_total` by outcome: made, honoured, rolled back.
fn counted(s: &Server) -> [u64; 3] {
    let text = s.metrics();
    ["made", "honoured", "rolled_back"].map(|o| {
        let key = format!("coalloc_reservations_total{{outcome=\"{o}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .map_or(0, |v| v.trim().parse().unwrap())
    })
}

fn dir_of(s: &Server) -> PathBuf {
    s.dir.parent().unwrap().to_path_buf()
}

#[test]
fn a_reserved_job_starts_together_on_two_slurm_clusters_and_a_grid_engine_cell() {
    let Some(rigs) = Rigs::begin("reserve-rigs-start") else {
        return;
    };
    rigs.other_users();
    let s = Server::start(COALLOC, "reserve-rigs-start", &rigs.config(""));
    let starts = dir_of(&s).join("starts.log");
    let file = job_file(&dir_of(&s), &starts, &rigs.names());
    let asked = now_ms() + 20_000;
    let id = s.submit_reserved(&file, "+20s");
    let t = s.promised_start(id, 60);
    assert!(t >= asked - 1_000, "promised {t}, asked for {asked}");
    // Each manager holds its reservation, under the job's names, before the start.
    let held = rigs.held_of(id);
    assert_eq!(held.len(), 3, "{held:?}");
    assert!(now_ms() < t - DELAY, "reserved too late to see the wait");
    let j = s.wait_ended(id, 90);
    assert_eq!(j["state"], "finished", "{j}");
    assert_started_together(&starts, id, t);
    rigs.assert_nothing_held(id);
    assert_eq!(s.cli_ok(&["reservations", "--json"]).trim(), "[]");
    assert_eq!(counted(&s), [3, 3, 0]);
}

/// beta takes reservations only 10 s ahead, so it is asked last, after the others hold
/// theirs; meanwhile `take` makes it refuse. The others are rolled back and no manager lists
/// anything of the job, then or after a cancel; nothing started. `mend` undoes `take` before
/// the managers are read.
fn refused_at_beta(test: &str, why: &str, take: impl Fn(&Rigs), mend: impl Fn(&Rigs)) {
    let Some(rigs) = Rigs::begin(test) else {
        return;
    };
    rigs.other_users();
    let s = Server::start(COALLOC, test, &rigs.config(", reserve_ahead = \"10s\""));
    let starts = dir_of(&s).join("starts.log");
    let file = job_file(&dir_of(&s), &starts, &rigs.names());
    let id = s.submit_reserved(&file, "+25s");
    let j = s.wait_for(id, 30, "reserved on two sites", |j| {
        in_state(j, "made") == 2
    });
    assert_eq!(in_state(&j, "offered"), 1, "{j}");
    assert_eq!(rigs.held_of(id).len(), 2);
    take(&rigs);
    let j = s.wait_for(id, 40, "rolled back", |j| {
        j["last_abort"]
            .as_str()
            .is_some_and(|a| a.contains("refused the reservation"))
    });
    assert!(j["last_abort"].as_str().unwrap().contains(why), "{j}");
    assert_eq!(j["state"], "queued", "{j}");
    mend(&rigs);
    rigs.assert_nothing_held(id);
    assert_eq!(starts_of(&starts), vec![]);
    // The refused site's name is deleted too: an error may be a lost answer to a call
    // that made it (the simulation harness, seed 51), and deleting what is not there is
    // harmless.
    assert_eq!(counted(&s), [2, 0, 3]);
    s.cli_ok(&["cancel", &id.to_string()]);
    rigs.assert_nothing_held(id);
    let t = Instant::now();
    while s.cli_ok(&["reservations", "--json"]).trim() != "[]" {
        assert!(t.elapsed() < Duration::from_secs(10), "still listed");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_site_whose_processors_were_taken_refuses_and_every_manager_is_left_with_nothing() {
    // Other users take every processor beta has left.
    refused_at_beta(
        "reserve-rigs-refused",
        "rejected: beta: scontrol: cannot reserve 4 processors",
        |rigs| {
            let left = rigs.slurm.rig.clusters[1].cpus - 8;
            rigs.slurm.rig.foreign_job(1, &left.to_string(), 3600);
        },
        |_| {},
    );
}

#[test]
fn a_site_whose_manager_is_down_refuses_and_every_manager_is_left_with_nothing() {
    refused_at_beta(
        "reserve-rigs-down",
        "resource manager unavailable: beta",
        |rigs| rigs.slurm.rig.stop_controller(1),
        |rigs| rigs.slurm.rig.restart_missing(1).unwrap(),
    );
}

#[test]
fn kill_9_while_reserving_and_after_commit_leaves_nothing_behind_and_starts_nothing_twice() {
    let Some(rigs) = Rigs::begin("reserve-rigs-kill") else {
        return;
    };
    rigs.other_users();
    let mut s = Server::start(
        COALLOC,
        "reserve-rigs-kill",
        &rigs.config(", reserve_ahead = \"10s\""),
    );
    let starts = dir_of(&s).join("starts.log");
    let file = job_file(&dir_of(&s), &starts, &rigs.names());
    let id = s.submit_reserved(&file, "+30s");
    // Prepared on two sites, the third not yet asked, nothing committed: kill -9.
    s.wait_for(id, 30, "reserved on two sites", |j| {
        in_state(j, "made") == 2
    });
    s.kill_and_restart();
    // The restart keeps both reservations, makes the third at its time and commits.
    let t = s.promised_start(id, 60);
    assert!(now_ms() < t - DELAY, "committed too late to see the wait");
    assert_eq!(rigs.held_of(id).len(), 3);
    // Committed (every component submitted into its reservation, each manager's id known),
    // before the start: kill -9 again.
    s.wait_submitted(id, 30);
    assert!(now_ms() < t - DELAY, "submitted too late to see the wait");
    s.kill_and_restart();
    assert_eq!(s.promised_start(id, 60), t);
    let j = s.wait_ended(id, 90);
    assert_eq!(j["state"], "finished", "{j}");
    assert_started_together(&starts, id, t);
    rigs.assert_nothing_held(id);
    assert_eq!(s.cli_ok(&["reservations", "--json"]).trim(), "[]");
}
