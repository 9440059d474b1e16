#!/usr/bin/env python3
"""Where a program keeps only one core busy: a system-wide `perf` sample,
paired millisecond by millisecond across the CPUs (issue 20, "cores busy").

A per-process profile says where CPU time goes, not when the other cores sat
idle. With `perf record -a -e cpu-clock -F 1000`, every CPU is sampled once
a millisecond while it runs something (an idle CPU gives the idle task's
sample, or none at all when its tick is stopped). This script puts the
samples of each millisecond side by side: a millisecond in which exactly one
CPU ran the program is one the program spent on one core, and the symbol that
CPU was in is what ran alone. It prints the share of milliseconds with every
core, some cores, or one core busy, and the symbols that ran alone, most
frequent first.

    # while the program trains (cpu_training, say):
    perf record -a -e cpu-clock -F 1000 -o /tmp/perf.data -- sleep 10
    perf script -i /tmp/perf.data -F cpu,comm,tid,time,ip,sym > /tmp/samples.txt
    bench/perf_one_core.py /tmp/samples.txt --comm cpu_training --comm hpo-cpu-

`--comm` names the program's threads (a prefix of their names; hpo-burn's
training threads are `hpo-cpu-<i>`, see hpo_burn::threads). Standard library
only.
"""

import argparse
import collections
import re
import sys

LINE = re.compile(r"\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+)\s*(.*)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("samples", help="output of perf script -F cpu,comm,tid,time,ip,sym")
    ap.add_argument("--comm", action="append", required=True,
                    help="thread-name prefix of the program (repeatable)")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()

    ms = collections.defaultdict(dict)
    cpus = set()
    with open(a.samples, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            comm, _tid, cpu, t, _ip, sym = m.groups()
            cpu = int(cpu)
            cpus.add(cpu)
            ours = any(comm.startswith(p) for p in a.comm)
            ms[int(float(t) * 1000 + 0.5)][cpu] = (ours, sym.strip()[:100] or "?")
    if not ms:
        print("no samples", file=sys.stderr)
        return 1

    n_cpus = len(cpus)
    busy_counts = collections.Counter()
    alone = collections.Counter()
    first, last = min(ms), max(ms)
    for t in range(first, last + 1):
        busy = [sym for ours, sym in ms.get(t, {}).values() if ours]
        busy_counts[len(busy)] += 1
        if len(busy) == 1:
            alone[busy[0]] += 1
    total = sum(busy_counts.values())
    mean = sum(k * v for k, v in busy_counts.items()) / total
    print(f"{total} ms on {n_cpus} CPUs; cores busy {100 * mean:.0f}%")
    for k in sorted(busy_counts, reverse=True):
        print(f"  {k} busy: {busy_counts[k]} ms ({100 * busy_counts[k] / total:.1f}%)")
    n_alone = busy_counts[1]
    if n_alone:
        print(f"what ran on one core ({n_alone} ms), most frequent first:")
        for sym, c in alone.most_common(a.top):
            print(f"  {c:6d}  {100 * c / n_alone:5.1f}%  {sym}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
