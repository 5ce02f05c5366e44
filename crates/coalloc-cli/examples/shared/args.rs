//! The command-line arguments of the benchmarks under examples/ (included with `#[path]`).

/// The number after `name` in `args`, or `default`.
pub fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
