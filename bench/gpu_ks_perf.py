"""Focused GPU bench of the ks kernels (scripts/gpu_focus.sh ks): the ks cases of
strux.bench.gpu_ks_scan (ours vs bmm-with-permutations vs dense, fp32, batch 25088, both layouts;
bf16/fp16 rows), a summary of wins against bmm, and the forward times and float64 errors of each
float32 product path forced (options path "kernels": the ks kernels, "blas": cuBLAS on strided
views, "stream": the batch-last streaming kernel, "tr": batch-first d > 1 through in-row
transpositions + cuBLAS; passed to the plans, so one process times all), plus the batch-first
d > 1 table (kernels vs tr vs bmm, per call and back to back, and a per-kernel profile of tr and
bmm). Times through strux.bench.timing (median_ms per call, back_to_back_ms for GPU time).
--halves: only the half-type forward rows (ours default / kernels forced vs bmm in the same
dtype) and the backward rows (ours vjp, dw alone on cuBLAS and on the FFMA kernel, vs torch
autograd of the bmm recipe), both layouts, the 10 patterns.
--bsf: only the batch-first d > 1 table and profile.
--bsf-halves: batch-first d > 1 only: half forward (ours = tr, FFMA kernels, bmm in the same
dtype), backward fp32 / bf16 / fp16 (vjp, dx, dw on tr and on the FFMA kernel, torch autograd of
bmm), smaller batches (tr vs kernels), and batch-last float32 dx with each path forced.
--quick: batch-last float32 only: forced paths and streaming tiles back to back, forward and dx,
vs bmm (a few seconds).

Run: python bench/gpu_ks_perf.py --out DIR [--halves | --bsf-halves | --bsf | --quick]
(PYTHONPATH=python, as scripts/gpu_build.sh sets)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics

import torch

from strux.bench.gpu_ks_scan import bmm_operands, bmm_recipe
from strux.bench.timing import back_to_back_ms, kernel_us, median_ms

PATS = [(1, 48, 48, 16), (2, 96, 384, 4), (2, 192, 48, 4), (1, 768, 768, 1), (6, 64, 64, 1),
        (1, 768, 192, 2), (4, 64, 64, 4), (1, 256, 256, 4), (4, 96, 96, 2), (16, 64, 64, 1)]


def ref64(x, w, p, layout):
    """float64 product through bmm with permutations (the same formula, a different code)."""
    return bmm_recipe(x.double(), *bmm_operands(w.double(), p, contiguous=False), p, layout)


# The options (strux._cuda_options) this driver's ks calls pass to the plans while forced() runs.
_OPTS = None


def forced(options, fn):
    """fn() with this driver's ks calls passing `options` (None: the plans' own choice)."""
    global _OPTS
    old, _OPTS = _OPTS, options
    try:
        return fn()
    finally:
        _OPTS = old


def _path_opts(path, **extra):
    """The options of a forced path name ("tc" and "kernels": the ks kernels; None/"": none)."""
    if not path and not extra:
        return None
    o = dict(extra)
    if path:
        o["path"] = "kernels" if path == "tc" else path
    return o


def mm(x, w, p, layout="bsf"):
    from strux import _cuda_ks as K
    return K.ks_matmul(x, w, p, layout=layout, options=_OPTS)


def vjp(dy, x, w, p, layout="bsf"):
    from strux import _cuda_ks as K
    return K.ks_matmul_vjp(dy, x, w, p, layout=layout, options=_OPTS)


def bwd(dy, x, w, p, layout, **kw):
    from strux import _cuda_ks as K
    return K._ks_bwd(dy, x, w, p, layout, opts=K._O.ks_code(_OPTS), **kw)


def ks_path(p, batch, bl, dtype_code, dw=False):
    """(forward, dx) path of the plan under the current options (dw: (backward_w path, chunk));
    "n/a" where a forced path applies to no operation of the plan (the plan raises ValueError)."""
    from strux import _cuda_ks as K
    try:
        f = K._ext.cuda_ks_dw_path if dw else K._ext.cuda_ks_path
        return tuple(f(list(p), batch, bl, dtype_code, K._O.ks_code(_OPTS)))
    except ValueError:
        return ("n/a", 0 if dw else "n/a")


def b2b_times(batch=25088):
    """{"pattern layout": [ours ms, bmm ms, blas ms, stream ms]}, back to back (no host overhead in
    the figure); the forced paths for batch-last only (nan where a path does not apply)."""
    out = {}
    for p in PATS:
        a, b, c, d = p
        w = torch.randn(*p, device="cuda") / c ** 0.5
        wl, wf = bmm_operands(w, p)
        for layout in ("bsf", "bsl"):
            x = torch.randn(batch, a * c * d, device="cuda") if layout == "bsf" else \
                torch.randn(a * c * d, batch, device="cuda")
            f = lambda: mm(x, w, p, layout=layout)  # noqa: E731
            row = [back_to_back_ms(f), back_to_back_ms(lambda: bmm_recipe(x, wl, wf, p, layout))]
            for path in ("blas", "stream"):
                env = _path_opts(path)
                takes = layout == "bsl" and forced(env, lambda: ks_path(p, batch, True, 0)[0]) == path
                row.append(forced(env, lambda: back_to_back_ms(f)) if takes else float("nan"))
            out[f"{p} {layout}"] = row
    return out


def quick(batch=25088):
    """Batch-last float32 only: per pattern, back-to-back ms of forward and dx for the default
    path, each forced path (kernels, cuBLAS, stream) and each streaming shape (m16 tiles per warp
    item, batch tile), bmm's forward, and the float64 error of the streaming forward and dx.
    Returns (lines, data)."""
    torch.manual_seed(0)
    cols = [("auto", None), ("tc", _path_opts("kernels")), ("blas", _path_opts("blas")),
            ("stream", _path_opts("stream"))] + \
        [(f"m{mt}t{tn}", _path_opts("stream", stream_tn=tn, stream_mt=mt))
         for mt in (1, 2) for tn in (128, 64, 32)]
    lines = ["bsl fp32 back to back ms, fwd (dx): " + " | ".join(n for n, _ in cols) +
             " | bmm fwd | x bmm (auto fwd) | x blas (stream fwd) | err64 stream fwd / dx | paths"]
    data = {}
    for p in PATS:
        a, b, c, d = p
        w = torch.randn(*p, device="cuda") / c ** 0.5
        wl = w.permute(0, 3, 1, 2).reshape(a * d, b, c).contiguous()
        x = torch.randn(a * c * d, batch, device="cuda")
        dy = torch.randn(a * b * d, batch, device="cuda")
        fwd = lambda: mm(x, w, p, layout="bsl")  # noqa: E731
        bx = lambda: bwd(dy, x, w, p, "bsl", need_dx=True, need_dw=False)  # noqa: E731
        row = {}
        for name, env in cols:
            path = forced(env, lambda: ks_path(p, batch, True, 0))
            want = env and env["path"]
            # nan where the forced path does not apply (the table's choice runs there, or the plan
            # raises ValueError when it applies to no operation)
            nan = float("nan")
            row[name] = (forced(env, lambda: back_to_back_ms(fwd)) if want in (None, path[0]) else nan,
                         forced(env, lambda: back_to_back_ms(bx)) if want in (None, path[1]) else nan)
        row["bmm"] = back_to_back_ms(lambda: bmm_recipe(x, wl, None, p, "bsl"))
        env = _path_opts("stream")
        e_f = e_b = float("nan")
        fp = forced(env, lambda: ks_path(p, batch, True, 0))
        if fp[0] == "stream":
            y = forced(env, fwd)
            r = ref64(x, w, p, "bsl")
            e_f = ((y.double() - r).norm() / r.norm()).item()
            del y, r
        if fp[1] == "stream":
            dx = forced(env, bx)[0]
            r = ref64(dy, w.transpose(1, 2).contiguous(), (a, c, b, d), "bsl")
            e_b = ((dx.double() - r).norm() / r.norm()).item()
            del r, dx
        paths = tuple(ks_path(p, batch, True, 0))
        data[str(p)] = dict(row=row, err=(e_f, e_b), paths=paths)
        cells = " | ".join(f"{row[n][0]:.4f} ({row[n][1]:.4f})" for n, _ in cols)
        lines.append(f"{p}: {cells} | {row['bmm']:.4f} | {row['bmm'] / row['auto'][0]:.2f} | "
                     f"{row['blas'][0] / row['stream'][0]:.2f} | {e_f:.1e} / {e_b:.1e} | {paths}")
    return lines, data


BSF_D = [p for p in PATS if p[3] > 1]


TR_VARIANTS = {"tr": _path_opts("tr")}  # (run 1-2 also timed chunked / pipelined variants)


def bsf_tr_table(batches=(25088,)):
    """Batch-first d > 1, per pattern and batch: ms of the kernels (tc), of tr (both
    forced), of the default rule and of bmm (per call), the same back to back for the default
    and bmm, the float64 errors of tr (forward and dx), and the default's path."""
    out = {}
    for batch in batches:
        for p in (BSF_D if batch == batches[0] else BSF_D[:4]):
            a, b, c, d = p
            w = torch.randn(*p, device="cuda") / c ** 0.5
            wf = w.permute(0, 3, 2, 1).reshape(a * d, c, b).contiguous()
            x = torch.randn(batch, a * c * d, device="cuda")
            ours = lambda: mm(x, w, p, layout="bsf")  # noqa: E731
            r = {"tc": forced(_path_opts("kernels"), lambda: median_ms(ours))}
            for name, env in TR_VARIANTS.items():
                r[name] = forced(env, lambda: median_ms(ours))
            r["auto"] = median_ms(ours)
            r["bmm"] = median_ms(lambda: bmm_recipe(x, None, wf, p, "bsf"))
            r["auto_b2b"] = back_to_back_ms(ours)
            r["bmm_b2b"] = back_to_back_ms(lambda: bmm_recipe(x, None, wf, p, "bsf"))
            r["path"] = ks_path(p, batch, False, 0)[0]
            if batch == batches[0]:
                y = forced(_path_opts("tr"), ours)
                ref = ref64(x, w, p, "bsf")
                r["err_tr"] = ((y.double() - ref).norm() / ref.norm()).item()
                del y, ref
                dy = torch.randn(batch, a * b * d, device="cuda")
                dx = forced(_path_opts("tr"), lambda: vjp(dy, x, w, p, layout="bsf")[0])
                refdx = ref64(dy, w.transpose(1, 2), (a, c, b, d), "bsf")
                r["err_tr_dx"] = ((dx.double() - refdx).norm() / refdx.norm()).item()
                del dx, refdx, dy
            out[f"{p} {batch}"] = r
            best = min(r[k] for k in TR_VARIANTS)
            print(f"bsf {p} batch {batch}: tc {r['tc']:.3f} | " +
                  " ".join(f"{k} {r[k]:.3f}" for k in TR_VARIANTS) +
                  f" | auto {r['auto']:.3f} ({r['path']}) | bmm {r['bmm']:.3f} | x bmm: best tr "
                  f"{r['bmm'] / best:.2f}, auto {r['bmm'] / r['auto']:.2f} | b2b auto {r['auto_b2b']:.3f} / "
                  f"bmm {r['bmm_b2b']:.3f} ({r['bmm_b2b'] / r['auto_b2b']:.2f})"
                  + (f" | err tr {r['err_tr']:.1e} dx {r['err_tr_dx']:.1e}" if "err_tr" in r else ""),
                  flush=True)
            del x
    return out


