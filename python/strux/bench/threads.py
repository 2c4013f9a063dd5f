"""Threads on a shared machine: every CPU bench case with the default thread count against one
thread, timed alternately in one process, optionally beside a busy neighbour process.

    python -m strux.bench.threads [--neighbour none|pinned|unpinned] [--quick] [--family F]
    python -m strux.bench.threads --one-thread-vs-omp [--rounds 3]

A neighbour is `python -c "while True: pass"` started here (pinned to the last CPU of this
process's affinity mask, or left to the scheduler) and stopped at the end. The claim checked is
that the default threads are never much slower than one thread (ratio = default / one-thread
median time; above 1 means the default lost), the failure mode of spinning OpenMP teams when
cores are shared.

--one-thread-vs-omp compares `strux.set_num_threads(1)` with a process started with
OMP_NUM_THREADS=1 on the ks cases, in child processes run alternately (the two settings cannot
share a process: OpenMP reads the variable once).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

import strux

from . import FAMILIES, collect, time_alternately


def neighbour(kind: str):
    if kind == "none":
        return None
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    if kind == "pinned":
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(p.pid, {cpus[-1]})
    return p


def compare(cases, threads: int, min_time: float = 0.3) -> list:
    rows = []
    for c in cases:
        def one():
            strux.set_num_threads(1)
            c.strux()

        def default():
            strux.set_num_threads(0)  # the default count (adapting to the machine), not a fixed one
            c.strux()
        s1, sd = time_alternately([one, default], min_time=min_time)
        rows.append({"family": c.family, "case": c.name, "one_ms": s1, "default_ms": sd,
                     "ratio": sd["median_ms"] / s1["median_ms"]})
    strux.set_num_threads(0)
    return rows


_CHILD = """
import json, sys, strux
from strux.bench import collect, time_alternately
if sys.argv[1] == "set1":
    strux.set_num_threads(1)
out = []
for c in collect(["ks"]):
    out.append([c.name, time_alternately([c.strux], min_time=0.5)[0]])
print(json.dumps({"threads": strux.get_num_threads(), "rows": out}))
"""


def one_thread_vs_omp(rounds: int) -> int:
    import json
    res = {"set1": [], "omp1": []}
    for _ in range(rounds):
        for mode in ("set1", "omp1"):
            env = dict(os.environ)
            if mode == "omp1":
                env["OMP_NUM_THREADS"] = "1"
            out = subprocess.run([sys.executable, "-c", _CHILD, mode], capture_output=True, text=True, env=env,
                                 check=True)
            res[mode].append(json.loads(out.stdout))
    names = [r[0] for r in res["set1"][0]["rows"]]
    print(f"set_num_threads(1) vs OMP_NUM_THREADS=1, {rounds} alternating rounds of child processes, "
          f"load average {os.getloadavg()}")
    print(f"{'case':36} {'set_num_threads(1) min / med ms':>32} {'OMP_NUM_THREADS=1 min / med ms':>32} "
          f"{'ratio min':>9} {'ratio med':>9}")
    worst = 0.0
    for i, n in enumerate(names):
        a = [min(r["rows"][i][1][k] for r in res["set1"]) for k in ("min_ms", "median_ms")]
        b = [min(r["rows"][i][1][k] for r in res["omp1"]) for k in ("min_ms", "median_ms")]
        worst = max(worst, a[1] / b[1])
        print(f"{n:36} {a[0]:15.3f} / {a[1]:<14.3f} {b[0]:15.3f} / {b[1]:<14.3f} {a[0] / b[0]:9.2f} {a[1] / b[1]:9.2f}")
    print(f"(best min and best median over the rounds per setting) worst median ratio {worst:.2f}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m strux.bench.threads")
    ap.add_argument("--one-thread-vs-omp", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--neighbour", choices=("none", "pinned", "unpinned"), default="unpinned")
    ap.add_argument("--family", action="append")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.one_thread_vs_omp:
        return one_thread_vs_omp(args.rounds)
    threads = strux.get_num_threads()
    cases = collect(args.family or FAMILIES, quick=args.quick)
    p = neighbour(args.neighbour)
    try:
        rows = compare(cases, threads, min_time=0.05 if args.quick else 0.5)
    finally:
        if p is not None:
            p.kill()
            p.wait()
    print(f"default threads {threads} vs 1, neighbour {args.neighbour}, load average {os.getloadavg()}")
    print(f"{'family':9} {'case':60} {'1 thread ms (min/med)':>22} {'default ms (min/med)':>22} {'ratio':>6}")
    for r in rows:
        a, b = r["one_ms"], r["default_ms"]
        print(f"{r['family']:9} {r['case']:60} {a['min_ms']:10.3f}/{a['median_ms']:<10.3f} "
              f"{b['min_ms']:10.3f}/{b['median_ms']:<10.3f} {r['ratio']:6.2f}")
    worst = max(r["ratio"] for r in rows)
    print(f"worst ratio {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
