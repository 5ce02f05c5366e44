//! On-Demand provisioning (seed 004 §III-B) driven event by event through the scheduler:
//! leases to meet queued demand, releases of idle VMs (free clouds after the idle time, paid
//! clouds near the end of a paid hour), the minimum, failed leases, the bill, TAGS-sets over
//! clusters and clouds, and static clouds.

mod common;

use coalloc_core::model::*;
use coalloc_core::provisioning::{Bill, OnDemandParams, Provisioning};
use coalloc_core::queue::koala_c::KoalaCParams;
use coalloc_core::queue::tags::TagsSetsParams;
use coalloc_core::scheduler::*;
use common::{drain, job_starts as starts};
use std::collections::BTreeMap;

const M: Millis = MINUTE;

fn job(count: u32) -> Job {
    Job::new(
        JobKind::Total,
        vec![Component {
            count,
            ..Component::default()
        }],
    )
}

fn cloud(name: &str, min: u32, max: u32, price_micros: u64) -> Site {
    let limits = CloudLimits {
        vm_processors: 1,
        min_vms: min,
        max_vms: max,
        lease_latency: 0,
        price_micros_per_vm_hour: price_micros,
    };
    Site::cloud(name, limits)
}

struct H {
    s: Scheduler,
    launches: BTreeMap<JobId, LaunchId>,
}

impl H {
    fn new(queue: QueueConfig, sites: Vec<Site>, idle_time: Millis) -> H {
        let config = SchedulerConfig {
            queue,
            provisioning: Provisioning::OnDemand(OnDemandParams {
                idle_time,
                ..OnDemandParams::default()
            }),
            ..SchedulerConfig::default()
        };
        H {
            s: Scheduler::new(config, sites),
            launches: BTreeMap::new(),
        }
    }

    fn ff(sites: Vec<Site>, idle_time: Millis) -> H {
        H::new(QueueConfig::Ff(KoalaCParams::default()), sites, idle_time)
    }

    fn at(&mut self, t: Time, e: Event) -> Vec<Command> {
        self.s.handle(t, e).expect("event accepted");
        let cmds: Vec<Command> = drain(&mut self.s);
        for c in &cmds {
            if let Command::StartComponent(s) = c {
                self.launches.insert(s.job, s.launch);
            }
        }
        cmds
    }

    fn submit(&mut self, t: Time, count: u32) -> (JobId, Vec<Command>) {
        let id = match self.s.handle(t, Event::Submit(Box::new(job(count)))) {
            Ok(Reply::Submitted(id)) => id,
            other => panic!("{other:?}"),
        };
        (id, self.at(t, Event::Tick))
    }

    /// The job's component starts and commits at `t`.
    fn run(&mut self, t: Time, id: JobId) {
        let launch = self.launches[&id];
        self.at(t, Event::ComponentStarted { launch });
        let out = self.at(t, Event::ComponentReady { launch });
        assert!(out
            .iter()
            .any(|c| matches!(c, Command::ReleaseBarrier { job } if *job == id)));
    }

    fn finish(&mut self, t: Time, id: JobId) -> Vec<Command> {
        let launch = self.launches[&id];
        self.at(t, Event::ComponentFinished { launch })
    }
}

fn leases(cmds: &[Command]) -> Vec<(SiteId, VmId)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::LeaseVm { site, vm } => Some((*site, *vm)),
            _ => None,
        })
        .collect()
}

