#!/usr/bin/env bash
# steps.sh N: the floor of the allocation launch without coalloc. K = 1, 3 and 6 detached
# `salloc -n1 -- srun -N1 -n1` clients started at once, round-robin over the rig's clusters
# (as the bench places components), each step writing the time it started; prints the ms from
# the first client's start to the last step's start, per sample, and the medians. Every sample
# starts at a random moment on quiet clusters (as bench/slurm.sh's SETTLE). Throwaway
# diagnostics.
#   COALLOC_SLURM_RIG=/tmp/coalloc-slurm bash bench/slurm-diag/steps.sh 10
B=${COALLOC_SLURM_RIG:-/tmp/coalloc-slurm}; N=${1:-10}
C=($B/alpha/slurm.conf $B/beta/slurm.conf $B/gamma/slurm.conf)
T=$(mktemp -d /tmp/coalloc-steps-diag.XXXXXX); trap 'rm -rf "$T"' EXIT
settle() { for _ in $(seq 500); do b=0; for c in "${C[@]}"; do [ -z "$(SLURM_CONF=$c squeue -h -t PD,CF,R,CG,S -o %i)" ] || b=1; done; [ $b = 0 ] && break; sleep 0.02; done; sleep "$(awk -v r=$RANDOM 'BEGIN{printf "%.3f", 0.3+r/32768}')"; }
run() { # run K: ms until all K steps started
  local k=$1 i t0 n last; rm -f "$T"/t.*
  t0=$(date +%s%N)
  for ((i = 0; i < k; i++)); do
    SLURM_CONF=${C[$((i % 3))]} setsid salloc -J steps-diag -n1 -t1 -- srun -N1 -n1 --input=none \
      /bin/sh -c "date +%s%N > $T/t.$i" </dev/null >/dev/null 2>&1 &
  done
  # The clients end soon after their steps: waiting for them costs no CPU, where polling for
  # the files would take some from the launches being timed.
  wait
  if [ "$(find "$T" -name 't.*' | wc -l)" != "$k" ]; then
    echo "steps.sh: a step of $k did not start (left out)" >&2
    return
  fi
  last=$(cat "$T"/t.* | sort -n | tail -1)
  echo $(((last - t0) / 1000000)); }
declare -A s
for ((r = 0; r < N; r++)); do for k in 1 3 6; do settle; s[$k]+=" $(run $k)"; done; done
for k in 1 3 6; do echo "K=$k:${s[$k]}"; done
python3 -c "
import statistics as st, sys
m = [st.median(float(x) for x in a.split()) for a in sys.argv[1:]]
print('medians: 1 -> %.0f, 3 -> %.0f, 6 -> %.0f ms; 6/1 = %.2f' % (m[0], m[1], m[2], m[2] / m[0]))" "${s[1]}" "${s[3]}" "${s[6]}"
