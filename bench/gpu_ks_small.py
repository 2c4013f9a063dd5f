"""Small batches (inference, issue 15 deliver 3): the Monarch layers of the ViT-S/16 and
GPT-2-medium MLPs at batch 1, 8, 64, 256 through the forced small-batch path (options path
"small", factor by factor), through the default choice (strux's ks_chain as the plans pick),
and as dense F.linear, in one process.

Times: GPU time per call (strux.bench.timing.back_to_back_ms: calls queued behind a GPU sleep)
and per call with the host (time_ms), in ms. The floor is one read of both factors' weights,
of x and one write of y at the measured copy bandwidth; "% floor" = floor / GPU time. Per-factor
rows (small vs default) say which factor loses. Patterns: bench/e2e_ks_mlp.py mlp_pair.

Run: python bench/gpu_ks_small.py --out DIR [--dtypes float32,bfloat16] [--batches 1,8,64,256]
(PYTHONPATH=python). Writes DIR/ks_small.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os

import torch
import torch.nn.functional as F

from strux import _cuda_ks as K
from strux.bench import timing
from strux.bench.timing import back_to_back_ms, time_ms

# (name, n_in, n_out, s): mlp_pair(n_in, n_out, s) = [(1, n_out / nb, s, nb), (nb, s, s, 1)]
LAYERS = [("vit_s.fc1", 384, 1536, 32), ("vit_s.fc2", 1536, 384, 64),
          ("gpt2m.fc1", 1024, 4096, 32), ("gpt2m.fc2", 4096, 1024, 64)]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
SMALL = {"path": "small", "chain": "factors"}


def mlp_pair(n_in, n_out, s):
    nb = n_in // s
    return [(1, n_out // nb, s, nb), (nb, s, s, 1)]


def dense_of(ws, ps, n_in):
    """The dense (n_out, n_in) matrix of the chain, from its action on the identity."""
    eye = torch.eye(n_in, device="cuda", dtype=torch.float32)
    return K.ks_chain(eye, [w.float() for w in ws], ps).T.contiguous()


def gpu_and_host(fn):
    return back_to_back_ms(fn, n=20, reps=5, warm=3), time_ms(fn, warm=3, reps=10)[0]


def run(layers, batches, dtypes, bw):
    rows = []
    for name, n_in, n_out, s in layers:
        ps = mlp_pair(n_in, n_out, s)
        for dt in dtypes:
            tdt = DTYPES[dt]
            es = torch.empty((), dtype=tdt).element_size()
            ws = [(torch.randn(*p, device="cuda") / p[2] ** 0.5).to(tdt) for p in ps]
            W = dense_of(ws, ps, n_in).to(tdt)
            nnz = sum(w.numel() for w in ws)
            for batch in batches:
                x = torch.randn(batch, n_in, device="cuda").to(tdt)
                small = lambda: K.ks_chain(x, ws, ps, options=SMALL)  # noqa: E731
                default = lambda: K.ks_chain(x, ws, ps)  # noqa: E731
                dense = lambda: F.linear(x, W)  # noqa: E731
                ref = F.linear(x.double(), W.double())
                err = float((small().double() - ref).norm() / ref.norm())
                floor_ms = es * (nnz + batch * (n_in + n_out)) / bw * 1e3
                dense_floor_ms = es * (W.numel() + batch * (n_in + n_out)) / bw * 1e3
                r = {"layer": name, "patterns": ps, "dtype": dt, "batch": batch, "err_small": err,
                     "floor_ms": floor_ms, "dense_floor_ms": dense_floor_ms,
                     "default_chain": list(K.ks_chain_path(ps, batch, dtype=dt)),
                     "default_paths": [K.ks_paths(p, batch, dtype=dt)[0] for p in ps]}
                for key, fn in (("small", small), ("default", default), ("dense", dense)):
                    r[key + "_ms"], r[key + "_host_ms"] = gpu_and_host(fn)
                # per factor (K_2 first): small vs default, GPU time
                h = x
                r["factors"] = []
                for w, p in zip(ws[::-1], ps[::-1]):
                    hin = h
                    f_small = back_to_back_ms(lambda: K.ks_matmul(hin, w, p, options={"path": "small"}))
                    f_def = back_to_back_ms(lambda: K.ks_matmul(hin, w, p))
                    r["factors"].append({"pattern": p, "small_ms": f_small, "default_ms": f_def,
                                         "default_path": K.ks_paths(p, batch, dtype=dt)[0]})
                    h = K.ks_matmul(hin, w, p)
                rows.append(r)
    return rows


def table(rows):
    out = ["layer      dtype    batch | small ms  default ms  dense ms | dense/small dense/default "
           "| %floor small  dense | factor small/default (K2, K1)"]
    for r in rows:
        f = " ".join(f"{q['default_ms'] / q['small_ms']:.2f}" for q in r["factors"])
        out.append(f"{r['layer']:10s} {r['dtype']:8s} {r['batch']:5d} | {r['small_ms']:.4f}  {r['default_ms']:.4f}"
                   f"  {r['dense_ms']:.4f} | x{r['dense_ms'] / r['small_ms']:.2f}  x{r['dense_ms'] / r['default_ms']:.2f}"
                   f" | {100 * r['floor_ms'] / r['small_ms']:.0f}%  {100 * r['dense_floor_ms'] / r['dense_ms']:.0f}%"
                   f" | {f}" + ("" if r["err_small"] < 3e-2 else f"  ERR {r['err_small']:.1e}"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--batches", default="1,8,64,256")
    args = ap.parse_args()
    bw = timing.copy_bandwidth()
    rows = run(LAYERS, [int(v) for v in args.batches.split(",")], args.dtypes.split(","), bw)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ks_small.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_bw": bw, "rows": rows}, f, indent=1)
    print(f"ks small batches (GPU ms per call, back to back; copy bandwidth {bw / 1e12:.2f} TB/s)")
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