def profile_bsf(pats=((1, 768, 192, 2), (2, 192, 48, 4), (1, 256, 256, 4)), batch=25088, calls=5):
    """Per-kernel GPU microseconds (torch.profiler, CUDA activity) of the tr path and of bmm:
    which piece costs what."""
    res = {}
    for p in pats:
        a, b, c, d = p
        w = torch.randn(*p, device="cuda") / c ** 0.5
        wf = w.permute(0, 3, 2, 1).reshape(a * d, c, b).contiguous()
        x = torch.randn(batch, a * c * d, device="cuda")
        runs = {"tr": lambda: forced(_path_opts("tr"), lambda: mm(x, w, p)),
                "bmm": lambda: bmm_recipe(x, None, wf, p, "bsf")}
        for name, fn in runs.items():
            rows = kernel_us(fn, calls, width=60)
            res[f"{p} {name}"] = rows
            print(f"profile {p} {name}: " + "; ".join(f"{k} x{n:g} {t:.1f} us" for k, n, t in rows[:6]), flush=True)
    return res


def forward_times(batch=25088):
    """{"pattern layout": [ms, rel err vs float64]} of the current process's kernels."""
    out = {}
    for p in PATS:
        a, b, c, d = p
        w = torch.randn(*p, device="cuda") / c ** 0.5
        for layout in ("bsf", "bsl"):
            x = torch.randn(batch, a * c * d, device="cuda") if layout == "bsf" else \
                torch.randn(a * c * d, batch, device="cuda")
            if ks_path(p, batch, layout == "bsl", 0)[0] == "n/a":
                continue  # a forced path that applies to no operation of this plan
            y = mm(x, w, p, layout=layout)
            r = ref64(x, w, p, layout)
            err = ((y.double() - r).norm() / r.norm()).item()
            del r, y
            out[f"{p} {layout}"] = [median_ms(lambda: mm(x, w, p, layout=layout)), err]
    return out


