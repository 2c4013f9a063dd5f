"""The `strux` command line: info, bench, verify."""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time


def _info(args) -> int:
    import strux
    i = strux.info()
    print(f"strux {i['version']}")
    print(f"backends compiled in: {', '.join(i['backends'])}")
    print(f"HDF5 support: {'yes' if i['hdf5'] else 'no'}")
    devs = i["cuda_devices"]
    print(f"CUDA devices: {len(devs)}" + "".join(f"\n  {n}: {d}" for n, d in enumerate(devs)))
    print(f"CPU threads: {i['cpu_threads']}")
    return 0


def _use_gpu(device: str) -> bool:
    if device == "cpu":
        return False
    from strux import _cuda
    ok = _cuda.available()
    try:
        import torch  # the GPU baselines are PyTorch recipes
        ok = ok and torch.cuda.is_available()
    except ImportError:
        ok = False
    if device == "cuda" and not ok:
        raise RuntimeError("--device cuda: needs strux built with CUDA, a visible GPU and PyTorch")
    return ok


def _bench_gpu(args, families) -> int:
    import strux
    from strux.bench import gpu, gpu_ks_scan
    out = {"strux": strux.info()}
    ft = [f for f in families if f in ("fftconv", "toeplitz")]
    if ft:
        res = gpu.run(quick=args.quick, only=ft[0] if len(ft) == 1 else None)
        print(gpu.markdown(res))
        out["fftconv_toeplitz"] = res
    ks = [f for f in families if f in ("ks", "scan")]
    if ks:
        res = gpu_ks_scan.run(quick=args.quick, families=ks)
        print(gpu_ks_scan.table(res["meta"], res["rows"]))
        out["ks_scan"] = res
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def _bench(args) -> int:
    import strux
    from strux import bench
    families = args.family or bench.FAMILIES
    for f in families:
        if f not in bench.FAMILIES:
            print(f"strux bench: unknown family {f!r}; expected one of {', '.join(bench.FAMILIES)}", file=sys.stderr)
            return 2
    if _use_gpu(args.device):
        return _bench_gpu(args, families)
    if args.threads:
        strux.set_num_threads(args.threads)
    cases = bench.collect(families)
    rows = bench.run(cases, progress=not args.quiet)
    print(bench.table(rows))
    if args.json:
        meta = {"strux": strux.info(), "host": platform.node(), "machine": platform.machine(),
                "date": time.strftime("%Y-%m-%d %H:%M:%S"), "results": rows}
        with open(args.json, "w") as f:
            json.dump(meta, f, indent=2)
        print(f"wrote {args.json}", file=sys.stderr)
    bad = [r for r in rows if not r["verified"]]
    if bad:
        print(f"strux bench: {len(bad)} case(s) failed verification", file=sys.stderr)
        return 1
    return 0


def _verify(args) -> int:
    from strux import verify
    ok = verify.run()
    print("all checks passed" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="strux", description="fast structured linear operators")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="version, backends, devices, threads").set_defaults(fn=_info)
    b = sub.add_parser("bench", help="every family at default sizes, verified, against the plain recipe")
    b.add_argument("--json", metavar="FILE", help="write the results as JSON")
    b.add_argument("--family", action="append", help="only this family (repeatable)")
    b.add_argument("--threads", type=int, default=0, help="CPU threads (default: all)")
    b.add_argument("--quiet", action="store_true", help="no progress lines")
    b.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto (default): the GPU when strux has CUDA, a GPU is visible and PyTorch is installed")
    b.add_argument("--quick", action="store_true", help="GPU: small sizes (a smoke run)")
    b.set_defaults(fn=_bench)
    sub.add_parser("verify", help="correctness self-check").set_defaults(fn=_verify)
    args = p.parse_args(argv)
    try:
        return args.fn(args)
    except (ValueError, TypeError, RuntimeError, OSError) as e:
        print(f"strux {args.cmd}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
