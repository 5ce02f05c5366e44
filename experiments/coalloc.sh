# Sourced by the experiments' run.sh scripts, after they set $root (the repository): sets
# $coalloc to the binary given as the script's first argument, or else builds the
# repository's release binary and uses it.
coalloc="${1:-}"
if [ -z "$coalloc" ]; then
  (cd "$root" && cargo build --release --bin coalloc)
  coalloc="${CARGO_TARGET_DIR:-$root/target}/release/coalloc"
fi