def _forced(path, fn, **extra):
    """fn() with the path forced (None or "": the plans' own choice) and extra options."""
    return forced(_path_opts(path, **extra), fn)


def _inputs(p, layout, dt, batch):
    a, b, c, d = p
    w = (torch.randn(*p, device="cuda") / c ** 0.5).to(dt)
    shp_x = (batch, a * c * d) if layout == "bsf" else (a * c * d, batch)
    shp_y = (batch, a * b * d) if layout == "bsf" else (a * b * d, batch)
    return torch.randn(*shp_x, device="cuda").to(dt), w, torch.randn(*shp_y, device="cuda").to(dt)


def _rel(y, ref):
    return ((y.double() - ref).norm() / ref.norm()).item()


def half_rows(batch=25088):
    """Forward in bf16 / fp16: ours (default rule), the FFMA kernels forced, bmm in the same dtype."""
    from strux import _cuda_ks as K
    rows = []
    for p in PATS:
        for dt in (torch.bfloat16, torch.float16):
            for layout in ("bsf", "bsl"):
                x, w, _ = _inputs(p, layout, dt, batch)
                wl, wf = bmm_operands(w, p)
                ours = lambda: mm(x, w, p, layout=layout)  # noqa: E731
                ref = ref64(x, w, p, layout)
                err = _rel(ours(), ref)
                err_bmm = _rel(bmm_recipe(x, wl, wf, p, layout), ref)
                del ref
                path = ks_path(p, batch, layout == "bsl", K._DTYPE_CODE[str(dt)[6:]])[0]
                rows.append(dict(pattern=p, layout=layout, dtype=str(dt)[6:], path=path,
                                 ms=median_ms(ours), kernels_ms=_forced("tc", lambda: median_ms(ours)),
                                 bmm_ms=median_ms(lambda: bmm_recipe(x, wl, wf, p, layout)),
                                 b2b_ms=back_to_back_ms(ours),
                                 b2b_bmm_ms=back_to_back_ms(lambda: bmm_recipe(x, wl, wf, p, layout)),
                                 err=err, err_bmm=err_bmm))
                r = rows[-1]
                print(f"half {p} {layout} {r['dtype']}: ours {r['ms']:.3f} ({path}), kernels {r['kernels_ms']:.3f}, "
                      f"bmm {r['bmm_ms']:.3f}, b2b {r['b2b_ms']:.3f}/{r['b2b_bmm_ms']:.3f}, err {err:.1e} (bmm {err_bmm:.1e})",
                      flush=True)
    return rows


