#!/bin/bash
# cpu.sh BIN K N: CPU ms (user+sys, /proc) of the server and of its three launchers over N
# K-component jobs run one after another (after one warm-up job), per job; and fsyncs.
BIN=$1; K=$2; N=$3
D=${TMPDIR:-/tmp}/coalloc-latency-u-$$; rm -rf $D; mkdir -p $D
RUST_LOG=warn $BIN/coalloc serve --config $(dirname "$(readlink -f "$0")")/config.toml --state-dir $D/state 2>$D/log &
SP=$!
for i in $(seq 100); do [ -f $D/state/server.json ] && break; sleep 0.1; done
URL=$(python3 -c "import json;print(json.load(open('$D/state/server.json'))['url'])")
TOK=$(cat $D/state/token)
J=$(python3 - "$BIN/coalloc-barrier" $K <<'PY'
import json,sys
print(json.dumps({"kind":"unordered","component":[{"count":1,"job_type":"single","executable":sys.argv[1],"arguments":[]} for _ in range(int(sys.argv[2]))]}))
PY
)
run() { ID=$(curl -s -H "Authorization: Bearer $TOK" -H 'content-type: application/json' -X POST --data "$J" $URL/v1/jobs | python3 -c 'import json,sys;print(json.load(sys.stdin)["job"])')
while :; do S=$(curl -s -H "Authorization: Bearer $TOK" $URL/v1/jobs/$ID); echo "$S" | grep -q '"state":"finished"' && break; sleep 0.05; done; }
run
L=$(pgrep -f "^$BIN/coalloc local-launcher $D/state" | tr '\n' ' ')
cpu() { for p in $SP $L; do awk '{print $14+$15}' /proc/$p/stat; done | paste -sd+ | bc; }
srv() { awk '{print $14+$15}' /proc/$SP/stat; }
a=$(cpu); s=$(srv)
for n in $(seq $N); do run; done
b=$(cpu); t=$(srv)
HZ=$(getconf CLK_TCK)
echo "$BIN K=$K N=$N: server $(echo "scale=2; ($t-$s)*1000/$HZ/$N" | bc) ms CPU/job, server+launchers $(echo "scale=2; ($b-$a)*1000/$HZ/$N" | bc) ms CPU/job"
kill $SP; wait $SP 2>/dev/null
rm -rf $D
