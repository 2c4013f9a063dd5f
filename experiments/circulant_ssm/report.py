"""REPORT.md and accuracy.png of the circulant SSM experiment, from run.py's results."""
import os

import numpy as np

ANCHORS = """Published numbers (`../shared/ANCHORS.md`, "circulant SSM"). They are *not* the same tasks
or budgets as here, so they frame the result rather than compete with it:

- Length generalization (train 3–40, test 40–256, 5 seeds; PD-SSM paper, Table 2), Cycle
  Navigation (a 5-cycle): complex diagonal 90.4 ± 4.3 %, PD-SSM 99.5 ± 0.7, block-diagonal SLiCE
  99.8 ± 0.2, Mamba 48.4 ± 2.2, Transformer 24.4 ± 0.5, LSTM 100.
- Parity: Mamba with eigenvalues in [0, 1] 0.00 vs [−1, 1] 1.00 scaled accuracy (Grazzi et al., ICLR 2025).
- Non-abelian A5: complex diagonal 2 layers 15.5 %, PD-SSM 1 layer 100 %.
- The seed's own MVE criteria: circulant > 90 % on Z_8 at length 32, diagonal < 60 %; circulant
  forward throughput > 0.5x diagonal; ‖h_spatial − IFFT(ĥ_scan)‖∞ < 1e-4 in float32.

A circulant transition is a complex-diagonal transition in a fixed Fourier basis, so Z_8 is
solvable by one circulant layer *and* by the complex diagonal; the real [0, 1] diagonal provably
cannot track a cyclic group at all, so beating it decides nothing by itself."""


def _ms(vals):
    vals = np.asarray(vals, dtype=float) * 100
    return f"{vals.mean():.1f} ± {vals.std():.1f}", f"{vals.max():.1f}"


