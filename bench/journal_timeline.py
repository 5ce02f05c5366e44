#!/usr/bin/env python3
"""When each kind of journal entry of the last submitted job was written, in ms after its
submission: a server's own timeline of one co-allocation, from its state directory.

    python3 bench/journal_timeline.py STATE_DIR

For example, with the embedded default and a 25-component `coalloc-barrier` job:

    D=$(mktemp -d); target/release/coalloc serve --state-dir $D & sleep 1.5
    python3 - > /tmp/j25.json <<'PY'
import json, os
exe = os.path.abspath("target/release/coalloc-barrier")
print(json.dumps({"kind": "unordered", "component": [{"count": 1, "executable": exe}] * 25}))
PY
    COALLOC_STATE_DIR=$D target/release/coalloc submit /tmp/j25.json; sleep 2
    python3 bench/journal_timeline.py $D; kill %1

Prints one line per entry kind: how many, the first and the last, and every time when there
are several. Entries after the job's submission that belong to other jobs count too, so run it
with one job at a time.
"""
import collections, json, sqlite3, sys

db = sqlite3.connect(sys.argv[1] + "/journal.sqlite")
rows = db.execute("select seq, at, entry from journal order by seq").fetchall()
submits = [i for i, (_, _, e) in enumerate(rows) if json.loads(e)["e"] == "submit"]
if not submits:
    sys.exit("no submission in this journal")
t0 = rows[submits[-1]][1]
kinds = collections.defaultdict(list)
for _, at, entry in rows[submits[-1]:]:
    kinds[json.loads(entry)["e"]].append(at - t0)
for kind, times in kinds.items():
    print(f"{kind:12} {len(times):3}  first {min(times):5} ms  last {max(times):5} ms  {times if len(times) > 1 else ''}")