def backward_rows(batch=25088):
    """Backward (dx + dw): ours vjp (default rule), dw alone on the default path and on the old
    kernel, vs torch autograd of the bmm recipe (the permutations included), float32 and bf16;
    dw errors vs float64."""
    from strux import _cuda_ks as K
    rows = []
    for p in PATS:
        a, b, c, d = p
        for dt in (torch.float32, torch.bfloat16):
            for layout in ("bsf", "bsl"):
                x, w, dy = _inputs(p, layout, dt, batch)
                xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
                wl, wf = bmm_operands(wg, p, contiguous=False)
                y = bmm_recipe(xg, wl, wf, p, layout)
                torch_bwd = lambda: torch.autograd.grad(y, (xg, wg), dy, retain_graph=True)  # noqa: E731
                ours = lambda: vjp(dy, x, w, p, layout=layout)  # noqa: E731
                dw_only = lambda: bwd(dy, x, w, p, layout, need_dx=False)[1]  # noqa: E731
                xb = x.double() if layout == "bsf" else x.double().T
                dyb = dy.double() if layout == "bsf" else dy.double().T
                ref = torch.einsum("nikj,nilj->iklj", dyb.reshape(-1, a, b, d), xb.reshape(-1, a, c, d))
                del xb, dyb
                code = K._DTYPE_CODE[str(dt)[6:]]
                # dw32 before the cast to the input dtype: the float32 sums themselves
                dw32 = lambda: _dw32(K, dy, x, w, p, layout)  # noqa: E731
                err = _rel(dw32(), ref)
                err_k = _forced("tc", lambda: _rel(dw32(), ref))
                err_t = _rel(torch_bwd()[1].float(), ref)
                err_l = _forced(None, lambda: _rel(dw32(), ref), dw_ptrs=False)
                rows.append(dict(pattern=p, layout=layout, dtype=str(dt)[6:],
                                 dw_path=list(ks_path(p, batch, layout == "bsl", code, dw=True)),
                                 vjp_ms=median_ms(ours, reps=10), dw_ms=median_ms(dw_only, reps=10),
                                 dw_kernel_ms=_forced("tc", lambda: median_ms(dw_only, reps=10)),
                                 dw_loop_ms=_forced(None, lambda: median_ms(dw_only, reps=10), dw_ptrs=False),
                                 torch_ms=median_ms(torch_bwd, reps=10), b2b_vjp_ms=back_to_back_ms(ours, n=10),
                                 b2b_torch_ms=back_to_back_ms(torch_bwd, n=10),
                                 err_dw=err, err_dw_kernel=err_k, err_dw_torch=err_t, err_dw_loop=err_l))
                r = rows[-1]
                print(f"bwd {p} {layout} {r['dtype']}: vjp {r['vjp_ms']:.3f}, dw {r['dw_ms']:.3f} {r['dw_path']} "
                      f"(kernel {r['dw_kernel_ms']:.3f}, loop {r['dw_loop_ms']:.3f} err {err_l:.1e}), torch {r['torch_ms']:.3f}, b2b {r['b2b_vjp_ms']:.3f}/"
                      f"{r['b2b_torch_ms']:.3f}, dw err {err:.1e} (kernel {err_k:.1e}, torch {err_t:.1e})", flush=True)
    return rows