def _table(rows, run, mixers):
    out = ["| model | params | seeds | acc@32 per token (mean ± std) | best | acc@32 final token | best | "
           "final token at 40–256 (mean ± std) | best | loss start → end | s / run |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    by_model = {}
    for r in rows:
        if r["run"] == run:
            by_model.setdefault(r["model"], []).append(r)
    for model, rs in by_model.items():
        tok, last, gen = (_ms([r[k] for r in rs]) for k in ("acc_token", "acc_last", "gen_mean"))
        out.append(f"| {model}: {mixers[model][0]} | {rs[0]['params']:,} | {len(rs)} | {tok[0]} | {tok[1]} | "
                   f"{last[0]} | {last[1]} | {gen[0]} | {gen[1]} | {np.mean([r['loss_start'] for r in rs]):.2f} → "
                   f"{np.mean([r['loss_end'] for r in rs]):.3f} | {np.mean([r['train_s'] for r in rs]):.0f} |")
    return out, by_model


def _throughput(tp):
    out = [f"Forward of one layer (d = n, float32, no grad) and of the bare scans, (B, T) = ({tp['B']}, {tp['T']}); "
           "ratio = tokens/s relative to the real [0, 1] diagonal of the same kind (criterion: circ ≥ 0.5x).", "",
           "| n | what | model | ms | tokens/s | ratio to real01 |", "|---|---|---|---|---|---|"]
    base = {(r["n"], r["what"]): r["tokens_per_s"] for r in tp["rows"] if r["model"] == "real01"}
    for r in tp["rows"]:
        out.append(f"| {r['n']} | {r['what']} | {r['model']} | {r['seconds'] * 1e3:.1f} | {r['tokens_per_s']:,.0f} | "
                   f"{r['tokens_per_s'] / base[(r['n'], r['what'])]:.2f}x |")
    return out


def _verdicts(by_run, tp, numerics):
    lines = []
    mve = by_run.get("mve", {})
    if "circ" in mve:
        c = np.mean([r["acc_token"] for r in mve["circ"]])
        lines.append(f"- MVE, circulant > 90 % at length 32 (per token): {c * 100:.1f} % → "
                     f"{'met' if c > 0.9 else 'NOT met'}.")
    for m in ("real01", "real11", "complex"):
        if m in mve:
            v = np.mean([r["acc_token"] for r in mve[m]])
            lines.append(f"- MVE, diagonal {m} < 60 % at length 32: {v * 100:.1f} % → "
                         f"{'as the seed predicts' if v < 0.6 else 'NOT as the seed predicts'}.")
    if tp:
        for n in sorted({r["n"] for r in tp["rows"]}):
            get = {(r["what"], r["model"]): r["tokens_per_s"] for r in tp["rows"] if r["n"] == n}
            ratio = get[("layer", "circ")] / get[("layer", "real01")]
            lines.append(f"- Throughput n = {n}: circulant layer {ratio:.2f}x the diagonal layer → "
                         f"{'met' if ratio >= 0.5 else 'NOT met'} (≥ 0.5x; failure if < 0.2x).")
    if numerics is not None:
        lines.append(f"- Numerics: ‖h_spatial − IFFT(ĥ_scan)‖∞ = {numerics['err']:.2e} in float32 "
                     f"(n = {numerics['n']}, T = {numerics['T']}, states up to {numerics['scale']:.1f}) → "
                     f"{'met' if numerics['err'] < 1e-4 else 'NOT met'} (< 1e-4).")
    return lines


def _plot(out_dir, by_run, gen_lengths):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    runs = [r for r in ("lengen", "mve", "d4", "s3") if r in by_run]
    cols = 2 if len(runs) > 1 else 1
    rows = (len(runs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    color = {m: f"C{i}" for i, m in enumerate(["circ", "block4", "real01", "real11", "complex", "lstm"])}
    for ax in axes.flat[len(runs):]:
        ax.axis("off")
    for ax, run in zip(axes.flat, runs):
        for model, rs in by_run[run].items():
            acc = np.array([[r["gen_last"][str(L)] for L in gen_lengths] for r in rs]) * 100
            ax.errorbar(gen_lengths, acc.mean(0), yerr=acc.std(0), label=model, marker="o", capsize=3,
                        color=color.get(model))
        ax.set_title({"lengen": "Z_8, trained on lengths 3–40", "d4": "D_4, trained on lengths 3–40",
                      "s3": "S_3, trained on lengths 3–40",
                      "mve": "Z_8, trained on lengths 16–64"}[run])
        ax.set_xlabel("test length")
        ax.set_ylabel("final-token accuracy (%)")
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 102)
        ax.axhline(100 / (6 if run == "s3" else 8), color="gray", lw=0.8, ls=":")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out_dir, "accuracy.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(out_dir, meta, results, tp, runs, mixers, numerics=None):
    cfg = meta["cfg"]
    lines = ["# Circulant SSM experiment: report", "",
             "Generated by `experiments/circulant_ssm/run.py` (issue 14; seed "
             "`circulant-ssm-fourier-scan.md`). Honest whatever it shows.", "",
             f"- Machine: {meta.get('gpu') or meta['cpu']} ({meta['cpus']} CPUs visible), device `{meta['device']}`, "
             f"torch {meta['torch']}, Python {meta['python']}",
             f"- Date: {meta['date']}; commit {meta['commit']}; wall time {meta['wall_s']:.0f} s; "
             f"training jobs completed: {meta.get('jobs', 'all')}",
             f"- Command: `{meta['command']}`",
             f"- Budget: {cfg['seeds']} seed(s) per model per command (the tables count them); {cfg['steps']} "
             f"steps of batch {cfg['batch']} (AdamW, lr "
             f"{cfg['lr']}, warmup + cosine, clip 1.0), the same for every model; {cfg['train_count']:,} training "
             f"sequences per run; {cfg['eval_count']} test sequences per length; {meta['workers']} worker(s) × "
             f"{meta['threads']} thread(s)" + (" — the `--small` smoke version" if meta["small"] else ""),
             ]
    if meta.get("note"):
        lines.append(f"- Note: {meta['note']}")
    lines += ["", "Models: token embedding, 2 pre-norm residual blocks (sequence mixer, then a 2x GELU MLP), "
              "d = 64, state n = 64, a linear classifier per position; the LSTM is a 2-layer nn.LSTM of "
              "hidden size 64 with the same embedding and classifier. Loss: cross-entropy at every position. "
              "Metrics: accuracy per token over all positions of length-32 test sequences; accuracy of the "
              "final token (the whole prefix product) at length 32 and at lengths "
              f"{', '.join(map(str, cfg['gen_lengths']))} (\"40–256\": their mean). "
              "Chance is 12.5 % (Z_8, D_4), 16.7 % (S_3).", ""]
    by_run = {}
    titles = {"mve": "Z_8 composition, the seed's MVE (train 10K sequences of length 16–64)",
              "lengen": "Z_8 length generalization (train lengths 3–40, test 40–256)",
              "d4": "D_4 composition (non-abelian; train 3–40, test 32 and 40–256)",
              "s3": "S_3 composition (non-abelian, a Z_3 factor; train 3–40, test 32 and 40–256)"}
    for run in runs:
        if not any(r["run"] == run for r in results):
            continue
        table, by_run[run] = _table(results, run, mixers)
        lines += [f"## {titles[run]}", ""] + table + [""]
    lines += ["## Criteria", ""] + _verdicts(by_run, tp, numerics) + [""]
    if tp:
        lines += ["## Throughput", ""] + _throughput(tp) + [""]
    png = _plot(out_dir, by_run, cfg["gen_lengths"]) if by_run else None
    if png:
        lines += ["## Length generalization", "", "![accuracy vs test length](accuracy.png)", ""]
    lines += ["## Published numbers", "", ANCHORS, ""]
    with open(os.path.join(out_dir, "REPORT.md"), "w") as f:
        f.write("\n".join(lines))
