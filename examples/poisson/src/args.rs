//! The command line of the Poisson application: grid size, stopping rule, help.

use crate::PoissonError;

/// Largest grid side accepted: two n×n arrays of f64 stay below ~300 MB.
pub const MAX_N: usize = 4096;

/// What the application was asked to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Print the usage and exit 0.
    Help,
    /// Solve with these options.
    Solve(Options),
}

/// The solver's options; every component of a job must be given the same ones (checked when
/// neighbours connect).
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Interior points per side (`--n`, default 64).
    pub n: usize,
    /// Stop when the largest change of an iteration is below this (`--tol`, default 1e-6).
    pub tol: f64,
    /// Stop after this many iterations at most (`--max-iter`, default 100 000).
    pub max_iter: u64,
    /// Iterations between two global stopping checks (`--check-every`, default 10).
    pub check_every: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            n: 64,
            tol: 1e-6,
            max_iter: 100_000,
            check_every: 10,
        }
    }
}

/// The usage text.
pub const USAGE: &str = "\
usage: poisson [--n N] [--tol T] [--max-iter I] [--check-every K]

Solves -Δu = f on the unit square (red-black Gauss-Seidel, N×N interior points) with
u = sin(πx)·sin(πy) as the known answer. Under coalloc (COALLOC_URL set) each component
solves one vertical strip and exchanges boundary columns with its neighbours over TCP;
without it the program runs alone as a single strip.

  --n N            interior points per side (default 64, at most 4096)
  --tol T          stop when an iteration changes no point by T or more (default 1e-6)
  --max-iter I     stop after I iterations at most (default 100000)
  --check-every K  iterations between global stopping checks (default 10)
  --help           print this text";

/// Parse the arguments (program name excluded); `--flag value` and `--flag=value` both work.
pub fn parse(args: &[String]) -> Result<Command, PoissonError> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        if flag == "--help" || flag == "-h" {
            return Ok(Command::Help);
        }
        if !matches!(flag, "--n" | "--tol" | "--max-iter" | "--check-every") {
            return Err(PoissonError::Usage(format!("unknown argument `{arg}`")));
        }
        let value = match inline.or_else(|| it.next().cloned()) {
            Some(v) => v,
            None => return Err(PoissonError::Usage(format!("{flag} needs a value"))),
        };
        let bad = |why: &str| PoissonError::Usage(format!("{flag} {value}: {why}"));
        match flag {
            "--n" => {
                o.n = value.parse().map_err(|_| bad("not a whole number"))?;
                if o.n == 0 || o.n > MAX_N {
                    return Err(bad("must be between 1 and 4096"));
                }
            }
            "--tol" => {
                o.tol = value.parse().map_err(|_| bad("not a number"))?;
                if !(o.tol.is_finite() && o.tol > 0.0) {
                    return Err(bad("must be a positive number"));
                }
            }
            "--max-iter" => {
                o.max_iter = value.parse().map_err(|_| bad("not a whole number"))?;
                if o.max_iter == 0 {
                    return Err(bad("must be at least 1"));
                }
            }
            _ => {
                o.check_every = value.parse().map_err(|_| bad("not a whole number"))?;
                if o.check_every == 0 {
                    return Err(bad("must be at least 1"));
                }
            }
        }
    }
    Ok(Command::Solve(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(a: &[&str]) -> Result<Command, PoissonError> {
        parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn parses_flags_in_both_forms() {
        assert_eq!(p(&[]).unwrap(), Command::Solve(Options::default()));
        let want = Options {
            n: 32,
            tol: 1e-8,
            max_iter: 500,
            check_every: 5,
        };
        let got = p(&[
            "--n",
            "32",
            "--tol=1e-8",
            "--max-iter",
            "500",
            "--check-every=5",
        ]);
        assert_eq!(got.unwrap(), Command::Solve(want));
        assert_eq!(p(&["--n", "8", "--help"]).unwrap(), Command::Help);
    }

    #[test]
    fn refuses_bad_input() {
        for bad in [
            &["--n"][..],
            &["--n", "0"],
            &["--n", "-3"],
            &["--n", "5000"],
            &["--tol", "nan"],
            &["--tol", "0"],
            &["--max-iter", "0"],
            &["--check-every", "x"],
            &["--frobnicate"],
        ] {
            assert!(matches!(p(bad), Err(PoissonError::Usage(_))), "{bad:?}");
        }
    }
}
