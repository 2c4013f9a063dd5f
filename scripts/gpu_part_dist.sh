#!/usr/bin/env bash
# GPU part "dist" (run by scripts/gpu_session.sh after its build, OUT = this part's folder; about
# 300 s, under 330): the distributed block Toeplitz on 1 and 2 GPUs of this machine.
#   1. the dist targets with NCCL (torch's nvidia-nccl wheel) and the C++ MPI test program into
#      build/gpu (the session builds without tests): strux_dist_tests, strux_dist_bench, _dist;
#   2. tests: the C++ program under mpirun -np 2 (NCCL; -np 1 on one GPU), pytest test_dist*.py;
#   3. strong scaling of matvec / rmatvec (Nt = 1000, Nd = Nm = 2499, float32, space-major,
#      distributed vectors): 1 GPU against 2 GPUs, every phase timed (broadcast, FFT, product,
#      IFFT, reduce); then on 2 GPUs side by side in one run: the cost model's grid, the other
#      grid shape, and chunks = 1 against the automatic chunks (strux_dist_bench --compare);
#   4. the inverse problem (examples/inverse_problem) on 1 GPU and on 2 GPUs (--gpus 2:
#      strux.dist.BlockToeplitzGroup in one process): time per Hessian product through strux
#      against time-stepping the PDE forward and adjoint with torch sparse on the same GPU.
# On a machine with one GPU the 2-GPU steps are skipped (said so); with 4 GPUs, step 3 adds every
# grid of 4 ranks side by side and weak scaling to 4 GPUs (Nd = Nm = twice the 1-GPU side). Summary last; logs and JSON
# under $OUT.
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-$ROOT/out/dist}
mkdir -p "$OUT"
T0=$(date +%s)
el() { echo "$(( $(date +%s) - T0 ))"; }
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
echo "== dist part: $NGPU GPU(s), $(date -u)"
SUMMARY=()
say() { SUMMARY+=("$*"); echo "$*"; }
MPIRUN=(mpirun --allow-run-as-root --oversubscribe ${MPIRUN_ARGS:-})
rc=0
step() {  # name, timeout, command...: output to $OUT/<name>.log
  local name=$1 t=$2; shift 2
  local t1; t1=$(date +%s)
  timeout -k 5 "$t" "$@" > "$OUT/$name.log" 2>&1
  local r=$?
  [ $r = 0 ] || rc=1
  say "$name: rc=$r in $(( $(date +%s) - t1 )) s$([ $r = 124 ] && echo ' (TIMEOUT)')"
  return $r
}

# ---- 1. build the dist targets with NCCL -------------------------------------------------------
NCCL_ROOT=$(python3 -c "import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])" 2>/dev/null)
echo "== NCCL_ROOT=$NCCL_ROOT"
export LD_LIBRARY_PATH=$NCCL_ROOT/lib:${LD_LIBRARY_PATH:-}
export PYTHONPATH=${PYTHONPATH:-$ROOT/python:$ROOT/tests/python}
DIST_ARGS=(-DSTRUX_MPI=ON -DSTRUX_NCCL=ON -DNCCL_ROOT="$NCCL_ROOT" -DSTRUX_BUILD_MPI_TESTS=ON)
t1=$(date +%s)
if [ ! -f build/gpu/CMakeCache.txt ]; then  # run alone: the whole build first
  GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF "${DIST_ARGS[@]}")
  source scripts/gpu_build.sh
  gpu_build > "$OUT/build_dist.log" 2>&1
fi
if cmake -S . -B build/gpu "${DIST_ARGS[@]}" >> "$OUT/build_dist.log" 2>&1 &&
   cmake --build build/gpu --target strux_dist_tests strux_dist_bench _dist >> "$OUT/build_dist.log" 2>&1; then
  say "build of the dist targets (NCCL, tests): ok in $(( $(date +%s) - t1 )) s"
else
  say "build of the dist targets FAILED after $(( $(date +%s) - t1 )) s:"
  grep -E "error|Error|FAILED" -A3 "$OUT/build_dist.log" | tail -20
  printf '%s\n' "${SUMMARY[@]}"
  exit 1
fi
X=(-x LD_LIBRARY_PATH -x PYTHONPATH -x OMP_NUM_THREADS=4)

# ---- 2. tests --------------------------------------------------------------------------------
NP=$(( NGPU >= 2 ? 2 : 1 ))
step "cpp_tests_np$NP" 150 "${MPIRUN[@]}" -np $NP "${X[@]}" build/gpu/strux_dist_tests --cuda
grep -E "passed|failed|FAIL" "$OUT/cpp_tests_np$NP.log" | tail -4
if [ "$NGPU" -ge 2 ]; then  # one process driving every GPU: the program's group cases (NCCL in one process)
  step cpp_tests_np1 150 "${MPIRUN[@]}" -np 1 "${X[@]}" build/gpu/strux_dist_tests --cuda
  grep -E "passed|failed|FAIL" "$OUT/cpp_tests_np1.log" | tail -4
