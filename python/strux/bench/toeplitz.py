"""toeplitz benchmark cases: BlockToeplitz matvec / rmatvec vs the plain numpy FFT recipe.

Both sides precompute the operator spectrum once (outside the timed call):
    Fhat = np.fft.rfft(blocks, n=2*Nt, axis=0)                       (complex64)
    matvec:  np.fft.irfft(np.einsum('fdm,fm->fd', Fhat, np.fft.rfft(m, n=2*Nt, axis=0)),
                          n=2*Nt, axis=0)[:Nt]
    rmatvec: np.fft.irfft(np.einsum('fdm,fd->fm', Fhat.conj(), np.fft.rfft(d, n=2*Nt, axis=0)),
                          n=2*Nt, axis=0)[:Nt]
(the conjugate is precomputed too). A second baseline does the same with scipy.fft (workers=-1,
every core) and a batched np.matmul per frequency. The float64 reference is the numpy recipe in
float64.
Bytes: the stored spectrum (nfreq*Nd*Nm complex) plus the vector read and the vector written,
the least any product must move.
"""
from __future__ import annotations

import math

import numpy as np

from .case import Case


def _fft_flops(n: int) -> float:
    return 2.5 * n * math.log2(max(n, 2))  # real FFT of length n, the usual 5/2 n log2 n count


def _case(op_name: str, Nt: int, Nd: int, Nm: int, dtype=np.float32, seed=0) -> Case:
    import strux

    rng = np.random.default_rng(seed)
    blocks = (rng.standard_normal((Nt, Nd, Nm)) / math.sqrt(Nm * Nt)).astype(dtype)
    n = 2 * Nt
    cdt = np.complex64 if np.dtype(dtype) == np.float32 else np.complex128
    Fhat = np.fft.rfft(blocks, n=n, axis=0).astype(cdt)
    Fhat_conj = Fhat.conj()
    Fhat64 = np.fft.rfft(blocks.astype(np.float64), n=n, axis=0)
    op = strux.BlockToeplitz(blocks)
    adjoint = op_name == "rmatvec"
    x = rng.standard_normal((Nt, Nd if adjoint else Nm)).astype(dtype)
    x64 = x.astype(np.float64)

    if adjoint:
        run = lambda: op.rmatvec(x)  # noqa: E731
        baseline = lambda: np.fft.irfft(np.einsum("fdm,fd->fm", Fhat_conj, np.fft.rfft(x, n=n, axis=0)),  # noqa: E731
                                        n=n, axis=0)[:Nt]
        reference = lambda: np.fft.irfft(np.einsum("fdm,fd->fm", Fhat64.conj(), np.fft.rfft(x64, n=n, axis=0)),  # noqa: E731
                                         n=n, axis=0)[:Nt]
    else:
        run = lambda: op.matvec(x)  # noqa: E731
        baseline = lambda: np.fft.irfft(np.einsum("fdm,fm->fd", Fhat, np.fft.rfft(x, n=n, axis=0)),  # noqa: E731
                                        n=n, axis=0)[:Nt]
        reference = lambda: np.fft.irfft(np.einsum("fdm,fm->fd", Fhat64, np.fft.rfft(x64, n=n, axis=0)),  # noqa: E731
                                         n=n, axis=0)[:Nt]

    import scipy.fft as sf

    F_sp = Fhat_conj.transpose(0, 2, 1) if adjoint else Fhat  # (nfreq, n_out, n_in)
    scipy_recipe = lambda: sf.irfft(np.matmul(F_sp, sf.rfft(x, n=n, axis=0, workers=-1)[:, :, None])[:, :, 0],  # noqa: E731
                                    n=n, axis=0, workers=-1)[:Nt]
    nfft = op._plan.nfft
    nfreq = nfft // 2 + 1
    item = np.dtype(dtype).itemsize
    nbytes = 2 * item * nfreq * Nd * Nm + item * Nt * (Nd + Nm)
    flops = 8.0 * nfreq * Nd * Nm + (Nd + Nm) * _fft_flops(nfft)
    return Case(
        family="toeplitz",
        name=f"{op_name} Nt={Nt} Nd={Nd} Nm={Nm} R=1 time-major {np.dtype(dtype).name}",
        strux=run,
        baseline=baseline,
        baseline_name="numpy rfft(2Nt) + einsum over precomputed Fhat",
        bytes=nbytes,
        flops=flops,
        tol=1e-4,
        reference=reference,
        extra={"nfft": nfft, "Nt": Nt, "Nd": Nd, "Nm": Nm},
        more_baselines=[("scipy.fft rfft(2Nt) workers=-1 + matmul over precomputed Fhat", scipy_recipe)],
    )


def cases(quick: bool = False) -> list[Case]:
    Nt, Nd, Nm = (64, 4, 32) if quick else (512, 16, 256)
    return [_case("matvec", Nt, Nd, Nm), _case("rmatvec", Nt, Nd, Nm)]


# ---- precision: every configuration's time and error, and the measured Pareto front ---------------

def _timer(device: str):
    if device == "cuda":
        import torch
        return torch.cuda.synchronize
    return lambda: None


