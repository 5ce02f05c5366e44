//! The co-allocated test application of seed 003 §6.1 and seed 000 §4.1: a parallel
//! red-black Gauss-Seidel solver of the 2-D Poisson equation −Δu = f on the unit square, with
//! the analytic solution u = sin(πx)·sin(πy) to check the answer (see [`grid`]).
//!
//! # Run under coalloc
//!
//! Each process reads its [`Config`] from the environment and checks in at the start barrier
//! (seed 002 §3.3) *before any work* — with `ok: false` when its arguments are bad or there
//! are fewer grid columns than components. Once released:
//!
//! - **Strips.** The n×n interior grid is split into adjacent vertical strips, one per
//!   component, of widths proportional to `COALLOC_SIZES` (equal sizes, as in seed 000 §4.1,
//!   give equal strips; [`grid::split`]).
//! - **One process per strip.** Only the process with local rank 0 of a component solves its
//!   strip; the component's other processes check in at the barrier and exit 0. (The papers'
//!   application splits a strip further among a cluster's processors; this one keeps the
//!   co-allocation side — several components, one barrier, a wide-area exchange — and leaves
//!   intra-component parallelism out.)
//! - **Halo exchange.** After each colour's half-sweep, neighbouring strips swap their edge
//!   columns over TCP ([`net`]); addresses go through the job's rendezvous store.
//! - **Global stopping rule.** Every `--check-every` iterations the largest change of that
//!   iteration is reduced to component 0 along the chain of links (each component folds its
//!   own value into what comes from its right), and component 0's stop/continue decision flows
//!   back to the right; stop when it is below `--tol`, or after `--max-iter` iterations.
//! - **Result.** The largest error against the analytic solution is reduced the same way and
//!   component 0 prints `poisson: n=N components=C iterations=I max_error=E ok` (`FAILED`
//!   and exit 1 above [`threshold`]); the others print `poisson: component i done`.
//!
//! Red-black Gauss-Seidel updates each colour from the other colour only, so the split does
//! not change the arithmetic: a distributed run gives bit for bit the serial answer.
//!
//! Without `COALLOC_URL` the program runs alone as a single strip (no barrier, no store).

pub mod args;
pub mod grid;
pub mod net;

use args::{Command, Options};
use coalloc_runtime::{barrier, BarrierOutcome, Config, RuntimeError};
use grid::{Colour, Strip};
use net::Neighbours;

/// What can stop the application.
#[derive(Debug, thiserror::Error)]
pub enum PoissonError {
    /// Bad command line.
    #[error("{0} (see --help)")]
    Usage(String),
    /// The problem cannot be split over the job (reported at the barrier too).
    #[error("{0}")]
    Setup(String),
    /// The coalloc runtime failed (environment, barrier, store).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The job was aborted at the barrier.
    #[error("the job was aborted: {0}")]
    Aborted(String),
    /// A socket operation failed.
    #[error("{0}: {1}")]
    Net(String, #[source] std::io::Error),
    /// A neighbour broke the protocol.
    #[error("{0}")]
    Protocol(String),
}

/// The largest acceptable error against the analytic solution. The 5-point stencil's error
/// on this solution is about π²h²/12 (h = 1/(n+1)), plus what the stopping rule leaves; the
/// bound is π²h²/4 (three times the stencil's error) but never below 1e-2, which is then the
/// bound for every n ≥ 16 (π²h²/4 ≈ 8.5e-3 at n = 16).
pub fn threshold(n: usize) -> f64 {
    let h = 1.0 / (n as f64 + 1.0);
    (std::f64::consts::PI.powi(2) * h * h / 4.0).max(1e-2)
}

/// What a solve ends with.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Iterations done (each a red and a black half-sweep).
    pub iterations: u64,
    /// The largest error over the whole grid, known at component 0 only.
    pub max_error: Option<f64>,
}

