//! Fuzz what `POST /v1/jobs` does with a body before it answers: the job parsed in the format
//! the request names (the first byte picks JSON, TOML, RSL or `.uno`, as the `format` query
//! or the Content-Type does), then submitted to a scheduler with the server's configuration
//! (`SchedulerConfig::served`) and three clusters, and run to its end with every launch
//! starting, checking in and finishing at once. Any body gives a refusal or a job that ends,
//! never a panic.
#![no_main]
use coalloc_core::model::Site;
use coalloc_core::scheduler::{Command, Event, Scheduler, SchedulerConfig};
use coalloc_core::spec::{parse_job, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let format = [Format::Json, Format::Toml, Format::Rsl, Format::Uno][usize::from(pick % 4)];
    let Ok(job) = parse_job(text, format) else {
        return;
    };
    let sites = vec![
        Site::cluster("alpha", 16),
        Site::cluster("beta", 16),
        Site::cluster("gamma", 16),
    ];
    let mut s = Scheduler::new(SchedulerConfig::served(), sites);
    let mut now = 0;
    if s.handle(now, Event::Submit(Box::new(job))).is_err() {
        return;
    }
    // Launches started and not yet finished or cancelled, with their job.
    let mut running = Vec::new();
    for _ in 0..64 {
        let mut events = Vec::new();
        while let Some(c) = s.poll_command() {
            match c {
                Command::StartComponent(st) => {
                    running.push((st.job, st.launch));
                    events.push(Event::ComponentStarted { launch: st.launch });
                    events.push(Event::ComponentReady { launch: st.launch });
                }
                Command::CancelComponent { launch, .. } => running.retain(|r| r.1 != launch),
                Command::ReleaseBarrier { job } => {
                    for (_, launch) in running.iter().filter(|r| r.0 == job) {
                        events.push(Event::ComponentFinished { launch: *launch });
                    }
                    running.retain(|r| r.0 != job);
                }
                Command::StartTransfer { transfer, .. } => {
                    events.push(Event::TransferDone { transfer, ok: true })
                }
                _ => {}
            }
        }
        if events.is_empty() {
            match s.next_wakeup() {
                Some(t) if t > now => {
                    now = t;
                    let _ = s.handle(now, Event::Tick);
                }
                _ => return,
            }
        }
        for e in events {
            let _ = s.handle(now, e);
        }
    }
});