fi
if [ "$NGPU" -ge 4 ]; then
  step cpp_tests_np4 150 "${MPIRUN[@]}" -np 4 "${X[@]}" build/gpu/strux_dist_tests --cuda
  grep -E "passed|failed|FAIL" "$OUT/cpp_tests_np4.log" | tail -4
fi
# DIST_SKIP (environment): space-separated steps to leave out of a short round: pytest, bench, inverse.
skip() { [[ " ${DIST_SKIP:-} " == *" $1 "* ]]; }
if skip pytest; then say "pytest_dist: skipped (DIST_SKIP)"; else
  step pytest_dist 120 python3 -m pytest -q -x -rs -p no:cacheprovider tests/python/test_dist.py tests/python/test_dist_group.py
  tail -3 "$OUT/pytest_dist.log"
fi

# ---- 3. strong scaling, every phase; grid and chunks side by side --------------------------------
# 50 GB of F̂ on one GPU (plus the blocks while it is built): the H200's 141 GB. A GPU with less
# memory (H100) takes Nd = Nm = 1767 (25 GB), which is not the shape of bench/RESULTS.md.
MEM_MB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
if [ "${MEM_MB:-0}" -ge 120000 ]; then SHAPE=(1000 2499 2499); else SHAPE=(1000 1767 1767); fi
say "benchmark shape Nt Nd Nm = ${SHAPE[*]} (GPU memory ${MEM_MB:-?} MiB)"
CB=(build/gpu/strux_dist_bench "${SHAPE[@]}" --cuda --reps 10)
if skip bench; then say "bench: skipped (DIST_SKIP)"; else
step bench_np1 40 bash -c "${MPIRUN[*]} -np 1 ${X[*]} ${CB[*]} > $OUT/bench_np1.json"
if [ "$NGPU" -ge 2 ]; then
  step bench_np2_compare 60 bash -c "${MPIRUN[*]} -np 2 ${X[*]} ${CB[*]} --compare > $OUT/bench_np2.jsonl"
  # Weak scaling: the same F̂ bytes per GPU as the 1-GPU run (Nd = Nm = √2 × the 1-GPU side).
  WSHAPE=(1000 $(python3 -c "print(round(${SHAPE[1]} * 2 ** 0.5))") $(python3 -c "print(round(${SHAPE[2]} * 2 ** 0.5))"))
  step bench_np2_weak 60 bash -c "${MPIRUN[*]} -np 2 ${X[*]} build/gpu/strux_dist_bench ${WSHAPE[*]} --cuda --reps 10 > $OUT/bench_np2_weak.json"
else
  say "bench 2 GPUs: skipped (this machine has $NGPU GPU)"
fi
if [ "$NGPU" -ge 4 ]; then  # 4 GPUs: every grid of 4 ranks side by side; weak: Nd = Nm = 2 × the 1-GPU side
  step bench_np4_compare 90 bash -c "${MPIRUN[*]} -np 4 ${X[*]} ${CB[*]} --compare > $OUT/bench_np4.jsonl"
  W4=(1000 $(( SHAPE[1] * 2 )) $(( SHAPE[2] * 2 )))
  step bench_np4_weak 90 bash -c "${MPIRUN[*]} -np 4 ${X[*]} build/gpu/strux_dist_bench ${W4[*]} --cuda --reps 10 > $OUT/bench_np4_weak.json"
fi
fi
python3 - "$OUT" <<'EOF' | tee "$OUT/bench_summary.txt"
import json, os, sys
out = sys.argv[1]
def lines(n):
    p = os.path.join(out, n)
    if not os.path.exists(p):
        return []
    return [json.loads(l) for l in open(p) if l.strip().startswith("{")]
one = lines("bench_np1.json")
two = lines("bench_np2.jsonl")
four = lines("bench_np4.jsonl")
for n, weak in ((2, lines("bench_np2_weak.json")), (4, lines("bench_np4_weak.json"))):
    if not (one and weak):
        continue
    for op in ("matvec", "rmatvec"):
        w = weak[0]
        print(f"weak efficiency {op} (1 GPU {one[0]['shape']} / {n} GPUs {w['shape']} grid {w['grid'][0]}x{w['grid'][1]}, "
              f"F̂ {w.get('fhat_gb_per_rank', 0):.1f} GB per GPU): {one[0][op]['wall_s'] / w[op]['wall_s']:.3f}  (goal 0.9)")
