#!/bin/sh
# share.py's component wrapper: logs job, component, its start and when coalloc-barrier
# returned (ns), and the exit code
t0=$(date +%s%N)
"$(dirname "$0")/../../target/release/coalloc-barrier"
rc=$?
echo "$COALLOC_JOB_ID $COALLOC_COMPONENT $t0 $(date +%s%N) $rc" >>/tmp/coalloc-slurm-diag-comp.log
exit $rc