/// Iterate on `strip` until the global stopping rule holds, then reduce the error.
pub fn solve(
    strip: &mut Strip,
    links: &mut Neighbours,
    o: &Options,
) -> Result<Report, PoissonError> {
    let mut iterations = 0;
    while iterations < o.max_iter {
        iterations += 1;
        let red = strip.half_sweep(Colour::Red);
        links.exchange(strip)?;
        let black = strip.half_sweep(Colour::Black);
        links.exchange(strip)?;
        if iterations.is_multiple_of(o.check_every) && iterations < o.max_iter {
            let change = if red.is_nan() || black.is_nan() {
                f64::NAN
            } else {
                red.max(black)
            };
            let global = links.reduce_max(change)?;
            // NaN (divergence) stops too; the error check then reports FAILED.
            let stop = global.is_some_and(|g| g.is_nan() || g < o.tol);
            if links.broadcast(stop)? {
                break;
            }
        }
    }
    let max_error = links.reduce_max(strip.max_error())?;
    Ok(Report {
        iterations,
        max_error,
    })
}

/// Run the application with `args` (program name excluded); the process's exit code.
/// Errors go to stderr; nothing panics on input.
pub fn run(args: &[String]) -> i32 {
    match run_inner(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("poisson: {e}");
            1
        }
    }
}

fn run_inner(args: &[String]) -> Result<i32, PoissonError> {
    let parsed = match args::parse(args) {
        Ok(Command::Help) => {
            println!("{}", args::USAGE);
            return Ok(0);
        }
        Ok(Command::Solve(o)) => Ok(o),
        Err(e) => Err(e),
    };
    let cfg = match std::env::var_os("COALLOC_URL") {
        Some(_) => Some(Config::from_env()?),
        None => None,
    };
    let (index, sizes) = match &cfg {
        Some(c) => (c.component, c.sizes.clone()),
        None => (0, vec![1]),
    };
    // Everything that can be refused is refused before the barrier, and reported there.
    let checked = parsed.and_then(|o| {
        let strips = grid::split(o.n, &sizes).ok_or_else(|| {
            let c = sizes.len();
            PoissonError::Setup(format!("--n {} is too small for {c} components", o.n))
        })?;
        Ok((o, strips))
    });
    if let Some(c) = &cfg {
        let reason = checked.as_ref().err().map(ToString::to_string);
        match barrier(c, reason.is_none(), reason.as_deref())? {
            BarrierOutcome::Released => {}
            BarrierOutcome::Aborted(why) => return Err(PoissonError::Aborted(why)),
        }
    }
    let (o, strips) = checked?;
    if cfg.as_ref().is_some_and(|c| c.local_rank > 0) {
        return Ok(0);
    }
    let (first, width) = strips[index];
    let mut links = match &cfg {
        Some(c) if c.components > 1 => Neighbours::connect(c, &o)?,
        _ => Neighbours::default(),
    };
    let mut strip = Strip::new(o.n, first, width);
    let report = solve(&mut strip, &mut links, &o)?;
    links.close()?;
    let Some(err) = report.max_error else {
        println!("poisson: component {index} done");
        return Ok(0);
    };
    let ok = err <= threshold(o.n);
    println!(
        "poisson: n={} components={} iterations={} max_error={err:e} {}",
        o.n,
        sizes.len(),
        report.iterations,
        if ok { "ok" } else { "FAILED" }
    );
    Ok(if ok { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standalone(o: &Options) -> Report {
        let mut strip = Strip::new(o.n, 1, o.n);
        solve(&mut strip, &mut Neighbours::default(), o).unwrap()
    }

    #[test]
    fn one_strip_converges_to_the_analytic_solution() {
        let o = Options {
            n: 32,
            ..Options::default()
        };
        let r = standalone(&o);
        let err = r.max_error.unwrap();
        assert!(err < threshold(32), "max error {err}");
        assert!(r.iterations < o.max_iter && r.iterations.is_multiple_of(o.check_every));
    }

    #[test]
    fn error_shrinks_with_the_mesh() {
        let e = |n| {
            let o = Options {
                n,
                tol: 1e-10,
                ..Options::default()
            };
            standalone(&o).max_error.unwrap()
        };
        let (coarse, fine) = (e(8), e(16));
        // Second order: halving h divides the error by about four.
        assert!(
            coarse / fine > 3.0 && coarse / fine < 5.0,
            "{coarse} / {fine}"
        );
    }

    #[test]
    fn max_iter_bounds_the_run() {
        let o = Options {
            n: 16,
            max_iter: 7,
            ..Options::default()
        };
        assert_eq!(standalone(&o).iterations, 7);
    }

    #[test]
    fn threshold_is_1e_2_from_16_up() {
        assert_eq!(threshold(16), 1e-2);
        assert_eq!(threshold(1024), 1e-2);
        assert!(threshold(4) > 1e-2);
    }
}
