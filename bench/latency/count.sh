#!/bin/bash
# count.sh BIN K: syscall counts (strace -f -c) of `coalloc serve` and what it starts (the
# launchers and the components) over its whole life: start, one K-component job, stop.
BIN=$1; K=$2
D=${TMPDIR:-/tmp}/coalloc-latency-c-$$; rm -rf $D; mkdir -p $D
strace -f -c -qq -e trace=fsync,fdatasync,clone,clone3,vfork,execve -o $D/count $BIN/coalloc serve --config $(dirname "$(readlink -f "$0")")/config.toml --state-dir $D/state 2>$D/log &
SP=$!
for i in $(seq 100); do [ -f $D/state/server.json ] && break; sleep 0.1; done
URL=$(python3 -c "import json;print(json.load(open('$D/state/server.json'))['url'])")
TOK=$(cat $D/state/token)
J=$(python3 - "$BIN/coalloc-barrier" $K <<'PY'
import json,sys
print(json.dumps({"kind":"unordered","component":[{"count":1,"job_type":"single","executable":sys.argv[1],"arguments":[]} for _ in range(int(sys.argv[2]))]}))
PY
)
ID=$(curl -s -H "Authorization: Bearer $TOK" -H 'content-type: application/json' -X POST --data "$J" $URL/v1/jobs | python3 -c 'import json,sys;print(json.load(sys.stdin)["job"])')
while :; do S=$(curl -s -H "Authorization: Bearer $TOK" $URL/v1/jobs/$ID); echo "$S" | grep -q '"state":"finished"' && break; sleep 0.2; done
sleep 0.5
kill $(pgrep -f "^$BIN/coalloc serve .*$D/state") 2>/dev/null
# strace waits for the launchers, which leave once no server is connected and nothing runs
for i in $(seq 100); do kill -0 $SP 2>/dev/null || break; sleep 0.1; done
cat $D/count
rm -rf $D
