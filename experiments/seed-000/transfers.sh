#!/usr/bin/env bash
# A small version of seed 000's workload run for real on rate-limited network namespaces
# (transfers.py), to compare its transfer figures with the simulator's (README, "Transfers
# for real"). Needs root. Usage: experiments/seed-000/transfers.sh [path/to/coalloc] [JOBS] [SEED]
# (default: build the release binary; 10 jobs; seed 0). Takes about 3 minutes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/experiments/coalloc.sh"   # takes the binary off the arguments
exec python3 "$here/transfers.py" "$coalloc" "$@"
