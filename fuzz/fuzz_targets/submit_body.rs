//! Fuzz what `POST /v1/jobs` does with a body before it answers: the job parsed in the format
//! the request names (the first byte picks JSON, TOML, RSL or `.uno`, as the `format` query
//! or the Content-Type does), then submitted to a scheduler with the server's configuration
//! (`SchedulerConfig::served`) and three clusters, and run to its end with every launch
//! starting, checking in and finishing at once. Any body gives a refusal or a job that ends,
//! never a panic.
#![no_main]
use coalloc_core::scheduler::Event;
use coalloc_core::spec::{parse_job, Format};
use libfuzzer_sys::fuzz_target;

mod drive;

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
    let mut s = drive::served();
    if s.handle(0, Event::Submit(Box::new(job))).is_err() {
        return;
    }
    drive::run(&mut s, 0, |s, now, job| {
        let _ = s.handle(now, Event::Commit { job });
    });
});
