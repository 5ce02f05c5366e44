//! `coalloc-barrier [--fail [REASON]]`: the start barrier as a program of its own, for
//! components that want the check-in without the start-up cost of the full `coalloc` binary
//! (it links the scheduler, the simulator and the server). Same behaviour as
//! `coalloc barrier`: exit 0 when the job commits, 1 with the reason on stderr when it is
//! aborted, when `--fail` was given, or when the server cannot be reached.

use coalloc_runtime::{barrier, BarrierOutcome, Config};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (ok, reason) = match args.first().map(String::as_str) {
        None => (true, None),
        Some("--fail") => (
            false,
            Some(
                args.get(1)
                    .cloned()
                    .unwrap_or_else(|| "the component reported a failed start-up".into()),
            ),
        ),
        Some("-h" | "--help") => {
            println!("usage: coalloc-barrier [--fail [REASON]]\n\nCheck in at the job's start barrier (inside a component started by coalloc);\nexit 0 when the job commits, 1 when it is aborted or --fail was given.");
            return;
        }
        Some(other) => {
            eprintln!("coalloc-barrier: unknown argument `{other}` (try --help)");
            std::process::exit(2)
        }
    };
    let cfg = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("coalloc-barrier: {e}");
            std::process::exit(2)
        }
    };
    match barrier(&cfg, ok, reason.as_deref()) {
        Ok(BarrierOutcome::Released) if ok => {}
        Ok(BarrierOutcome::Released) => std::process::exit(1),
        Ok(BarrierOutcome::Aborted(why)) => {
            eprintln!("coalloc-barrier: job aborted: {why}");
            std::process::exit(1)
        }
        Err(e) => {
            eprintln!("coalloc-barrier: {e}");
            std::process::exit(1)
        }
    }
}
