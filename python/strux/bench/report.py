"""What `strux bench --json FILE` writes: FILE (JSON, with a schema version), FILE's stem + ".md"
(a report for people: machine, load, threads, one table per family, baselines named) and, when
matplotlib is installed, FILE's stem + ".png" (strux against each baseline, per case)."""
from __future__ import annotations

import json
import os
import platform
import time

from . import SCHEMA_VERSION


def check_writable(path: str) -> None:
    """Raises OSError naming `path` unless a file can be written there (checked before a run,
    not after it). Leaves nothing behind."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise OSError(f"argument '--json': folder '{folder}' does not exist")
    if os.path.isdir(path):
        raise OSError(f"argument '--json': '{path}' is a folder, expected a file name")
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        raise OSError(f"argument '--json': cannot write '{path}': {e.strerror}") from None
    if not existed:
        os.remove(path)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def loadavg():
    try:
        return list(os.getloadavg())
    except (AttributeError, OSError):
        return None


def meta(info: dict, threads: int, quick: bool, device: str, load_before) -> dict:
    return {
        "schema": "strux-bench", "schema_version": SCHEMA_VERSION,
        "strux": info, "host": platform.node(), "machine": platform.machine(), "cpu": cpu_model(),
        "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "device": device, "quick": quick, "threads": threads, "available_cpus": info.get("available_cpus"),
        "loadavg_before": load_before, "loadavg_after": loadavg(),
    }


def write_json(path: str, head: dict, rows: list) -> None:
    with open(path, "w") as f:
        json.dump({**head, "results": rows}, f, indent=1, default=str)


def markdown(head: dict, rows: list) -> str:
    la = lambda v: "n/a" if not v else " / ".join(f"{x:.2f}" for x in v)  # noqa: E731
    out = [f"# strux bench, {head['date']}", "",
           f"- strux {head['strux'].get('version')} on {head['cpu']} ({head['machine']}), host {head['host']}",
           f"- device {head['device']}, {head['threads']} strux threads, {head.get('available_cpus')} CPUs available, "
           f"FFT planning {head['strux'].get('fft_planning')}{', quick sizes' if head['quick'] else ''}",
           f"- load average (1/5/15 min) before {la(head['loadavg_before'])}, after {la(head['loadavg_after'])}",
           "- times in ms, min / median / max over alternating rounds (strux, then each baseline, per round);"
           " speedup = baseline median / strux median (above 1: strux is faster)", ""]
    for fam in dict.fromkeys(r["family"] for r in rows):
        out += [f"## {fam}", "", "| case | strux ms | baseline | baseline ms | speedup | GB/s | %copy | rel err | ok |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in (r for r in rows if r["family"] == fam):
            s = r["strux"]
            st = f"{s['min_ms']:.3f} / {s['median_ms']:.3f} / {s['max_ms']:.3f}"
            first_cells = [r["case"], st]
            tail_cells = [f"{r['gbps']:.1f}", f"{100 * r['floor_fraction']:.0f}%", f"{r['rel_error']:.1e}",
                          "yes" if r["verified"] else "NO"]
            for i, b in enumerate(r["baselines"]):
                bt = f"{b['min_ms']:.3f} / {b['median_ms']:.3f} / {b['max_ms']:.3f}"
                a = first_cells if i == 0 else ["", ""]
                z = tail_cells if i == 0 else ["", "", "", ""]
                out.append("| " + " | ".join(a + [b["name"], bt, f"{b['speedup']:.2f}x"] + z) + " |")
        out.append("")
    out.append("%copy: achieved bytes/s over the measured DRAM copy bandwidth with the same thread count "
               "(cache-resident cases can pass 100%).")
    return "\n".join(out) + "\n"


def plot(path: str, rows: list) -> bool:
    """One bar per (case, baseline): strux's speedup (log scale, 1 = as fast), coloured by
    family, min-to-max spread as an error bar; False when matplotlib is absent."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    bars = [(r, b) for r in rows for b in r["baselines"]]
    fams = list(dict.fromkeys(r["family"] for r in rows))
    colours = {f: plt.get_cmap("tab10")(i) for i, f in enumerate(fams)}
    fig, ax = plt.subplots(figsize=(14, 0.32 * len(bars) + 1.2))
    ys = list(range(len(bars)))[::-1]
    vals = [b["speedup"] for _, b in bars]
    # spread: slowest baseline / fastest strux .. fastest baseline / slowest strux
    lo = [v - b["min_ms"] / r["strux"]["max_ms"] for (r, b), v in zip(bars, vals)]
    hi = [b["max_ms"] / r["strux"]["min_ms"] - v for (r, b), v in zip(bars, vals)]
    ax.barh(ys, vals, color=[colours[r["family"]] for r, _ in bars],
            xerr=[[max(0.0, x) for x in lo], [max(0.0, x) for x in hi]], error_kw={"lw": 0.6})
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r['family']} {r['case']}  vs {b['name']}" for r, b in bars], fontsize=6)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("speedup of strux = baseline median / strux median (bars: min-max spread)")
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colours[f]) for f in fams], labels=fams,
              fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_all(json_path: str, head: dict, rows: list) -> list:
    """JSON, markdown and (optional) plot; returns the paths written."""
    stem = os.path.splitext(json_path)[0]
    write_json(json_path, head, rows)
    with open(stem + ".md", "w") as f:
        f.write(markdown(head, rows))
    written = [json_path, stem + ".md"]
    if plot(stem + ".png", rows):
        written.append(stem + ".png")
    return written
