"""End to end: the MLP blocks of a ViT-S/16 and of a GPT-2-medium-size layer with their dense
projections replaced by KSLinear chains (strux.torch), inference and one training step, float32
and bfloat16, against the dense nn.Linear model in the same process (random weights).

Run (GPU machine; timm and transformers are needed there and nowhere else):
    python bench/e2e_ks_mlp.py --out DIR [--quick]
Writes DIR/e2e_ks_mlp.json and prints a table. Variants per model and dtype:
  dense      the model as built (nn.Linear / transformers' Conv1D projections);
  ks         every MLP projection a KSLinear (two KS factors), the chain's default rule;
  ks_fused   the same KSLinear weights with options={"chain": "fused"} (one kernel per forward);
and the MLP blocks alone (input (batch, tokens, width)) as well as the whole model.
Times: CUDA events, median (strux.bench.timing); a training step is forward + loss + backward +
SGD step. float32 runs with TF32 off (the ksmm paper's float32 comparison).

Patterns (mlp_pair): the Monarch pair of strux.patterns.monarch generalised to n_in -> n_out:
K_2 = (nb, s, s, 1) (nb blocks of s x s, s = n_in / nb), K_1 = (1, n_out / nb, s, nb); for a
square n = s^2 it is monarch(n, s). ViT-S/16: 384 -> 1536 with s = 32, 1536 -> 384 with s = 64;
GPT-2 medium: 1024 -> 4096 with s = 32, 4096 -> 1024 with s = 64.

The model-free part (mlp_pair, ks_like, replace_projections) is importable without timm /
transformers and runs on the CPU (tests: tests/python/test_e2e_ks_mlp_cpu.py).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time

import torch
from torch import nn

NOT_FUSED: list = []  # projections of the ks_fused variant that run factor by factor, and why

# the projections' block sizes s per (n_in, n_out) of the two models
BLOCK = {(384, 1536): 32, (1536, 384): 64, (1024, 4096): 32, (4096, 1024): 64}


def mlp_pair(n_in: int, n_out: int, s: int) -> list:
    """[K_1, K_2] patterns (strux product order) of a Monarch-style pair n_in -> n_out: K_2 =
    (nb, s, s, 1) block-diagonal, K_1 = (1, n_out / nb, s, nb), nb = n_in / s."""
    if n_in % s:
        raise ValueError(f"argument 's': expected a divisor of n_in = {n_in}, got {s}")
    nb = n_in // s
    if n_out % nb:
        raise ValueError(f"argument 'n_out': expected a multiple of n_in / s = {nb}, got {n_out}")
    return [(1, n_out // nb, s, nb), (nb, s, s, 1)]


def _features(m):
    """(in, out) of an nn.Linear or a transformers Conv1D (weight (in, out), y = x W + b); else None."""
    if isinstance(m, nn.Linear):
        return m.in_features, m.out_features
    if type(m).__name__ == "Conv1D" and hasattr(m, "nf") and m.weight.dim() == 2:
        return m.weight.shape[0], m.weight.shape[1]
    return None


def ks_like(m, options=None, blocks=BLOCK):
    """A KSLinear with the in / out features, bias presence, dtype and device of m (random
    factors, strux's init)."""
    from strux.torch import KSLinear
    n_in, n_out = _features(m)
    s = blocks.get((n_in, n_out))
    if s is None:
        raise ValueError(f"argument 'blocks': no block size for a {n_in} -> {n_out} projection")
    w = m.weight
    ps = mlp_pair(n_in, n_out, s)
    if options and options.get("chain") == "fused" and w.is_cuda:
        from strux import _cuda_ks
        try:  # a pair the fused kernel cannot run keeps the factor-by-factor forward (recorded)
            _cuda_ks.ks_chain_path(ps, 1024, dtype=str(w.dtype).split(".")[-1], options=options)
        except ValueError as e:
            NOT_FUSED.append(f"{n_in} -> {n_out} {w.dtype}: {e}")
            options = None
    return KSLinear(ps, bias=m.bias is not None, device=w.device, dtype=w.dtype, options=options)


def replace_projections(model: nn.Module, names, options=None, blocks=BLOCK, share_from=None) -> int:
    """Replaces every nn.Linear / Conv1D child named in `names` of an MLP module (a module whose
    class name contains "mlp": timm's Mlp, transformers' GPT2MLP; GPT-2's attention has a c_proj
    too) by ks_like(it). share_from: a model already replaced the same way whose KSLinear weights
    are copied (so that two variants compute the same function). Returns the number replaced."""
    count = 0
    src = dict(share_from.named_modules()) if share_from is not None else {}
    for parent_name, parent in list(model.named_modules()):
        if "mlp" not in type(parent).__name__.lower():
            continue
        for name, child in list(parent.named_children()):
            if name in names and _features(child) is not None:
                ks = ks_like(child, options, blocks)
                full = f"{parent_name}.{name}" if parent_name else name
                if full in src:
                    ks.load_state_dict(src[full].state_dict())
                setattr(parent, name, ks)
                count += 1
    return count


# ---- the models (GPU machine) --------------------------------------------------------------------

def vit_model():
    """timm's vit_small_patch16_224, random weights (no download). MLP projections: blocks.*.mlp.fc1 / fc2."""
    try:
        import timm
    except ImportError as e:
        raise RuntimeError("timm is not installed: bench/e2e_ks_mlp.py needs it for the ViT-S/16 "
                           "(it is installed on the GPU machine only)") from e
    return timm.create_model("vit_small_patch16_224", pretrained=False), ("fc1", "fc2")


def gpt2_model():
    """A GPT-2-medium-size layer (transformers GPT2Model, n_embd 1024, 16 heads, one layer, random
    weights). MLP projections: h.0.mlp.c_fc / c_proj (Conv1D)."""
    try:
        from transformers import GPT2Config, GPT2Model
    except ImportError as e:
        raise RuntimeError("transformers is not installed: bench/e2e_ks_mlp.py needs it for the GPT-2 "
                           "layer (it is installed on the GPU machine only)") from e
    cfg = GPT2Config(n_embd=1024, n_layer=1, n_head=16, n_positions=1024, attn_pdrop=0.0, embd_pdrop=0.0,
                     resid_pdrop=0.0)
    return GPT2Model(cfg), ("c_fc", "c_proj")


def _mlps(model):
    """The MLP submodules (timm: blocks.*.mlp, transformers: h.*.mlp)."""
    return [m for n, m in model.named_modules() if n.endswith(".mlp")]


# ---- timing -------------------------------------------------------------------------------------

def _time(fn, reps):
    from strux.bench.timing import median_ms
    return median_ms(fn, reps=reps, warm=3)


def _step_fn(model, make_input, loss_of):
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-6)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model(make_input()))
        loss.backward()
        opt.step()
    return step


