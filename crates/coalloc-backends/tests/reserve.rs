//! Advance reservations (issue 31) against the real rigs: a Slurm cluster of scripts/slurm/
//! (`COALLOC_SLURM_RIG`) and a Grid Engine cell of scripts/gridengine/ (`COALLOC_GE_RIG`);
//! each test is skipped, with a line on stderr, without its rig.
//!
//! ```sh
//! scripts/slurm/up.sh /tmp/coalloc-slurm; scripts/gridengine/up.sh /tmp/coalloc-ge
//! COALLOC_SLURM_RIG=/tmp/coalloc-slurm COALLOC_GE_RIG=/tmp/coalloc-ge \
//!     cargo test -p coalloc-backends --test reserve
//! ```
//!
//! One scenario for both managers ([`cycle`]): with another user's job holding some
//! processors, the earliest start of a small reservation is the asked one; the reservation
//! is made and listed under coalloc's name only; a second one that would need the reserved
//! processors is refused with the reason, and its earliest start is the first one's end; a
//! component submitted into the first waits and starts within 3 s of the start (never
//! before; the sites' default `start_delay`); unreserving leaves nothing at the site. Each test holds its cluster alone
//! ([`QUIET`] for writing).

use coalloc_backends::gridengine::GridEngineCell;
use coalloc_backends::slurm::{Launch, SlurmCluster, SlurmConfig};
use coalloc_backends::{Backend, BackendError, RemoteState, NOT_RESERVING};
use coalloc_testkit::backend::{out_dir, request, until_final, QUIET};
use coalloc_testkit::rig::gridengine::GeRig;
use coalloc_testkit::rig::slurm::Rig;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// What the scenario needs of a site besides its backend.
struct Site<'a> {
    backend: &'a dyn Backend,
    /// Its processors.
    total: u32,
    /// Another user's job holding `other` processors with no time limit; returns its id.
    foreign: &'a dyn Fn(u32) -> String,
    cancel: &'a dyn Fn(&str),
    /// What the manager itself lists of its reservations (`scontrol show reservation`,
    /// `qrstat`).
    listing: &'a dyn Fn() -> String,
    /// The tag the backend adds to names at the site.
    tag: &'a str,
    /// The same site as another coalloc server sees it (another tag).
    stranger: &'a dyn Backend,
}

fn cycle(site: &Site, dir: &std::path::Path) {
    let b = site.backend;
    assert!(b.may_reserve());
    for name in b.reservations().unwrap() {
        b.unreserve(&name).unwrap();
    }
    let other = 8;
    let _left = Cleanup {
        site,
        foreign: (site.foreign)(other),
    };
    let free = site.total - other;

    // Free now: the earliest start is the one asked for, to the second.
    let asked = now_ms() + 15_000;
    let start = b.reserve_earliest(4, 60_000, asked).unwrap();
    assert_eq!(start, (asked + 999) / 1000 * 1000);
    let name = "coalloc-J7-c0-1";
    b.reserve(name, 4, start, 60_000).unwrap();
    assert_eq!(b.reservations().unwrap(), [name]);
    let shown = (site.listing)();
    assert!(shown.contains(&format!("{name}-{}", site.tag)), "{shown}");
    // Another server's reservation of the same core name is its own, not listed here.
    site.stranger
        .reserve(name, 1, start + 3_600_000, 60_000)
        .unwrap();
    assert_eq!(b.reservations().unwrap(), [name]);
    assert_eq!(site.stranger.reservations().unwrap(), [name]);
    site.stranger.unreserve(name).unwrap();
    assert_eq!(site.stranger.reservations().unwrap(), Vec::<String>::new());

    // The rest of the free processors plus one: refused for that window, with the reason;
    // possible from the first reservation's end.
    let e = b.reserve("coalloc-J8-c0-1", free - 4 + 1, start, 60_000);
    let Err(BackendError::Rejected(reason)) = e else {
        panic!("{e:?}")
    };
    assert!(
        reason.contains("busy") || reason.contains("no suitable queues"),
        "{reason}"
    );
    assert_eq!(
        b.reserve_earliest(free - 4 + 1, 10_000, start).unwrap(),
        start + 60_000
    );
    assert_eq!(b.reservations().unwrap(), [name], "no probe left behind");

    // A component in the reservation: queued until the start, then runs (for a second, so
    // that the 50 ms poll sees it running: a bare `date` could end between two polls).
    let mut r = request(dir, 1, 4, 1, "/bin/sh", &["-c", "date +%s%N; sleep 1"]);
    r.reservation = Some(name.to_owned());
    r.wall_time_ms = Some(30_000);
    let id = b.submit(&r).unwrap();
    let ahead = start - now_ms();
    assert!(
        ahead > 1_000,
        "submitted {ahead} ms before the start: too late to see it wait"
    );
    let seen = until_final(b, &id, Duration::from_secs(40));
    assert_eq!(
        seen,
        [
            RemoteState::Queued,
            RemoteState::Running,
            RemoteState::Finished
        ]
    );
    let ran: i64 = std::fs::read_to_string(&r.stdout)
        .unwrap()
        .trim()
        .parse::<i64>()
        .unwrap()
        / 1_000_000;
    // The manager starts it on its next scheduling pass: within the 3 s the server allows
    // Slurm and Grid Engine sites (`start_delay`, coalloc-core's `scheduler::reserve`),
    // whose reservations begin that much before the promised start so that the barrier
    // releases every component at the promised start itself (tests/reserve_rigs.rs of
    // coalloc-cli checks that promise, 2 s, on both managers at once).
    eprintln!("started {} ms after the reservation's start", ran - start);
    assert!(
        (start..=start + 3_000).contains(&ran),
        "started at {ran}, reserved from {start}"
    );

    b.unreserve(name).unwrap();
    b.unreserve(name).unwrap();
    assert_eq!(b.reservations().unwrap(), Vec::<String>::new());
    let shown = (site.listing)();
    assert!(!shown.contains(name), "{shown}");
}

