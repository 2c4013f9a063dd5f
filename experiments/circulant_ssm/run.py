"""Circulant SSM experiment (issue 14, seed circulant-ssm-fourier-scan): group composition with
circulant / block-circulant state transitions against diagonal baselines and an LSTM, plus the
forward-throughput criterion. Writes REPORT.md, results.json and accuracy.png to --out.

  PYTHONPATH=python python experiments/circulant_ssm/run.py --small           # CPU smoke: 17 s on 2 idle cores (--workers 2)
  PYTHONPATH=python python experiments/circulant_ssm/run.py --workers 8       # full, on a GPU

Runs (each model x seed trains from scratch, same steps / batch / optimizer for every model):
  mve     Z_8, 10K training sequences of length 16-64; accuracy at length 32 (the seed's MVE)
  lengen  Z_8, train on lengths 3-40, test at 40-256 (the published length-generalization protocol)
  d4      D_4 (non-abelian), train 3-40, test at 32 and 40-256 (the proposal's follow-up)
  s3      S_3 (non-abelian, with a Z_3 factor), the same protocol
See README.md for the metrics and the budget knobs.
"""
import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402
import report  # noqa: E402
import tasks  # noqa: E402

RUNS = {  # name -> (task, train lengths lo, hi, models)
    "mve": ("z8", 16, 64, ["circ", "block4", "real01", "real11", "complex", "lstm"]),
    "lengen": ("z8", 3, 40, ["circ", "block4", "real01", "real11", "complex", "lstm"]),
    "d4": ("d4", 3, 40, ["block4", "circ", "real11", "complex", "lstm"]),
    "s3": ("s3", 3, 40, ["block4", "circ", "real11", "complex", "lstm"]),
}
FULL = dict(seeds=5, steps=1500, batch=64, train_count=10000, eval_count=512, lr=1e-2,
            gen_lengths=[40, 64, 96, 128, 192, 256], eval_length=32)
SMALL = dict(seeds=1, steps=40, batch=32, train_count=2000, eval_count=64, lr=1e-2,
             gen_lengths=[40, 128, 256], eval_length=32)


def _batches(tokens, targets, count, batch):
    for i in range(0, count, batch):
        yield tokens[i:i + batch], targets[i:i + batch]


@torch.no_grad()
def evaluate(net, task, length, count, batch, rng, device):
    """(token accuracy over all positions, accuracy of the final position) at one length."""
    net.eval()
    tokens, targets = tasks.fixed_length(task, count, length, rng)
    right = last = 0
    for tok, tgt in _batches(tokens, targets, count, batch):
        pred = net(torch.as_tensor(tok, device=device)).argmax(-1).cpu().numpy()
        right += int((pred == tgt).sum())
        last += int((pred[:, -1] == tgt[:, -1]).sum())
    net.train()
    return right / targets.size, last / count