def bench_model(tag, build, inp, dtype, reps, names_out):
    """Rows for one model and dtype: whole model and MLP blocks alone, inference and training
    step, per variant."""
    torch.manual_seed(0)
    base, names = build()
    base = base.to(device="cuda", dtype=dtype)
    variants = {"dense": base}
    ks = copy.deepcopy(base)
    n = replace_projections(ks, names)
    variants["ks"] = ks
    fused = copy.deepcopy(base)
    replace_projections(fused, names, options={"chain": "fused"}, share_from=ks)
    variants["ks_fused"] = fused
    names_out.append(f"{tag}: {n} projections replaced")
    x = inp(dtype)
    rows = []
    ref = None
    for vname, model in variants.items():
        try:  # one failing variant is recorded; the others still run
            rows.append(_bench_variant(tag, vname, model, x, dtype, reps, ref))
        except Exception as e:  # noqa: BLE001  (a bench: whatever failed is reported, the run goes on)
            names_out.append(f"{tag} {dtype} {vname}: FAILED: {type(e).__name__}: {e}")
            print(f"{tag} {dtype} {vname}: FAILED: {type(e).__name__}: {e}", flush=True)
            continue
        if vname == "ks":
            ref = rows[-1].pop("_y")
        rows[-1].pop("_y", None)
    d = {r["variant"]: r for r in rows}
    for r in rows:
        for k in ("infer_ms", "train_step_ms", "mlp_infer_ms", "mlp_train_step_ms"):
            r[k.replace("_ms", "_vs_dense")] = d["dense"][k] / r[k] if "dense" in d else None
    del variants, base, ks, fused
    torch.cuda.empty_cache()
    return rows


