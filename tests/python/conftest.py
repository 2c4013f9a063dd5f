"""Test-only pytest options (the library reads no option or environment variable).

--fuzz-table PATH: when the session ends, write the fuzz suites' tally (fuzz_common.TALLY, per
category: cases ending in a clear error, a correct result, a wrong result, a hang) to PATH as
JSON, and to PATH.md the table of bench/NOTES-hostile.md, CPU and GPU (test_cuda_fuzz.py's
categories start with "gpu "). A crash ends the session before this runs, so the crash column of
a written table is 0 by construction; a crashing case shows as a session that wrote no table.
"""
from __future__ import annotations

import collections
import json
import sys

_COLUMNS = ("clear error", "correct", "crash", "hang", "wrong")


def pytest_addoption(parser):
    parser.addoption("--fuzz-table", default=None, metavar="PATH",
                     help="write the fuzz suites' outcome tally to PATH (JSON) and PATH.md (table)")


def _table(tally: dict) -> str:
    rows = collections.defaultdict(collections.Counter)  # (side, category) -> counts
    for key, counts in tally.items():
        side = "GPU" if key.startswith("gpu ") else "CPU"
        rows[(side, key.rsplit(": ", 1)[-1])].update(counts)
    out = []
    for side in ("CPU", "GPU"):
        cats = sorted(c for s, c in rows if s == side)
        if not cats:
            continue
        out += [f"## {side}", "", "| category | cases | " + " | ".join(_COLUMNS) + " |",
                "|---|" + "---:|" * (len(_COLUMNS) + 1)]
        total = collections.Counter()
        for c in cats:
            n = rows[(side, c)]
            total.update(n)
            out.append(f"| {c} | {sum(n.values())} | " + " | ".join(str(n[k]) for k in _COLUMNS) + " |")
        out += [f"| **total** | {sum(total.values())} | " + " | ".join(str(total[k]) for k in _COLUMNS) + " |", ""]
    return "\n".join(out)


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--fuzz-table")
    if not path:
        return
    fc = sys.modules.get("fuzz_common")
    tally = {} if fc is None else {k: dict(v) for k, v in fc.TALLY.items()}
    with open(path, "w") as f:
        json.dump(tally, f, indent=1, sort_keys=True)
    with open(f"{path}.md", "w") as f:
        f.write(_table(tally))