def train_one(job):
    """One model x seed x run: trains, evaluates, returns a dict of results."""
    run, model, seed, cfg, device = job["run"], job["model"], job["seed"], job["cfg"], job["device"]
    torch.set_num_threads(job["threads"])
    task, lo, hi, _ = RUNS[run]
    rng = np.random.default_rng([seed, list(RUNS).index(run)])
    torch.manual_seed(seed)
    tokens, targets, lengths = tasks.dataset(task, cfg["train_count"], lo, hi, rng)
    targets = np.where(np.arange(hi)[None, :] < lengths[:, None], targets, -100)  # padding ignored
    net = models.Net(model).to(device)
    steps, batch = cfg["steps"], cfg["batch"]
    opt = torch.optim.AdamW(net.parameters(), lr=cfg["lr"], weight_decay=0.01)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + np.cos(np.pi * min(1.0, s / steps))))
    t0, losses = time.perf_counter(), []
    for _ in range(steps):
        idx = rng.integers(0, len(tokens), batch)
        width = int(lengths[idx].max())
        tok = torch.as_tensor(tokens[idx, :width], device=device)
        tgt = torch.as_tensor(targets[idx, :width], device=device)
        loss = F.cross_entropy(net(tok).flatten(0, 1), tgt.flatten(), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    train_s = time.perf_counter() - t0
    erng = np.random.default_rng([seed, 999, list(RUNS).index(run)])
    ebatch = max(8, min(256, cfg["eval_count"]))
    tok_acc, last_acc = evaluate(net, task, cfg["eval_length"], cfg["eval_count"], ebatch, erng, device)
    gen = {L: evaluate(net, task, L, cfg["eval_count"], ebatch, erng, device)[1] for L in cfg["gen_lengths"]}
    return dict(run=run, task=task, model=model, seed=seed, params=models.count_params(net),
                train_s=train_s, loss_start=float(np.mean(losses[:10])), loss_end=float(np.mean(losses[-20:])),
                acc_token=tok_acc, acc_last=last_acc, gen_last={str(k): v for k, v in gen.items()},
                gen_mean=float(np.mean(list(gen.values()))))


# ---- throughput: forward of one layer, (B, T) = (16, 2048), state n -------------------------

def _time(fn, device, reps):
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        if device != "cpu":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device != "cpu":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


@torch.no_grad()
def throughput(device, B=16, T=2048, ns=(64, 256), reps=5, names=("circ", "block4", "real01", "real11", "complex")):
    """Forward tokens/s of each layer (d = n) and of the bare scans (circulant_scan in the Fourier
    form vs diag_scan), float32; the criterion is circ >= 0.5x real01 (the Mamba-style layer)."""
    import strux.torch as st
    rows = []
    for n in ns:
        torch.manual_seed(0)
        x = torch.randn(B, T, n, device=device)
        for name in names:
            layer = models.MIXERS[name][1](n, n).to(device)
            rows.append(dict(n=n, what="layer", model=name, seconds=_time(lambda: layer(x), device, reps)))
        a = torch.rand(B, T, n, device=device)
        u = torch.randn(B, T, n, device=device)
        a_hat = torch.polar(torch.rand(B, T, n // 2 + 1, device=device), torch.randn(B, T, n // 2 + 1, device=device))
        ac = torch.polar(torch.rand(B, T, n // 2, device=device), torch.randn(B, T, n // 2, device=device))
        uc = torch.randn(B, T, n // 2, dtype=torch.complex64, device=device)
        ab = torch.randn(B, T, 4, 4, n // 4, device=device) / n
        rows.append(dict(n=n, what="scan", model="circ", seconds=_time(
            lambda: st.circulant_scan(a_hat, u, fourier=True), device, reps)))
        rows.append(dict(n=n, what="scan", model="real01", seconds=_time(lambda: st.diag_scan(a, u), device, reps)))
        if "block4" in names:
            rows.append(dict(n=n, what="scan", model="block4", seconds=_time(
                lambda: st.block_circulant_scan(ab, u), device, reps)))
        if "complex" in names:
            rows.append(dict(n=n, what="scan", model="complex", seconds=_time(
                lambda: st.diag_scan(ac, uc), device, reps)))
    for r in rows:
        r["tokens_per_s"] = B * T / r["seconds"]
    return dict(B=B, T=T, rows=rows)


@torch.no_grad()
def numerics(device, n=64, T=256, B=4):
    """The seed's criterion: the layer's float32 scan states against a float64 time loop over the
    dense spatial transitions (strux.torch.ssm.reference_states), max abs error."""
    from strux.torch.ssm import CirculantSSM, reference_states
    torch.manual_seed(0)
    layer = CirculantSSM(64, n).to(device)
    x = torch.randn(B, T, 64, device=device)
    want = reference_states(layer, x)
    return dict(n=n, T=T, err=float((layer.states(x).double() - want).abs().max()), scale=float(want.abs().max()))


# ---- driver ---------------------------------------------------------------------------------

def _machine(device):
    info = dict(python=platform.python_version(), torch=torch.__version__, platform=platform.platform(),
                cpus=os.cpu_count(), device=device)
    try:
        info["cpu"] = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line)
    except (OSError, StopIteration):
        info["cpu"] = platform.processor()
    if device != "cpu":
        info["gpu"] = torch.cuda.get_device_name()
    try:
        root = os.path.dirname(os.path.abspath(__file__))
        info["commit"] = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        info["commit"] += " (with uncommitted changes)" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        info["commit"] = "unknown"
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="the CPU smoke version (1 seed, 40 steps, small data)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out"))
    ap.add_argument("--runs", default=",".join(RUNS), help="comma-separated subset of " + ",".join(RUNS))
    ap.add_argument("--models", default="", help="comma-separated subset of the models (default: each run's own)")
    ap.add_argument("--seeds", type=int)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--train-count", type=int)
    ap.add_argument("--eval-count", type=int)
    ap.add_argument("--workers", type=int, default=1, help="processes training in parallel")
    ap.add_argument("--threads", type=int, default=1, help="torch / OpenMP threads per worker")
    ap.add_argument("--no-throughput", action="store_true")
    ap.add_argument("--throughput-reps", type=int, default=5)
    ap.add_argument("--note", default="", help="a line for the report (e.g. the budget's reason)")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="seconds after which no new training job starts (0: none); the report covers what finished")
    ap.add_argument("--report-only", action="store_true", help="rebuild the report from --out/results.json")
    ap.add_argument("--merge", nargs="*", default=[], help="with --report-only: output folders to add")
    ap.add_argument("--seed-start", type=int, default=0, help="the first seed (more seeds added by a later run)")
    args = ap.parse_args(argv)
    if args.report_only:
        return report_only(args.out, args.merge)

    cfg = dict(SMALL if args.small else FULL)
    for key in ("seeds", "steps", "train_count", "eval_count"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    runs = [r for r in args.runs.split(",") if r]
    bad = [r for r in runs if r not in RUNS]
    if bad:
        ap.error(f"--runs: unknown {bad}, expected some of {list(RUNS)}")
    only = [m for m in args.models.split(",") if m]
    if any(m not in models.MIXERS for m in only):
        ap.error(f"--models: expected some of {list(models.MIXERS)}, got {only}")
    os.makedirs(args.out, exist_ok=True)
    t_start = time.perf_counter()
    meta = dict(_machine(args.device), date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                small=args.small, cfg=cfg, workers=args.workers, threads=args.threads, note=args.note,
                command=" ".join([os.path.basename(sys.executable), "experiments/circulant_ssm/run.py"]
                                 + (argv if argv is not None else sys.argv[1:])))

    num = numerics(args.device)
    tp = None
    if not args.no_throughput:
        t0 = time.perf_counter()
        # --small: n = 64 and the two layers of the criterion only (the CPU minute)
        tp = throughput(args.device, reps=1, ns=(64,), names=("circ", "real01")) if args.small else \
            throughput(args.device, reps=args.throughput_reps)
        print(f"throughput measured in {time.perf_counter() - t0:.1f} s", flush=True)

    # seed-major order: a run stopped early still has every model at the first seeds
    jobs = [dict(run=r, model=m, seed=s, cfg=cfg, device=args.device, threads=args.threads)
            for s in range(args.seed_start, args.seed_start + cfg["seeds"])
            for r in runs for m in RUNS[r][3] if not only or m in only]
    results = []
    path = os.path.join(args.out, "results.json")
    meta["jobs"] = f"0 of {len(jobs)}"

    def record(r):  # results.json after every job: `--report-only` rebuilds the report from it
        results.append(r)
        _progress(r, len(results), len(jobs))
        meta["wall_s"] = time.perf_counter() - t_start
        meta["jobs"] = f"{len(results)} of {len(jobs)}"
        with open(path, "w") as f:
            json.dump(dict(meta=meta, results=results, throughput=tp, numerics=num), f, indent=1)

    # Each worker trains whole jobs; OpenMP threads of strux's CPU backend follow --threads.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    late = lambda: args.time_limit and time.perf_counter() - t_start > args.time_limit  # noqa: E731
    if args.workers <= 1:
        for j in jobs:
            if late():
                break
            record(train_one(j))
    else:
        with cf.ProcessPoolExecutor(args.workers, mp_context=mp.get_context("spawn")) as ex:
            futs = [ex.submit(train_one, j) for j in jobs]
            for fut in cf.as_completed(futs):
                if fut.cancelled():
                    continue
                record(fut.result())
                if late():  # the jobs not yet started are dropped, the running ones finish
                    for f in futs:
                        f.cancel()
    meta["wall_s"] = time.perf_counter() - t_start
    if len(results) < len(jobs):
        meta["jobs"] += f" (stopped at the time limit of {args.time_limit:.0f} s)"
        with open(path, "w") as f:
            json.dump(dict(meta=meta, results=results, throughput=tp, numerics=num), f, indent=1)
    report.write(args.out, meta, results, tp, RUNS, models.MIXERS, num)
    print(f"wrote {args.out}/REPORT.md in {meta['wall_s']:.0f} s", flush=True)


def report_only(out, merge=()):
    """Rebuilds REPORT.md and accuracy.png from out/results.json (e.g. of a run stopped early);
    with `merge`, first adds the results of other output folders (other runs, seeds, budgets:
    their commands and job counts go to the report) and rewrites out/results.json."""
    with open(os.path.join(out, "results.json")) as f:
        d = json.load(f)
    meta, results = d["meta"], d["results"]
    seen = {(r["run"], r["model"], r["seed"]) for r in results}
    for other in merge:
        with open(os.path.join(other, "results.json")) as f:
            o = json.load(f)
        new = [r for r in o["results"] if (r["run"], r["model"], r["seed"]) not in seen]
        seen |= {(r["run"], r["model"], r["seed"]) for r in new}
        results += new
        meta["command"] += f"`; then `{o['meta']['command']}"
        om = o["meta"]
        meta["jobs"] += f"; then {om.get('jobs', '?')} ({om['date']}, commit {om['commit']}, {om['wall_s']:.0f} s)"
        meta["wall_s"] += o["meta"]["wall_s"]
    if merge:
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump(dict(d, meta=meta, results=results), f, indent=1)
    report.write(out, meta, results, d["throughput"], RUNS, models.MIXERS, d["numerics"])
    print(f"wrote {out}/REPORT.md from {len(results)} results", flush=True)


def _progress(r, i, total):
    print(f"[{i}/{total}] {r['run']:6s} {r['model']:7s} seed {r['seed']}: loss {r['loss_start']:.2f} -> "
          f"{r['loss_end']:.3f}, acc@32 token {r['acc_token']:.3f} last {r['acc_last']:.3f}, "
          f"40-256 last {r['gen_mean']:.3f} ({r['train_s']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
