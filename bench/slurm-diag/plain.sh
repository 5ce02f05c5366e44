#!/usr/bin/env bash
# plain.sh N: plain sbatch to RUNNING, each sample at a random moment on quiet clusters (as
# bench/slurm.sh's SETTLE): one job on the first cluster, and one per cluster at once until all
# run, interleaved; prints the samples, medians and their ratio. Throwaway diagnostics.
#   COALLOC_SLURM_RIG=/tmp/coalloc-slurm bash bench/slurm-diag/plain.sh 25
B=${COALLOC_SLURM_RIG:-/tmp/coalloc-slurm}; N=${1:-20}
C=($B/alpha/slurm.conf $B/beta/slurm.conf $B/gamma/slurm.conf)
settle() { for _ in $(seq 500); do b=0; for c in "${C[@]}"; do [ -z "$(SLURM_CONF=$c squeue -h -t PD,CF,R,CG,S -o %i)" ] || b=1; done; [ $b = 0 ] && break; sleep 0.02; done; sleep "$(awk -v r=$RANDOM 'BEGIN{printf "%.3f", 0.3+r/32768}')"; }
run() { local t0 ids=() i n st all; t0=$(date +%s%N)
  for i in "$@"; do ids+=("$(SLURM_CONF=${C[$i]} sbatch --parsable -J plain-diag -n 1 -o /dev/null --wrap 'sleep 0.2')"); done
  while :; do all=1; n=0; for i in "$@"; do st=$(SLURM_CONF=${C[$i]} squeue -h -j ${ids[$n]} -o %T 2>/dev/null); n=$((n+1)); case $st in RUNNING|COMPLETING|"") ;; *) all=0;; esac; done; [ $all = 1 ] && break; sleep 0.01; done
  echo $(( ($(date +%s%N)-t0)/1000000 )); }
one=; three=
for ((r=0;r<N;r++)); do settle; one+=" $(run 0)"; settle; three+=" $(run 0 1 2)"; done
echo "one:$one"; echo "three:$three"
python3 -c "
import statistics as s,sys
a=[float(x) for x in sys.argv[1].split()]; b=[float(x) for x in sys.argv[2].split()]
print('median one %.0f three %.0f ratio %.2f; mean one %.0f three %.0f' % (s.median(a), s.median(b), s.median(b)/s.median(a), s.mean(a), s.mean(b)))" "$one" "$three"
