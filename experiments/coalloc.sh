# Sourced by the experiments' run.sh scripts, after they set $here (the script's folder) and
# $root (the repository) and before they change directory. It sets:
#
# - $coalloc: the binary given as the script's first argument (taken off the arguments; an
#   argument starting with `-` is an option, not a binary), made absolute against the
#   caller's directory (`bash experiments/seed-002/run.sh target/release/coalloc` from the
#   repository; a bare name is a file in the caller's directory if there is one, else looked
#   up on PATH), or else the repository's release binary, built with cargo.
# - $quick: non-empty when $COALLOC_EXPERIMENT_QUICK is set (non-empty): run at a reduced
#   size (one seed, at most $COALLOC_EXPERIMENT_JOBS jobs per run, default 20; fewer
#   repetitions for the real-server ones) only to check that the script still works end to
#   end (crates/coalloc-cli/tests/experiments.rs). Such a run's results go to
#   results-quick/, never over the committed results/.
# - $sim_quick: the `coalloc sim` options of that reduced size (empty otherwise).
#
# and defines results_begin and results_commit: a run writes into a fresh folder, $new
# (results_begin), and only when everything succeeded replaces results/ with it
# (results_commit, which first carries over the given entries of the old results/ that this
# script does not write). A run that stops before leaves results/ as it was, and says where
# its partial output is.
coalloc="${1:-}"
case "$coalloc" in
  -*) coalloc="" ;; # options, no binary
  *) if [ $# -gt 0 ]; then shift; fi ;;
esac
if [ -z "$coalloc" ]; then
  (cd "$root" && cargo build --release --bin coalloc)
  target="${CARGO_TARGET_DIR:-target}"
  case "$target" in /*) ;; *) target="$root/$target" ;; esac
  coalloc="$target/release/coalloc"
elif [[ "$coalloc" != */* && ! -e "$coalloc" ]]; then
  given="$coalloc"
  coalloc="$(command -v -- "$coalloc")" || {
    echo "$0: $given: not found on PATH" >&2
    exit 1
  }
elif [[ "$coalloc" != /* ]]; then
  coalloc="$PWD/$coalloc"
fi
if [ ! -f "$coalloc" ] || [ ! -x "$coalloc" ]; then
  echo "$0: $coalloc: no such executable file (give the path of a coalloc binary)" >&2
  exit 1
fi

quick="${COALLOC_EXPERIMENT_QUICK:-}"
sim_quick=()
if [ -n "$quick" ]; then
  sim_quick=(--seeds 1 --max-jobs "${COALLOC_EXPERIMENT_JOBS:-20}")
fi

# A fresh folder for this run's results ($new), beside the results it will replace ($dest).
results_begin() {
  dest="$here/results${quick:+-quick}"
  new="$(mktemp -d "$here/.results-new.XXXXXX")"
  chmod 755 "$new"
  trap results_stopped EXIT
}

results_stopped() {
  local rc=$?
  if [ -n "${new:-}" ] && [ -d "$new" ]; then
    echo "$0: stopped (exit status $rc): ${dest#"$root/"} is as it was; this run's partial output is in ${new#"$root/"}" >&2
  fi
}

# Put $new in place of $dest, first copying into it the named entries of $dest (kept
# results this script does not write, e.g. seed 000's transfers/).
results_commit() {
  local keep old
  for keep in "$@"; do
    if [ -e "$dest/$keep" ] && [ ! -e "$new/$keep" ]; then
      cp -a "$dest/$keep" "$new/$keep"
    fi
  done
  old="$here/.results-old.$$"
  rm -rf "$old"
  if [ -e "$dest" ]; then
    mv "$dest" "$old"
  fi
  mv "$new" "$dest"
  new=""
  rm -rf "$old"
  trap - EXIT
  echo "results: ${dest#"$root/"}"
}