def _bench_variant(tag, vname, model, x, dtype, reps, ref):
    """One variant's row (its inference output in "_y", float64, for the next variant's error)."""
    model.train(False)
    with torch.no_grad():
        y = model(x)
        y = (y.last_hidden_state if hasattr(y, "last_hidden_state") else y).double()
        err = ((y - ref).norm() / ref.norm()).item() if ref is not None and vname == "ks_fused" else None
        infer = _time(lambda: model(x), reps)
    mlp = _mlps(model)[0]
    h = torch.randn(*x_shape_of(tag, x, model), device="cuda", dtype=dtype)
    with torch.no_grad():
        mlp_infer = _time(lambda: mlp(h), reps)
    model.train(True)
    loss_of = (lambda y: (y.last_hidden_state if hasattr(y, "last_hidden_state") else y).float().square().mean())
    train = _time(_step_fn(model, lambda: x, loss_of), max(5, reps // 2))
    hg = h.detach().requires_grad_(True)
    mlp_train = _time(_step_fn(mlp, lambda: hg, lambda y: y.float().square().mean()), max(5, reps // 2))
    return dict(model=tag, dtype=str(dtype).split(".")[-1], variant=vname, infer_ms=infer,
                train_step_ms=train, mlp_infer_ms=mlp_infer, mlp_train_step_ms=mlp_train,
                fused_vs_ks_rel_err=err, params=sum(p.numel() for p in model.parameters()), _y=y)


def x_shape_of(tag, x, model):
    """The MLP blocks' input shape: (batch, tokens, width)."""
    if tag.startswith("vit"):
        return (x.shape[0], 197, 384)
    return (x.shape[0], x.shape[1], 1024)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--vit-batch", type=int, default=128)   # 128 images: 25216 tokens per MLP
    ap.add_argument("--gpt-batch", type=int, default=16)    # 16 x 1024 tokens
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    reps = 5 if args.quick else 15
    out, notes, t0 = [], [], time.time()
    models = [
        ("vit_s16", vit_model, lambda dt: torch.randn(args.vit_batch, 3, 224, 224, device="cuda", dtype=dt)),
        ("gpt2_medium_layer", gpt2_model,
         lambda dt: torch.randint(0, 50257, (args.gpt_batch, 1024), device="cuda")),
    ]
    os.makedirs(args.out, exist_ok=True)

    def save():  # after every model and dtype: a later failure or timeout keeps what ran
        with open(os.path.join(args.out, "e2e_ks_mlp.json"), "w") as fh:
            json.dump(dict(device=torch.cuda.get_device_name(), rows=out, notes=notes,
                           not_fused=sorted(set(NOT_FUSED)), vit_batch=args.vit_batch, gpt_batch=args.gpt_batch),
                      fh, indent=1)

    def ratio(v):
        return "-" if v is None else f"{v:.2f}x"

    for tag, build, inp in models:
        for dtype in (torch.float32, torch.bfloat16):
            try:
                rows = bench_model(tag, build, inp, dtype, reps, notes)
            except Exception as e:  # noqa: BLE001  (a missing package, a failed build: recorded, the rest goes on)
                notes.append(f"{tag} {dtype}: FAILED: {type(e).__name__}: {e}")
                print(f"{tag} {dtype}: FAILED: {type(e).__name__}: {e}", flush=True)
                torch.cuda.empty_cache()
                continue
            out += rows
            for r in rows:
                print(f"{tag} {r['dtype']} {r['variant']}: infer {r['infer_ms']:.3f} ms ({ratio(r['infer_vs_dense'])}), "
                      f"train step {r['train_step_ms']:.3f} ({ratio(r['train_step_vs_dense'])}), MLP infer "
                      f"{r['mlp_infer_ms']:.3f} ({ratio(r['mlp_infer_vs_dense'])}), MLP train "
                      f"{r['mlp_train_step_ms']:.3f} ({ratio(r['mlp_train_step_vs_dense'])})"
                      + (f", fused vs ks err {r['fused_vs_ks_rel_err']:.1e}" if r["fused_vs_ks_rel_err"] is not None
                         else "") + f" [{time.time() - t0:.0f} s]", flush=True)
            save()
    save()
    for n in notes:
        print(n)
    return 0 if out else 1


if __name__ == "__main__":
    sys.exit(main())