/// What [`cycle`] leaves at the site whatever happens: the foreign job is cancelled and
/// every reservation of either tag deleted, also when an assertion fails.
struct Cleanup<'a, 'b> {
    site: &'a Site<'b>,
    foreign: String,
}

impl Drop for Cleanup<'_, '_> {
    fn drop(&mut self) {
        (self.site.cancel)(&self.foreign);
        for b in [self.site.backend, self.site.stranger] {
            for name in b.reservations().unwrap_or_default() {
                let _ = b.unreserve(&name);
            }
        }
    }
}

fn slurm_cycle(test: &str, i: usize, launch: Launch) {
    let Some(rig) = Rig::get(test) else {
        return;
    };
    let _g = QUIET.write().unwrap_or_else(|e| e.into_inner());
    let tagged = |tag: &str| {
        SlurmCluster::new(SlurmConfig {
            reserve: true,
            name_tag: Some(tag.into()),
            ..rig.launching(i, launch).config().clone()
        })
    };
    let (b, stranger) = (tagged("rsvtest"), tagged("stranger"));
    let total = b.load().unwrap().total;
    cycle(
        &Site {
            backend: &b,
            total,
            foreign: &|cpus| rig.foreign_job(i, &cpus.to_string(), 3600),
            cancel: &|id| {
                rig.slurm(i, "scancel", &[id]);
            },
            listing: &|| rig.slurm(i, "scontrol", &["show", "reservation", "-o"]),
            tag: "rsvtest",
            stranger: &stranger,
        },
        &out_dir(env!("CARGO_TARGET_TMPDIR"), "reserve", test),
    );
}

#[test]
fn slurm_reservation_cycle() {
    slurm_cycle("slurm_reservation_cycle", 1, Launch::Batch);
}

#[test]
fn slurm_reservation_cycle_with_allocations() {
    slurm_cycle(
        "slurm_reservation_cycle_with_allocations",
        0,
        Launch::Allocation,
    );
}

#[test]
fn slurm_a_reservation_with_a_job_in_it_is_deleted_with_the_job() {
    let Some(rig) = Rig::get("slurm_a_reservation_with_a_job_in_it_is_deleted_with_the_job") else {
        return;
    };
    let _g = QUIET.write().unwrap_or_else(|e| e.into_inner());
    let b = SlurmCluster::new(SlurmConfig {
        reserve: true,
        name_tag: Some("rsvinuse".into()),
        ..rig.backend(2).config().clone()
    });
    let dir = out_dir(env!("CARGO_TARGET_TMPDIR"), "reserve", "in-use");
    let start = b.reserve_earliest(2, 60_000, now_ms() + 20_000).unwrap();
    let name = "coalloc-J9-c0-1";
    b.reserve(name, 2, start, 60_000).unwrap();
    let mut r = request(&dir, 9, 2, 1, "/bin/sleep", &["30"]);
    r.reservation = Some(name.to_owned());
    r.wall_time_ms = Some(30_000);
    let id = b.submit(&r).unwrap();
    assert_eq!(
        b.query(std::slice::from_ref(&id)).unwrap(),
        [RemoteState::Queued]
    );
    // Slurm itself refuses: "Requested reservation is in use"; the backend cancels the
    // job waiting in it (coalloc's own: a reservation is deleted once its run is over).
    b.unreserve(name).unwrap();
    assert_eq!(b.reservations().unwrap(), Vec::<String>::new());
    let shown = rig.slurm(2, "scontrol", &["show", "reservation", "-o"]);
    assert!(!shown.contains(name), "{shown}");
    let ended = b.query(&[id]).unwrap();
    assert!(ended.iter().all(RemoteState::is_final), "{ended:?}");
}

