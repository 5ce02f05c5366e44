//! The `poisson` binary: a thin shell over [`coalloc_poisson::run`], which the coalloc CLI
//! also calls as its hidden `coalloc poisson` subcommand.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(coalloc_poisson::run(&args));
}