def _dw32(K, dy, x, w, p, layout):
    """The float32 dw sums (K._ks_bwd casts them to the input dtype)."""
    dw32 = torch.empty(*p, device="cuda", dtype=torch.float32)  # zeroed by the entry
    bl = layout == "bsl"
    K._ext.cuda_ks_backward(dy.data_ptr(), x.data_ptr(), w.data_ptr(), 0, dw32.data_ptr(), *p,
                            x.shape[1] if bl else x.shape[0], bl, K._DTYPE_CODE[str(x.dtype)[6:]], x.get_device(),
                            K._O.ks_code(_OPTS), K._a.stream(x))
    return dw32


def halves(out):
    torch.manual_seed(0)
    print(f"device {torch.cuda.get_device_name()}", flush=True)
    hr = half_rows()
    br = backward_rows()
    lines = ["| pattern | layout | dtype | ours ms (path) | kernels ms | bmm ms | x bmm | b2b ours / bmm | err / bmm err |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in hr:
        lines.append(f"| {r['pattern']} | {r['layout']} | {r['dtype']} | {r['ms']:.3f} ({r['path']}) | "
                     f"{r['kernels_ms']:.3f} | {r['bmm_ms']:.3f} | {r['bmm_ms'] / r['ms']:.2f} | "
                     f"{r['b2b_ms']:.3f} / {r['b2b_bmm_ms']:.3f} | {r['err']:.1e} / {r['err_bmm']:.1e} |")
    for dt in ("bfloat16", "float16"):
        s = [r["bmm_ms"] / r["ms"] for r in hr if r["dtype"] == dt]
        lines.append(f"{dt} forward: faster than bmm in {sum(v > 1 for v in s)}/{len(s)}, median {statistics.median(s):.2f}x")
    lines += ["", "| pattern | layout | dtype | vjp ms | dw ms (path, chunk) | dw loop ms | dw kernel ms | torch bwd ms | "
              "x torch | b2b vjp / torch | dw err: ours / kernel / torch |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in br:
        lines.append(f"| {r['pattern']} | {r['layout']} | {r['dtype']} | {r['vjp_ms']:.3f} | {r['dw_ms']:.3f} "
                     f"({r['dw_path'][0]}, {r['dw_path'][1]}) | {r['dw_loop_ms']:.3f} | {r['dw_kernel_ms']:.3f} | {r['torch_ms']:.3f} | "
                     f"{r['torch_ms'] / r['vjp_ms']:.2f} | {r['b2b_vjp_ms']:.3f} / {r['b2b_torch_ms']:.3f} | "
                     f"{r['err_dw']:.1e} / {r['err_dw_kernel']:.1e} / {r['err_dw_torch']:.1e} |")
    for dt in ("float32", "bfloat16"):
        s = [r["torch_ms"] / r["vjp_ms"] for r in br if r["dtype"] == dt]
        lines.append(f"{dt} backward: faster than torch autograd in {sum(v > 1 for v in s)}/{len(s)}, "
                     f"median {statistics.median(s):.2f}x")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "gpu_ks_halves.json"), "w") as fh:
        json.dump(dict(half=hr, backward=br), fh, indent=1, default=str)
    print("\n".join(lines))


BSF_PATS = [p for p in PATS if p[3] > 1]  # batch-first d > 1: the tr path


