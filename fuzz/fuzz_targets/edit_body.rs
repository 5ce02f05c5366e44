//! Fuzz what `POST /v1/jobs/{id}/edit` does with a body (seed 002 §3.2's interactive
//! transaction): the body read by `spec::edit::edit_from_json`, as the server reads it, then
//! applied to a job held at the barrier (`hold_at_barrier = true`, two components) in a
//! scheduler with the server's configuration, before it is placed (first byte even) or once
//! every component waits at the barrier (odd), then the job committed and run to its end.
//! Any body gives a refusal or a job that ends, never a panic.
#![no_main]
use coalloc_core::scheduler::{Event, Reply};
use coalloc_core::spec::edit::edit_from_json;
use coalloc_core::spec::native;
use libfuzzer_sys::fuzz_target;

mod drive;

const HELD: &str = r#"{"name": "held", "kind": "unordered", "hold_at_barrier": true,
  "component": [{"count": 4, "executable": "/bin/true"},
                {"count": 8, "executable": "/bin/true", "start_type": "interactive"}]}"#;

fuzz_target!(|data: &[u8]| {
    let Some((&when, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let Ok(edit) = edit_from_json(text) else {
        return;
    };
    let mut s = drive::served();
    let job = native::from_json(HELD).expect("the held job loads");
    let Ok(Reply::Submitted(id)) = s.handle(0, Event::Submit(Box::new(job))) else {
        panic!("the held job is refused");
    };
    let mut edit = Some(edit);
    if when % 2 == 0 {
        let _ = s.handle(0, Event::Edit { job: id, edit: edit.take().unwrap() });
    }
    drive::run(&mut s, 0, |s, now, job| {
        if let Some(e) = edit.take() {
            let _ = s.handle(now, Event::Edit { job, edit: e });
        }
        let _ = s.handle(now, Event::Commit { job });
    });
});