fn releases(cmds: &[Command]) -> Vec<(SiteId, VmId)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::ReleaseVm { site, vm } => Some((*site, *vm)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_job_that_fits_nowhere_leases_what_it_needs_and_starts_when_the_vms_run() {
    // A 4-processor cluster and a paid cloud of up to 8 one-processor VMs.
    let mut h = H::ff(
        vec![Site::cluster("c", 4), cloud("ec2", 0, 8, 65_000)],
        5 * M,
    );
    assert_eq!(
        h.s.site_state(1).unwrap().processors,
        0,
        "a cloud starts empty"
    );
    let (a, out) = h.submit(0, 4);
    assert_eq!(starts(&out), [(a, 0)]);
    assert!(leases(&out).is_empty(), "the cluster holds the first job");
    let (b, out) = h.submit(0, 3);
    assert_eq!(leases(&out), [(1, VmId(1)), (1, VmId(2)), (1, VmId(3))]);
    assert!(starts(&out).is_empty(), "not before the VMs run");
    h.at(2 * M, Event::VmLeased { vm: VmId(1) });
    h.at(2 * M, Event::VmLeased { vm: VmId(2) });
    let out = h.at(2 * M, Event::VmLeased { vm: VmId(3) });
    assert_eq!(starts(&out), [(b, 1)]);
    assert_eq!(h.s.site_state(1).unwrap().processors, 3);
    // A job submitted while VMs are on their way counts them and leases no more.
    let (_, out) = h.submit(3 * M, 2);
    assert_eq!(leases(&out), [(1, VmId(4)), (1, VmId(5))]);
    let (_, out) = h.submit(3 * M, 1);
    assert_eq!(leases(&out), [(1, VmId(6))]);
    // Bigger than what may still be leased (2 VMs): no lease.
    let (_, out) = h.submit(3 * M, 3);
    assert!(leases(&out).is_empty());
}

#[test]
fn an_idle_paid_vm_is_kept_until_the_end_of_its_paid_hour() {
    let mut h = H::ff(vec![cloud("ec2", 0, 4, 65_000)], 5 * M);
    let (a, out) = h.submit(0, 1);
    assert_eq!(leases(&out), [(0, VmId(1))]);
    h.at(0, Event::VmLeased { vm: VmId(1) });
    h.run(0, a);
    let out = h.finish(10 * M, a);
    assert!(
        releases(&out).is_empty(),
        "idle, but 50 minutes are paid for"
    );
    assert_eq!(h.s.next_wakeup(), Some(59 * M));
    let out = h.at(50 * M, Event::Tick);
    assert!(releases(&out).is_empty(), "kept at t = 50 min");
    let out = h.at(59 * M, Event::Tick);
    assert_eq!(releases(&out), [(0, VmId(1))], "released at t = 59 min");
    assert_eq!(h.s.site_state(0).unwrap().processors, 0);
    h.at(59 * M, Event::VmReleased { vm: VmId(1) });
    assert_eq!(h.s.bills(59 * M), [Bill::of(1, 65_000)]);
    assert_eq!(h.s.next_wakeup(), None);
}

#[test]
fn a_paid_vm_busy_past_an_hour_goes_near_the_end_of_its_second_hour() {
    let mut h = H::ff(vec![cloud("ec2", 0, 4, 65_000)], 5 * M);
    let (a, _) = h.submit(0, 1);
    h.at(0, Event::VmLeased { vm: VmId(1) });
    h.run(0, a);
    assert!(releases(&h.at(59 * M, Event::Tick)).is_empty(), "busy");
    h.finish(70 * M, a);
    assert_eq!(h.s.next_wakeup(), Some(119 * M));
    assert_eq!(releases(&h.at(119 * M, Event::Tick)), [(0, VmId(1))]);
    h.at(2 * HOUR, Event::VmReleased { vm: VmId(1) });
    // Leased at 0, gone at 2 h exactly: two hours.
    assert_eq!(h.s.bills(3 * HOUR)[0], Bill::of(2, 65_000));
}

#[test]
fn an_idle_paid_vm_is_kept_for_a_queued_job_that_wants_it() {
    // FF's FCFS queue: the head (2 processors) waits for the cluster; the job behind it
    // (1 processor) fits on the idle VM but may not pass the head.
    let mut h = H::ff(
        vec![Site::cluster("c", 2), cloud("ec2", 0, 1, 65_000)],
        5 * M,
    );
    let (a, _) = h.submit(0, 1);
    let (b, out) = h.submit(0, 1);
    assert_eq!(starts(&out), [(b, 0)]);
    let (c, out) = h.submit(0, 1);
    assert_eq!(leases(&out), [(1, VmId(1))]);
    h.at(0, Event::VmLeased { vm: VmId(1) });
    let _ = (a, c);
    // Now the cloud's one VM runs job c.
    h.run(0, c);
    h.finish(5 * M, c);
    let (_, out) = h.submit(6 * M, 2); // the head: waits for the cluster
    assert!(
        leases(&out).is_empty(),
        "2 processors fit on no cloud (max 1 VM)"
    );
    let (_, out) = h.submit(6 * M, 1); // behind it; wants the idle VM
    assert!(starts(&out).is_empty());
    assert!(
        releases(&h.at(59 * M, Event::Tick)).is_empty(),
        "a queued job wants it"
    );
}

#[test]
fn an_idle_free_vm_is_released_after_the_idle_time() {
    let mut h = H::ff(vec![cloud("one", 0, 4, 0)], 10 * M);
    let (a, out) = h.submit(0, 2);
    assert_eq!(leases(&out).len(), 2);
    h.at(M, Event::VmLeased { vm: VmId(1) });
    h.at(M, Event::VmLeased { vm: VmId(2) });
    h.run(M, a);
    h.finish(20 * M, a);
    assert_eq!(h.s.next_wakeup(), Some(30 * M));
    assert!(releases(&h.at(29 * M, Event::Tick)).is_empty());
    let out = h.at(30 * M, Event::Tick);
    assert_eq!(releases(&out), [(0, VmId(1)), (0, VmId(2))]);
    h.at(30 * M, Event::VmReleased { vm: VmId(1) });
    h.at(30 * M, Event::VmReleased { vm: VmId(2) });
    assert_eq!(
        h.s.bills(30 * M),
        [Bill::of(2, 0)],
        "free: two VM-hours, nothing to pay"
    );
}

#[test]
fn the_minimum_is_leased_at_once_and_never_released() {
    let mut h = H::ff(vec![cloud("one", 2, 4, 0)], M);
    let out = h.at(0, Event::Tick);
    assert_eq!(leases(&out), [(0, VmId(1)), (0, VmId(2))]);
    h.at(0, Event::VmLeased { vm: VmId(1) });
    h.at(0, Event::VmLeased { vm: VmId(2) });
    let (a, out) = h.submit(0, 3);
    assert_eq!(leases(&out), [(0, VmId(3))]);
    h.at(M, Event::VmLeased { vm: VmId(3) });
    h.run(M, a);
    h.finish(10 * M, a);
    let out = h.at(11 * M, Event::Tick);
    assert_eq!(releases(&out).len(), 1, "down to the minimum of 2");
    assert_eq!(h.s.cloud(0).unwrap().live(), 2);
    assert!(releases(&h.at(HOUR, Event::Tick)).is_empty());
}

#[test]
fn a_failed_lease_is_retried_after_the_wait() {
    let mut h = H::ff(vec![cloud("ec2", 0, 4, 65_000)], 5 * M);
    let (_, out) = h.submit(0, 1);
    assert_eq!(leases(&out), [(0, VmId(1))]);
    let out = h.at(
        30_000,
        Event::LeaseFailed {
            vm: VmId(1),
            reason: "quota".into(),
        },
    );
    assert!(leases(&out).is_empty(), "not during the wait");
    assert_eq!(h.s.next_wakeup(), Some(90_000));
    let out = h.at(90_000, Event::Tick);
    assert_eq!(leases(&out), [(0, VmId(2))]);
    assert_eq!(h.s.cloud(0).unwrap().lease_failures, 1);
    assert!(h.s.handle(0, Event::VmLeased { vm: VmId(9) }).is_err());
}

#[test]
fn tags_sets_leases_for_a_job_only_on_the_sites_of_its_set() {
    // Set 1: the cluster, a free and a paid cloud; set 2: the paid cloud only. A job killed
    // at set 1's limit needs the paid cloud even though the free cloud is idle.
    let queue = QueueConfig::TagsSets(TagsSetsParams {
        sets: vec![vec![0, 1, 2], vec![2]],
        limits: vec![10 * M],
        period: None,
    });
    let mut h = H::new(
        queue,
        vec![
            Site::cluster("c", 2),
            cloud("one", 2, 2, 0),
            cloud("ec2", 0, 2, 65_000),
        ],
        HOUR,
    );
    h.at(0, Event::Tick);
    h.at(0, Event::VmLeased { vm: VmId(1) });
    h.at(0, Event::VmLeased { vm: VmId(2) });
    let (a, out) = h.submit(0, 2);
    assert_eq!(starts(&out), [(a, 0)]);
    h.run(0, a);
    let out = h.at(10 * M, Event::Tick); // killed at the limit: to set 2
    assert!(out
        .iter()
        .any(|c| matches!(c, Command::CancelComponent { job, .. } if *job == a)));
    assert_eq!(leases(&out), [(2, VmId(3)), (2, VmId(4))]);
    h.at(12 * M, Event::VmLeased { vm: VmId(3) });
    let out = h.at(12 * M, Event::VmLeased { vm: VmId(4) });
    assert_eq!(starts(&out), [(a, 2)]);
}

#[test]
fn static_clouds_are_fixed_pools_without_commands() {
    let config = SchedulerConfig {
        queue: QueueConfig::Ff(KoalaCParams::default()),
        provisioning: Provisioning::Static,
        ..SchedulerConfig::default()
    };
    let mut s = Scheduler::new(config, vec![cloud("ec2", 0, 4, 65_000)]);
    s.handle(0, Event::Submit(Box::new(job(4)))).unwrap();
    let cmds: Vec<Command> = std::iter::from_fn(|| s.poll_command()).collect();
    assert!(matches!(cmds[0], Command::StartComponent(_)));
    assert!(leases(&cmds).is_empty());
    assert!(s.cloud(0).is_none());
    assert_eq!(s.bills(HOUR), [Bill::default()]);
}

#[test]
fn provisioning_is_read_from_the_scheduler_table() {
    let text = r#"
[[site]]
name = "c1"
processors = 32
[[site]]
name = "private"
cloud = { vm_processors = 1, min_vms = 8, max_vms = 64 }
[[site]]
name = "public"
cloud = { vm_processors = 1, max_vms = 128, lease_latency = "2m", price_per_vm_hour = 0.065 }

[scheduler]
policy = "tags-sets"
provisioning = "on-demand"
[scheduler.on_demand]
idle_time = "10m"
release_margin = "2m"
[scheduler.subsystems]
all = ["c1", "private", "public"]
long = ["private", "public"]
[scheduler.tags]
sets = ["all", "long"]
limits = ["40m"]
"#;
    let (sites, config) = coalloc_core::spec::scheduler::parse_config(text).unwrap();
    assert_eq!(
        sites[2].cloud.as_ref().unwrap().price_micros_per_vm_hour,
        65_000
    );
    assert_eq!(
        config.provisioning,
        Provisioning::OnDemand(OnDemandParams {
            idle_time: 10 * M,
            release_margin: 2 * M,
            lease_retry: M,
        })
    );
    assert_eq!(config.subsystems.len(), 2);
    assert_eq!(config.subsystems[1].name, "long");
    assert_eq!(config.subsystems[1].sites, [1, 2]);
    match &config.queue {
        QueueConfig::TagsSets(p) => assert_eq!(p.sets, [vec![0, 1, 2], vec![1, 2]]),
        other => panic!("{other:?}"),
    }
    let err = |extra: &str| {
        coalloc_core::spec::scheduler::parse_config(&format!(
            "[[site]]\nname = \"a\"\nprocessors = 1\n[scheduler]\n{extra}"
        ))
        .unwrap_err()
        .to_string()
    };
    assert!(err("provisioning = \"lazy\"").contains("unknown provisioning policy `lazy`"));
    assert!(err("[scheduler.on_demand]\nrelease_margin = \"1h\"").contains("release_margin"));
    assert!(err("[scheduler.subsystems]\nx = [\"b\"]").contains("names site `b`"));
    assert!(
        err("policy = \"tags-sets\"\n[scheduler.tags]\nsets = [\"x\"]")
            .contains("names subsystem `x`")
    );
}
