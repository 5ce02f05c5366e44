#!/bin/sh
# spin.py's late component: checks in at the barrier 3 s after it starts
sleep 3
exec "$(dirname "$0")/../../target/release/coalloc-barrier"
