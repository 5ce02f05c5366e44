# The floor of the k-component latency (bench/RESULTS.md, "Session of 2026-11-28 (second)"):
# k coalloc-barrier processes (`--help`: start, print, exit) started at once by posix_spawn,
# no server, then waited for; median wall ms of n tries.
# Usage: python3 floor.py PATH/coalloc-barrier K N
import os, sys, time, statistics
exe = sys.argv[1]; k = int(sys.argv[2]); n = int(sys.argv[3])
null = os.open(os.devnull, os.O_WRONLY)
walls = []
for _ in range(n):
    t = time.perf_counter()
    pids = [os.posix_spawn(exe, [exe, "--help"], os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, null, 1)]) for _ in range(k)]
    for p in pids: os.waitpid(p, 0)
    walls.append((time.perf_counter() - t) * 1000)
print(f"k={k}: median {statistics.median(walls):.1f} ms, min {min(walls):.1f}, max {max(walls):.1f} (n={n})")