def ph(r):
    return " ".join(f"{k} {r[k + '_s'] * 1e3:.3f}" for k in ("broadcast", "fft", "product", "ifft", "reduce")
                    if r.get(k + "_s", 0) > 0)
for run in one + two + four:
    for op in ("matvec", "rmatvec"):
        r = run[op]
        print(f"{run['ranks']} GPU grid {run['grid'][0]}x{run['grid'][1]} chunks {run['chunks']} {op}: "
              f"{r['wall_s'] * 1e3:.3f} ms  [{ph(r)}]")
def both(r):
    return r["matvec"]["wall_s"] + r["rmatvec"]["wall_s"]
for n, runs, goal in ((2, two, 1.8), (4, four, 3.4)):
    if not (one and runs):
        continue
    m = runs[0]
    for op in ("matvec", "rmatvec"):
        print(f"strong speedup {op} (1 GPU / {n} GPUs, model's grid and chunks): "
              f"{one[0][op]['wall_s'] / m[op]['wall_s']:.3f}x  (goal {goal}x)")
    print(f"model picks grid {m['grid'][0]}x{m['grid'][1]} chunks {m['chunks']}: matvec+rmatvec "
          f"{both(m) * 1e3:.3f} ms (modelled {m.get('modelled_s', 0) * 1e3:.3f})")
    for run in runs[1:]:
        print(f"  vs grid {run['grid'][0]}x{run['grid'][1]} chunks {run['chunks']}: {both(run) * 1e3:.3f} ms "
              f"(modelled {run.get('modelled_s', 0) * 1e3:.3f}) = {both(run) / both(m):.3f}x the pick's time")
    best = min(runs, key=both)
    print("model's pick is the fastest measured" if best is m else
          f"FASTEST measured: grid {best['grid'][0]}x{best['grid'][1]} chunks {best['chunks']}")
EOF

# ---- 4. the inverse problem on 1 and 2 GPUs --------------------------------------------------------
IP=(python3 examples/inverse_problem/run.py --device cuda --n 640 --nc 64 --sensors 256 --nt 200
    --out "$OUT/inverse")
if skip inverse; then say "inverse problem: skipped (DIST_SKIP)"; else
step inverse_1gpu 60 "${IP[@]}"
if [ "$NGPU" -ge 2 ]; then
  step inverse_2gpu 60 "${IP[@]}" --gpus 2
  # Larger: 1024 sensors, F̂ 13.5 GB (complex128), where the product outweighs the group's copies.
  IPL=(python3 examples/inverse_problem/run.py --device cuda --n 640 --nc 64 --sensors 1024 --nt 200
       --out "$OUT/inverse_large")
  # Optional (its failure or timeout does not fail the part): only where both runs fit in ~330 s.
  if [ "$(el)" -lt 215 ]; then
    rc_before=$rc
    step inverse_large_1gpu 55 "${IPL[@]}" && step inverse_large_2gpu 55 "${IPL[@]}" --gpus 2
    rc=$rc_before
  else
    say "larger inverse problem: skipped (part at $(el) s)"
  fi
else
  say "inverse problem on 2 GPUs: skipped (this machine has $NGPU GPU)"
fi
fi
python3 - "$OUT/inverse" "$OUT/inverse_large" <<'EOF' | tee "$OUT/inverse_summary.txt"
import glob, json, os, sys
for p in sorted(glob.glob(os.path.join(sys.argv[1], "results-*.json")) + glob.glob(os.path.join(sys.argv[2], "results-*.json"))):
    r = json.load(open(p))
    print(f"{os.path.basename(os.path.dirname(p))}/{os.path.basename(p)}: {r['cells']} cells, Nt {r['Nt']} Nd {r['Nd']} Nm {r['Nm']}, F on "
          f"{r.get('devices_for_F', 1)} GPU(s): Hessian strux {r['hessian_fft_s'] * 1e3:.2f} ms vs PDE "
          f"stepping {r['hessian_pde_s'] * 1e3:.1f} ms ({r['speedup']:.0f}x), F m {r['matvec_fft_s'] * 1e3:.2f} ms "
          f"vs forward PDE {r['forward_pde_s'] * 1e3:.1f} ms, build F {r['build_F_s']:.1f} s, CG {r['cg_iterations']} "
          f"it in {r['cg_s']:.2f} s, recovery error {r['recovery_rel_error']:.4f}, Hessian check "
          f"{r['hessian_check_rel']:.1e}")
EOF

echo "== summary (dist part, $(el) s)"
printf '%s\n' "${SUMMARY[@]}"
cat "$OUT/bench_summary.txt" "$OUT/inverse_summary.txt" 2>/dev/null
exit $rc
