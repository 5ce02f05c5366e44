//! `coalloc-launcher WORK_DIR`: a local cluster's long-lived launcher (see
//! `coalloc_backends::local::launcher`), as a program of its own; `coalloc local-launcher`
//! is the same in the full binary.

fn main() {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: coalloc-launcher WORK_DIR");
        std::process::exit(2)
    };
    if let Err(e) = coalloc_backends::local::launcher::run(std::path::Path::new(&dir)) {
        eprintln!("coalloc-launcher: {e}");
        std::process::exit(1)
    }
}