#[test]
fn slurm_refusals_say_why() {
    let plain = SlurmCluster::new(SlurmConfig::new("plain"));
    assert!(!plain.may_reserve());
    let e = plain.reserve("coalloc-J1-c0-0", 1, now_ms() + 60_000, 60_000);
    assert!(
        matches!(&e, Err(BackendError::Rejected(m)) if m.contains(NOT_RESERVING)),
        "{e:?}"
    );
    let Some(rig) = Rig::get("slurm_refusals_say_why") else {
        return;
    };
    let _g = QUIET.write().unwrap_or_else(|e| e.into_inner());
    let dir = out_dir(env!("CARGO_TARGET_TMPDIR"), "reserve", "slurm-dead");
    let dead = rig.dead_cluster(&dir, Default::default());
    let dead = SlurmCluster::new(SlurmConfig {
        reserve: true,
        ..dead.config().clone()
    });
    let e = dead.reserve("coalloc-J1-c0-0", 1, now_ms() + 60_000, 60_000);
    assert!(matches!(e, Err(BackendError::Unavailable(_))), "{e:?}");
    assert!(matches!(
        dead.reservations(),
        Err(BackendError::Unavailable(_))
    ));
    let b = SlurmCluster::new(SlurmConfig {
        reserve: true,
        ..rig.backend(0).config().clone()
    });
    // A start in the past, and more processors than the cluster has.
    let e = b.reserve("coalloc-J1-c0-0", 1, now_ms() - 3_600_000, 60_000);
    assert!(
        matches!(&e, Err(BackendError::Rejected(m)) if m.contains("Invalid time")),
        "{e:?}"
    );
    let e = b.reserve_earliest(100_000, 60_000, 0);
    assert!(
        matches!(&e, Err(BackendError::Rejected(m)) if m.contains("never")),
        "{e:?}"
    );
}

fn ge_backend(rig: &GeRig, i: usize) -> GridEngineCell {
    let mut c = rig.backend(i).config().clone();
    c.reserve = true;
    GridEngineCell::new(c)
}

fn ge_stranger(rig: &GeRig, i: usize) -> GridEngineCell {
    let mut c = ge_backend(rig, i).config().clone();
    c.name_tag = Some("stranger".into());
    GridEngineCell::new(c)
}

#[test]
fn grid_engine_reservation_cycle() {
    let Some(rig) = GeRig::get("grid_engine_reservation_cycle") else {
        return;
    };
    let _g = QUIET.write().unwrap_or_else(|e| e.into_inner());
    let i = 0;
    let (b, stranger) = (ge_backend(&rig, i), ge_stranger(&rig, i));
    let total = b.load().unwrap().total;
    cycle(
        &Site {
            backend: &b,
            total,
            foreign: &|slots| rig.foreign_job(i, slots, 3600),
            cancel: &|id| {
                rig.ge(i, "qdel", &[id]);
            },
            listing: &|| rig.ge(i, "qrstat", &["-u", "*", "-xml"]),
            tag: "test",
            stranger: &stranger,
        },
        &out_dir(env!("CARGO_TARGET_TMPDIR"), "reserve", "ge"),
    );
}

#[test]
fn grid_engine_refusals_say_why() {
    let Some(rig) = GeRig::get("grid_engine_refusals_say_why") else {
        return;
    };
    let _g = QUIET.write().unwrap_or_else(|e| e.into_inner());
    let plain = rig.backend(1);
    assert!(!plain.may_reserve());
    let e = plain.reserve_earliest(1, 60_000, 0);
    assert!(
        matches!(&e, Err(BackendError::Rejected(m)) if m.contains(NOT_RESERVING)),
        "{e:?}"
    );
    let b = ge_backend(&rig, 1);
    let e = b.reserve("coalloc-J1-c0-0", 1, now_ms() - 3_600_000, 60_000);
    assert!(
        matches!(&e, Err(BackendError::Rejected(m)) if m.contains("in the past")),
        "{e:?}"
    );
    let e = b.reserve_earliest(100_000, 60_000, 0);
    assert!(
        matches!(&e, Err(BackendError::Rejected(m)) if m.contains("never")),
        "{e:?}"
    );
    // A name in use is refused (Grid Engine itself would make a second one).
    let start = now_ms() + 600_000;
    b.reserve("coalloc-J2-c0-0", 1, start, 60_000).unwrap();
    let e = b.reserve("coalloc-J2-c0-0", 1, start, 60_000);
    assert!(
        matches!(&e, Err(BackendError::Rejected(m)) if m.contains("exists")),
        "{e:?}"
    );
    b.unreserve("coalloc-J2-c0-0").unwrap();
    assert_eq!(b.reservations().unwrap(), Vec::<String>::new());
    // A qmaster where none listens: unavailable, not rejected.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut c = b.config().clone();
    c.qmaster_port = Some(free);
    c.command_timeout = Duration::from_secs(2);
    let dead = GridEngineCell::new(c);
    let e = dead.reserve("coalloc-J3-c0-0", 1, start, 60_000);
    assert!(matches!(e, Err(BackendError::Unavailable(_))), "{e:?}");
    assert!(matches!(
        dead.reservations(),
        Err(BackendError::Unavailable(_))
    ));
}