def precision_front(Nt: int = 512, Nd: int = 16, Nm: int = 256, *, dtype: str = "float32", device: str = "cpu",
                    R: int = 1, repeat: int = 7, inner: int | None = None, seed: int = 0) -> dict:
    """Times matvec and rmatvec for every configuration of strux.toeplitz.precision_candidates
    (device="cuda": the GPU's) at one shape and vector dtype, measures each one's relative error
    against the float64 operator on the same inputs, and marks the measured Pareto front (no
    other configuration both faster and more accurate). Also lists the model's bound, the cost
    model's bytes, and what tol= would choose for each measured error level."""
    import time

    import strux
    from strux import toeplitz as T

    rng = np.random.default_rng(seed)
    blocks = (rng.standard_normal((Nt, Nd, Nm)) / math.sqrt(Nm * Nt)).astype(dtype)
    shape_m = (Nt, Nm) if R == 1 else (Nt, Nm, R)
    shape_d = (Nt, Nd) if R == 1 else (Nt, Nd, R)
    m = rng.standard_normal(shape_m).astype(dtype)
    d = rng.standard_normal(shape_d).astype(dtype)
    ref = strux.BlockToeplitz(blocks.astype(np.float64))
    want_m, want_d = ref.matvec(m.astype(np.float64)), ref.rmatvec(d.astype(np.float64))
    conv = lambda x: x  # noqa: E731
    back = lambda x: x  # noqa: E731
    if device == "cuda":
        import torch
        conv = lambda x: torch.as_tensor(x, device="cuda")  # noqa: E731
        back = lambda x: x.double().cpu().numpy()  # noqa: E731
    sync = _timer(device)
    bk, mk, dk = conv(blocks), conv(m), conv(d)
    rows = []
    for c in T.precision_candidates(cuda=device == "cuda"):
        op = strux.BlockToeplitz(bk, precision=c)
        row = {"precision": op.precision, "bound": T.error_estimate(c, dtype, Nt, Nd, Nm),
               "bytes": T.product_bytes(c, dtype, Nt, Nd, Nm, R)}
        for name, f, x, want in (("matvec", op.matvec, mk, want_m), ("rmatvec", op.rmatvec, dk, want_d)):
            y = f(x)
            row[f"{name}_error"] = float(np.linalg.norm(np.asarray(back(y), dtype=np.float64) - want) /
                                         np.linalg.norm(want))
            n_in = inner or max(1, int(2e-2 / max(_one(f, x, sync), 1e-6)))
            ts = []
            for _ in range(repeat):
                sync()
                t0 = time.perf_counter()
                for _ in range(n_in):
                    f(x)
                sync()
                ts.append((time.perf_counter() - t0) / n_in)
            row[f"{name}_s"] = float(np.median(ts))
        row["error"] = max(row["matvec_error"], row["rmatvec_error"])
        row["time_s"] = row["matvec_s"] + row["rmatvec_s"]
        rows.append(row)
    for r in rows:
        r["pareto"] = not any(o is not r and o["time_s"] <= r["time_s"] and o["error"] <= r["error"] and
                              (o["time_s"] < r["time_s"] or o["error"] < r["error"]) for o in rows)
        r["within_bound"] = r["error"] <= r["bound"]
    rows.sort(key=lambda r: r["time_s"])
    choices = {}
    for tol in (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-9, 1e-12):
        try:
            choices[f"{tol:g}"] = T.choose_precision(tol, dtype, Nt, Nd, Nm, R, cuda=device == "cuda")
        except ValueError:
            choices[f"{tol:g}"] = None
    return {"Nt": Nt, "Nd": Nd, "Nm": Nm, "R": R, "dtype": dtype, "device": device, "rows": rows,
            "tol_choices": choices}


def _one(f, x, sync) -> float:
    import time
    f(x)
    sync()
    t0 = time.perf_counter()
    f(x)
    sync()
    return time.perf_counter() - t0


def _short(p: dict) -> str:
    return f"fft {p['fft'][0]} / product {p['product'][0]} ({p['fhat']}) / ifft {p['ifft'][0]}"


def front_markdown(res: dict) -> str:
    """The precision_front result as a markdown table."""
    out = [f"Nt={res['Nt']} Nd={res['Nd']} Nm={res['Nm']} R={res['R']} {res['dtype']} on {res['device']}", "",
           "| configuration | matvec ms | rmatvec ms | error (max) | model bound | bytes (model) | Pareto |",
           "|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        out.append(f"| {_short(r['precision'])} | {1e3 * r['matvec_s']:.3f} | {1e3 * r['rmatvec_s']:.3f} | "
                   f"{r['error']:.2e} | {r['bound']:.2e} | {r['bytes'] / 1e6:.1f} MB | {'yes' if r['pareto'] else ''} |")
    out.append("")
    out.append("tol= chooses: " + "; ".join(f"{k}: {_short(v) if v else 'none'}" for k, v in res["tol_choices"].items()))
    return "\n".join(out)


def main(argv=None) -> int:
    """python -m strux.bench.toeplitz --precision [--device cuda] [--Nt N --Nd N --Nm N --R N] [--json FILE]"""
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m strux.bench.toeplitz")
    p.add_argument("--precision", action="store_true", required=True,
                   help="every precision configuration's time and error vs float64, and the Pareto front")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--Nt", type=int, default=512)
    p.add_argument("--Nd", type=int, default=16)
    p.add_argument("--Nm", type=int, default=256)
    p.add_argument("--R", type=int, default=1)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--json", metavar="FILE")
    a = p.parse_args(argv)
    res = precision_front(a.Nt, a.Nd, a.Nm, dtype=a.dtype, device=a.device, R=a.R, repeat=a.repeat)
    print(front_markdown(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