def _guard(name, fn):
    """fn() or None, printing the error (one failing section does not lose the others)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 (bench: report and go on)
        print(f"== {name} failed: {type(e).__name__}: {e}", flush=True)
        return None


def bsf_half_forward(batch=25088):
    """Half forward, batch-first d > 1: ours (default rule = tr), the FFMA kernels forced, bmm in
    the same dtype; per call and back to back; errors vs float64."""
    from strux import _cuda_ks as K
    rows = []
    for p in BSF_PATS:
        for dt in (torch.bfloat16, torch.float16):
            x, w, _ = _inputs(p, "bsf", dt, batch)
            wl, wf = bmm_operands(w, p)
            ours = lambda: mm(x, w, p)  # noqa: E731
            bmm = lambda: bmm_recipe(x, wl, wf, p, "bsf")  # noqa: E731
            ref = ref64(x, w, p, "bsf")
            err, err_bmm = _rel(ours(), ref), _rel(bmm(), ref)
            del ref
            name = str(dt)[6:]
            path = ks_path(p, batch, False, K._DTYPE_CODE[name])[0]
            r = dict(pattern=p, dtype=name, path=path, ms=median_ms(ours),
                     kernels_ms=_forced("tc", lambda: median_ms(ours, reps=5)), bmm_ms=median_ms(bmm),
                     b2b_ms=back_to_back_ms(ours), b2b_bmm_ms=back_to_back_ms(bmm), err=err, err_bmm=err_bmm)
            rows.append(r)
            print(f"fwd {p} bsf {name}: ours {r['ms']:.3f} ({path}), kernels {r['kernels_ms']:.3f}, bmm {r['bmm_ms']:.3f} "
                  f"(x{r['bmm_ms'] / r['ms']:.2f}), b2b {r['b2b_ms']:.3f}/{r['b2b_bmm_ms']:.3f}, err {err:.1e} (bmm {err_bmm:.1e})",
                  flush=True)
    return rows


def bsf_backward(batch=25088):
    """Backward, batch-first d > 1, fp32 / bf16 / fp16: ours vjp (default rule), dx alone, dw
    alone (default = tr) and on the FFMA kernel, vs torch autograd of the bmm recipe; dw32 errors
    vs float64 (||dw - dw64|| / ||dw64||)."""
    from strux import _cuda_ks as K
    rows = []
    for p in BSF_PATS:
        a, b, c, d = p
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            x, w, dy = _inputs(p, "bsf", dt, batch)
            xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
            wl, wf = bmm_operands(wg, p, contiguous=False)
            y = bmm_recipe(xg, wl, wf, p, "bsf")
            torch_bwd = lambda: torch.autograd.grad(y, (xg, wg), dy, retain_graph=True)  # noqa: E731
            ours = lambda: vjp(dy, x, w, p)  # noqa: E731
            dx_only = lambda: bwd(dy, x, w, p, "bsf", need_dw=False)[0]  # noqa: E731
            dw_only = lambda: bwd(dy, x, w, p, "bsf", need_dx=False)[1]  # noqa: E731
            ref = torch.einsum("nikj,nilj->iklj", dy.double().reshape(-1, a, b, d), x.double().reshape(-1, a, c, d))
            name = str(dt)[6:]
            code = K._DTYPE_CODE[name]
            dw32 = lambda: _dw32(K, dy, x, w, p, "bsf")  # noqa: E731
            err = _rel(dw32(), ref)
            err_k = _forced("tc", lambda: _rel(dw32(), ref))
            err_t = _rel(torch_bwd()[1].float(), ref)
            del ref
            r = dict(pattern=p, dtype=name, path=list(ks_path(p, batch, False, code)),
                     dw_path=list(ks_path(p, batch, False, code, dw=True)),
                     vjp_ms=median_ms(ours, reps=10), dx_ms=median_ms(dx_only, reps=10), dw_ms=median_ms(dw_only, reps=10),
                     dw_kernel_ms=_forced("tc", lambda: median_ms(dw_only, reps=5)),
                     vjp_kernels_ms=_forced("tc", lambda: median_ms(ours, reps=5)),
                     torch_ms=median_ms(torch_bwd, reps=10), b2b_vjp_ms=back_to_back_ms(ours, n=10),
                     b2b_torch_ms=back_to_back_ms(torch_bwd, n=10), err_dw=err, err_dw_kernel=err_k, err_dw_torch=err_t)
            rows.append(r)
            print(f"bwd {p} bsf {name}: vjp {r['vjp_ms']:.3f} (kernels {r['vjp_kernels_ms']:.3f}) dx {r['dx_ms']:.3f} "
                  f"dw {r['dw_ms']:.3f} {r['dw_path']} (kernel {r['dw_kernel_ms']:.3f}), torch {r['torch_ms']:.3f} "
                  f"(x{r['torch_ms'] / r['vjp_ms']:.2f}), b2b {r['b2b_vjp_ms']:.3f}/{r['b2b_torch_ms']:.3f}, "
                  f"dw err {err:.1e} (kernel {err_k:.1e}, torch {err_t:.1e})", flush=True)
    return rows


def dx_paths(batch=25088, layout="bsl", pats=PATS):
    """float32 dx alone with each path forced (tc / blas / stream) and the default, per call and
    back to back: checks backward_x's own rule (batch-last by default; batch-first d == 1 with
    layout="bsf" and those patterns)."""
    rows = []
    bl = layout == "bsl"
    for p in pats:
        x, w, dy = _inputs(p, layout, torch.float32, batch)
        dx_only = lambda: bwd(dy, x, w, p, layout, need_dw=False)[0]  # noqa: E731
        r = dict(pattern=p, layout=layout, path=ks_path(p, batch, bl, 0)[1])
        for name in ("auto", "tc", "blas", "stream"):
            path = None if name == "auto" else name
            r[name + "_path"] = _forced(path, lambda: ks_path(p, batch, bl, 0)[1])
            r[name] = (float("nan"),) * 2 if r[name + "_path"] == "n/a" else \
                _forced(path, lambda: (median_ms(dx_only, reps=10), back_to_back_ms(dx_only, n=10)))
        rows.append(r)
        print(f"dx {layout} {p}: default {r['path']} " + ", ".join(
            f"{n} [{r[n + '_path']}] {r[n][0]:.3f}/{r[n][1]:.3f}" for n in ("auto", "tc", "blas", "stream")), flush=True)
    return rows


def bsf_small():
    """Smaller batches, batch-first d > 1: forward and dw, tr forced vs the kernels forced, per call."""
    rows = []
    for p in [(1, 48, 48, 16), (2, 192, 48, 4), (1, 768, 192, 2), (4, 96, 96, 2)]:
        for batch in (256, 1024, 4096):
            for dt in (torch.float32, torch.bfloat16):
                x, w, dy = _inputs(p, "bsf", dt, batch)
                fwd = lambda: mm(x, w, p)  # noqa: E731
                dw_only = lambda: bwd(dy, x, w, p, "bsf", need_dx=False)[1]  # noqa: E731
                r = dict(pattern=p, batch=batch, dtype=str(dt)[6:],
                         fwd_tr=_forced("tr", lambda: median_ms(fwd, reps=10)), fwd_tc=_forced("tc", lambda: median_ms(fwd, reps=10)),
                         dw_tr=_forced("tr", lambda: median_ms(dw_only, reps=10)), dw_tc=_forced("tc", lambda: median_ms(dw_only, reps=10)))
                rows.append(r)
                print(f"small {p} {batch} {r['dtype']}: fwd tr {r['fwd_tr']:.3f} tc {r['fwd_tc']:.3f}; "
                      f"dw tr {r['dw_tr']:.3f} tc {r['dw_tc']:.3f}", flush=True)
    return rows


def bsf_halves(out):
    torch.manual_seed(0)
    print(f"device {torch.cuda.get_device_name()}", flush=True)
    data = dict(forward=_guard("forward", bsf_half_forward), backward=_guard("backward", bsf_backward),
                dx_bsl=_guard("dx_bsl", dx_paths), small=_guard("small", bsf_small))
    for key, dts in (("forward", ("bfloat16", "float16")), ("backward", ("float32", "bfloat16", "float16"))):
        rows = data[key] or []
        for dt in dts:
            s = [(r["bmm_ms"] / r["ms"]) if key == "forward" else (r["torch_ms"] / r["vjp_ms"])
                 for r in rows if r["dtype"] == dt]
            if s:
                print(f"{key} {dt}: faster than the baseline in {sum(v > 1 for v in s)}/{len(s)}, "
                      f"median {statistics.median(s):.2f}x, min {min(s):.2f}x")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "gpu_ks_bsf_halves.json"), "w") as fh:
        json.dump(data, fh, indent=1, default=str)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--variant", action="store_true", help="print forward times as JSON only")
    ap.add_argument("--bsf", action="store_true", help="the batch-first d > 1 table only")
    ap.add_argument("--halves", action="store_true", help="half-type forward and backward rows only")
    ap.add_argument("--quick", action="store_true", help="batch-last paths back to back only")
    ap.add_argument("--bsf-halves", action="store_true",
                    help="batch-first d > 1 halves / backward rows and the batch-last dx path check only")
    args = ap.parse_args()
    if args.bsf_halves:
        bsf_halves(args.out)
        return
    if args.halves:
        halves(args.out)
        return
    if args.quick:
        lines, data = quick()
        print(f"device {torch.cuda.get_device_name()}")
        print("\n".join(lines))
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "gpu_ks_quick.json"), "w") as fh:
            json.dump(data, fh, indent=1)
        return
    if args.variant:
        print(json.dumps(forward_times()))
        return
    if args.bsf:
        torch.manual_seed(0)
        print(f"device {torch.cuda.get_device_name()}", flush=True)
        prof = profile_bsf()
        tab = bsf_tr_table()
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "gpu_ks_bsf.json"), "w") as fh:
            json.dump(dict(table=tab, profile=prof), fh, indent=1)
        return
    from strux.bench.gpu_ks_scan import ceilings, ks_cases
    torch.manual_seed(0)
    bw, fl = ceilings()
    print(f"device {torch.cuda.get_device_name()}: copy {bw / 1e12:.2f} TB/s, fp32 {fl / 1e12:.1f} TFLOP/s", flush=True)
    rows = ks_cases(bw, fl, 25088, False)
    var = {"table": forward_times()}
    for path in ("tc", "blas", "stream", "tr"):
        var[path] = forced(_path_opts(path), forward_times)
    b2b = b2b_times()
    bsf_tr = bsf_tr_table(batches=(25088,))
    pick = {f"{p} {lay}": ks_path(p, 25088, lay == "bsl", 0)[0]
            for p in PATS for lay in ("bsf", "bsl")}
    vn = list(var)
    f32 = [x for x in rows if x.get("dtype") == "float32"]
    lines = ["| pattern | layout | ours ms | " + " | ".join(f"{v} ms (err64)" for v in vn) +
             " | bmm ms | dense ms | floor ms | bwd ms | x bmm | err vs fp32 dense | path |",
             "|---|---|---|" + "---|" * len(vn) + "---|---|---|---|---|---|---|"]
    nan = [float("nan"), float("nan")]
    for x in f32:
        key = f"{tuple(x['pattern'])} {x['layout']}"
        vs = " | ".join(f"{var[v].get(key, nan)[0]:.3f} ({var[v].get(key, nan)[1]:.1e})" for v in vn)
        lines.append(f"| {tuple(x['pattern'])} | {x['layout']} | {x['ms']:.3f} | {vs} | "
                     f"{x['bmm_ms']:.3f} | {x['dense_ms']:.3f} | {x['floor_ms']:.3f} | {x['bwd_ms']:.3f} | "
                     f"{x['speedup_vs_bmm']:.2f} | {x['rel_err_vs_dense']:.1e} | {pick.get(key)} |")
    for x in rows:
        if x.get("dtype") != "float32":
            lines.append(f"| {tuple(x['pattern'])} | bsl {x['dtype']} | {x['ms']:.3f} | | | | {x['floor_ms']:.3f} | | | |")
    for lay in ("bsf", "bsl"):
        s = [x["speedup_vs_bmm"] for x in f32 if x["layout"] == lay]
        lines.append(f"{lay}: faster than bmm in {sum(v > 1 for v in s)}/{len(s)}, median {statistics.median(s):.2f}x")
    for v in vn:
        s = [x["bmm_ms"] / var[v][f"{tuple(x['pattern'])} {x['layout']}"][0] for x in f32
             if f"{tuple(x['pattern'])} {x['layout']}" in var[v]]
        if s:
            lines.append(f"{v} forced: faster than bmm in {sum(u > 1 for u in s)}/{len(s)}")
    lines.append("back to back (ms per call, 20 calls between events): pattern layout ours / bmm (x bmm)"
                 " [forced blas / stream]")
    for k, (o, bm, bl, st) in b2b.items():
        lines.append(f"  {k}: {o:.3f} / {bm:.3f} ({bm / o:.2f}) [{bl:.3f} / {st:.3f}]")
    s = [x["speedup_vs_bmm"] for x in f32]
    lines.append(f"all: faster than bmm in {sum(v > 1 for v in s)}/{len(s)}, median {statistics.median(s):.2f}x")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_ks_perf.json"), "w") as fh:
        json.dump(dict(copy_bw=bw, fp32_flops=fl, rows=rows, variants=var, back_to_back=b2b, bsf_tr=bsf_tr), fh, indent=1, default=str)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
