"""The `strux` command line: info, bench, verify.

Exit codes: 0 success; 1 a check or a benchmark's verification failed, or an error (message on
stderr); 2 bad usage (unknown command or option); 130 interrupted (Ctrl-C).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

EXIT_CODES = """exit codes:
  0    success
  1    a check or a verification failed, or an error (the message names the cause)
  2    bad usage: unknown command, option or value
  130  interrupted (Ctrl-C)"""


def _info(args) -> int:
    import strux
    i = strux.info()
    print(f"strux {i['version']}")
    print(f"backends compiled in: {', '.join(i['backends'])}")
    print(f"HDF5 support: {'yes' if i['hdf5'] else 'no'}")
    print(f"distributed operators (strux.dist): {'MPI' if i['dist']['mpi'] else 'no'}"
          + (", NCCL" if i['dist']['nccl'] else ""))
    devs = i["cuda_devices"]
    print(f"CUDA devices: {len(devs)}" + "".join(f"\n  {n}: {d}" for n, d in enumerate(devs)))
    print(f"CPU threads: {i['cpu_threads']} (CPUs available: {i['available_cpus']})")
    print(f"FFT planning: {i['fft_planning']}, wisdom folder: {i['wisdom_dir'] or 'none'}")
    return 0


def _threads(text: str) -> int:
    """--threads: an integer in [0, max] (0 = the default), checked by argparse (bad usage, exit 2)."""
    from strux import _ext
    hi = int(_ext.max_threads)
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= hi:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, {hi}] (0 = default), got {text!r}")
    return n


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
    from strux.bench import SCHEMA_VERSION, gpu, gpu_ks_scan, report
    out = {"strux": strux.info()}
    load_before = report.loadavg()
    tables = []
    ft = [f for f in families if f in ("fftconv", "toeplitz")]
    if ft:
        res = gpu.run(quick=args.quick, only=ft[0] if len(ft) == 1 else None)
        tables.append(gpu.markdown(res))
        print(tables[-1])
        out["fftconv_toeplitz"] = res
    ks = [f for f in families if f in ("ks", "scan")]
    if ks:
        res = gpu_ks_scan.run(quick=args.quick, families=ks)
        tables.append(gpu_ks_scan.table(res["meta"], res["rows"]))
        print(tables[-1])
        out["ks_scan"] = res
    if args.json:
        head = report.meta(out["strux"], strux.get_num_threads(), args.quick, "cuda", load_before)
        with open(args.json, "w") as f:
            json.dump({**head, "schema": "strux-bench-gpu", "schema_version": SCHEMA_VERSION, **out}, f,
                      indent=1, default=str)
        md = os.path.splitext(args.json)[0] + ".md"
        with open(md, "w") as f:  # the same tables, for people
            f.write(f"# strux bench (GPU), {head['date']}\n\n" + "\n\n".join(str(t) for t in tables) + "\n")
        print(f"wrote {args.json}\nwrote {md}", file=sys.stderr)
    return 0


def _bench(args) -> int:
    import strux
    from strux import bench
    from strux.bench import report
    families = args.family or bench.FAMILIES
    if "toeplitz-dist" in families:  # collective, under mpirun: its own options (strux.bench.dist)
        if len(families) > 1:
            print("strux bench: --family toeplitz-dist runs alone (under mpirun)", file=sys.stderr)
            return 2
        from strux.bench import dist
        return dist.run(args.extra + ["--device", args.device] + (["--json", args.json] if args.json else [])
                        + (["--quick"] if args.quick else []))
    if args.extra:
        print(f"strux bench: unrecognized arguments: {' '.join(args.extra)}", file=sys.stderr)
        return 2
    for f in families:
        if f not in bench.FAMILIES:
            print(f"strux bench: unknown family {f!r}; expected one of {', '.join(bench.FAMILIES)}", file=sys.stderr)
            return 2
    if args.json:
        report.check_writable(args.json)  # before the run, not after it
    if args.threads is not None:
        strux.set_num_threads(args.threads)
    if _use_gpu(args.device):
        return _bench_gpu(args, families)
    load_before = report.loadavg()
    cases = bench.collect(families, quick=args.quick)
    threads = strux.get_num_threads()
    rows = bench.run(cases, progress=not args.quiet, quick=args.quick, threads=threads)
    print(bench.table(rows))
    if args.json:
        head = report.meta(strux.info(), threads, args.quick, "cpu", load_before)
        for path in report.write_all(args.json, head, rows):
            print(f"wrote {path}", file=sys.stderr)
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
    from strux import __version__ as version
    p = argparse.ArgumentParser(prog="strux", description="fast structured linear operators",
                                epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"strux {version}")
    sub = p.add_subparsers(dest="cmd", metavar="{info,bench,verify}")
    sub.add_parser("info", help="version, backends, devices, threads").set_defaults(fn=_info)
    b = sub.add_parser("bench", help="every family, verified, timed against named baselines",
                       description="Every family's cases, verified against float64, timed alternately with "
                       "their baselines (numpy, and scipy.fft with workers=-1 on the CPU); min/median/max per row.",
                       epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("--json", metavar="FILE", help="write the results as JSON, plus FILE's stem .md (a report) "
                   "and .png (a plot, when matplotlib is installed); the folder is checked before the run")
    b.add_argument("--family", action="append", help="only this family (repeatable); toeplitz-dist (alone, under "
                   "mpirun) takes the options of `python -m strux.bench.dist --help` after these")
    b.add_argument("--threads", type=_threads, default=None, help="CPU threads (default: the CPUs available)")
    b.add_argument("--quiet", action="store_true", help="no progress lines")
    b.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto (default): the GPU when strux has CUDA, a GPU is visible and PyTorch is installed")
    b.add_argument("--quick", action="store_true", help="small sizes and short timings, on every device (a smoke run)")
    b.set_defaults(fn=_bench)
    sub.add_parser("verify", help="correctness self-check", epilog=EXIT_CODES,
                   formatter_class=argparse.RawDescriptionHelpFormatter).set_defaults(fn=_verify)
    args, extra = p.parse_known_args(argv)
    if extra and args.cmd != "bench":
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    if args.cmd is None:  # bare `strux`: say what there is
        p.print_help()
        return 0
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        print(f"\nstrux {args.cmd}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, RuntimeError, OSError, MemoryError) as e:
        print(f"strux {args.cmd}: error: {e}", file=sys.stderr)
        return 1


def entry() -> None:
    """Console-script entry: Ctrl-C during imports also exits with 130 and no traceback."""
    try:
        code = main()
    except KeyboardInterrupt:
        print("\nstrux: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    entry()
