#!/usr/bin/env python3
"""The hot code of a callgrind profile made with --dump-instr=yes: how many 64-byte lines of
machine code run at least N times (N = 232,000: about once per job of SDSC-BLUE), in KB,
and the functions they belong to. What a replay's every job runs must fit the processor's
first-level instruction cache (32 KB here) for the replay not to wait on instruction
fetches (bench/RESULTS.md, thirteenth session).

    python3 bench/icache.py callgrind.out [N] [FUNCTIONS]
"""
import collections
import re
import sys


def parse(path):
    """Executions per instruction address, and each address's function."""
    names, count, fn_of = {}, collections.Counter(), {}
    fn, last, skip = None, 0, False
    for line in open(path):
        if line.startswith(("fn=", "cfn=")):
            m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.strip())
            if m.group(2):
                names[m.group(1)] = m.group(2)
            if line.startswith("fn="):
                fn = names.get(m.group(1))
            continue
        if line.startswith("calls="):
            skip = True  # the next cost line is the call's inclusive cost
            continue
        if not line or line[0] not in "0123456789+-*":
            continue
        fields = line.split()
        a = fields[0]
        if a.startswith("0x"):
            addr = int(a, 16)
        elif a[0] == "+":
            addr = last + int(a[1:])
        elif a[0] == "-":
            addr = last - int(a[1:])
        elif a == "*":
            addr = last
        else:
            continue
        last = addr
        if skip:
            skip = False
            continue
        if len(fields) >= 3:
            count[addr] += int(fields[2])
            fn_of[addr] = fn
    return count, fn_of


def main():
    path = sys.argv[1]
    threshold = int(sys.argv[2]) if len(sys.argv) > 2 else 232_000
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    count, fn_of = parse(path)
    lines, line_fn = collections.defaultdict(int), {}
    for addr, n in count.items():
        lines[addr // 64] = max(lines[addr // 64], n)
        line_fn.setdefault(addr // 64, fn_of[addr])
    hot = [line for line, n in lines.items() if n >= threshold]
    print(f"lines run >= {threshold:,} times: {len(hot)} = {len(hot) * 64 / 1024:.1f} KB")
    if top:
        by_fn = collections.Counter(
            re.sub(r"^.*?\.rs:", "", line_fn[line] or "?")[:110] for line in hot
        )
        for name, k in by_fn.most_common(top):
            print(f"{k:5d} {name}")


if __name__ == "__main__":
    main()
