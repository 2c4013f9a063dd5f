#!/usr/bin/env bash
# The distributed block Toeplitz on GPUs (strux::dist / strux.dist, NCCL): build, test, benchmark.
# On a machine with 2 GPUs, OpenMPI (mpirun, mpicc, mpi.h), PyTorch with its nvidia-nccl wheel:
#   scripts/gpu_dist.sh [FHAT_GB] [--no-bench] [--quick]
# FHAT_GB (default 8): GB of F̂ per GPU of the weak-scaling runs, and in all of the strong one.
# Steps (output under $OUT, default ./out: gpu_dist.log, build.log, dist_*.json, dist_scaling.json):
#   1. build with CUDA + NCCL (NCCL_ROOT = the nvidia-nccl wheel's folder) through scripts/gpu_build.sh;
#   2. the C++ MPI test program on 1 and 2 GPUs (--cuda; alone, it also drives every GPU from one
#      process: BlockToeplitzGroup) and on the CPU, 2 ranks;
#   3. the Python cases (tests/mpi/dist_cases.py) under mpirun -np 2 on the GPUs (needs mpi4py), and
#      pytest tests/python/test_dist*.py (BlockToeplitzGroup with torch on 2 GPUs in one process);
#   4. benchmarks: 1 GPU with FHAT_GB, 2 GPUs weak (FHAT_GB each), 2 GPUs strong (FHAT_GB in all):
#      first the C++ program (dist_cpp_*.json: wall, broadcast, local, reduce), then the Python one
#      (needs mpi4py; dist_*.json adds FFT / product / IFFT estimates) with 2 GPUs weak and
#      chunks=1 (no overlap) too; efficiencies in dist_scaling.json. NT (environment): time steps.
# mpi4py: when it is missing, it is built from an sdist in .deps/pip (put there beforehand by
# `scripts/gpu_dist.sh --fetch` on a machine with internet) against this machine's mpicc.
# MPIRUN_ARGS (environment) is added to every mpirun (e.g. "--mca btl ^openib").
set -uo pipefail
if [ "${1:-}" = "--fetch" ]; then
  mkdir -p .deps/pip && python3 -m pip download -q --no-binary :all: --no-deps -d .deps/pip mpi4py
  ls -l .deps/pip; exit 0
fi
FHAT_GB=8; BENCH=1; QUICK=""
for a in "$@"; do
  case $a in --no-bench) BENCH=0 ;; --quick) QUICK=--quick ;; *) FHAT_GB=$a ;; esac
done
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ROOT=$PWD
exec > >(tee -a "$OUT/gpu_dist.log") 2>&1
echo "== $(date -u) $(hostname), F̂ $FHAT_GB GB"
nvidia-smi --query-gpu=name,memory.total --format=csv || true
nvidia-smi topo -m || true
MPIRUN=(mpirun --allow-run-as-root --oversubscribe ${MPIRUN_ARGS:-})
mpirun --version | head -1; which mpicc || echo "== no mpicc: the MPI headers may be missing"

NCCL_ROOT=$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null \
  || python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])" 2>/dev/null)
echo "== NCCL_ROOT=$NCCL_ROOT"; ls "$NCCL_ROOT/include" "$NCCL_ROOT/lib" 2>/dev/null

if ! python3 -c "import mpi4py.MPI" 2>/dev/null; then
  echo "== mpi4py missing: building it from .deps/pip"
  python3 -m pip install -q --no-index --find-links .deps/pip --no-binary mpi4py mpi4py \
    || echo "== mpi4py could not be installed (run 'scripts/gpu_dist.sh --fetch' where there is internet, carry .deps)"
fi

GPU_CMAKE_ARGS=(-DSTRUX_BUILD_MPI_TESTS=ON -DSTRUX_MPI=ON -DSTRUX_NCCL=ON -DNCCL_ROOT="$NCCL_ROOT")
source scripts/gpu_build.sh
gpu_build || exit 1
grep "strux:" "$OUT/build.log" | tail -3
# The wheel's libnccl.so.2 for the Python module and the test program.
export LD_LIBRARY_PATH=$NCCL_ROOT/lib:$LD_LIBRARY_PATH

rc=0
step() {  # name, timeout, command...
  local name=$1 t=$2; shift 2
  echo "== $name"
  timeout "$t" "$@" || { echo "== $name FAILED (exit $?)"; rc=1; }
}
X=(-x LD_LIBRARY_PATH -x PYTHONPATH -x OMP_NUM_THREADS=4)
step "C++ tests, 1 GPU" 300 "${MPIRUN[@]}" -np 1 "${X[@]}" build/gpu/strux_dist_tests --cuda
step "C++ tests, 2 GPUs (NCCL)" 300 "${MPIRUN[@]}" -np 2 "${X[@]}" build/gpu/strux_dist_tests --cuda
step "C++ tests, CPU, 2 ranks (MPI)" 300 "${MPIRUN[@]}" -np 2 "${X[@]}" build/gpu/strux_dist_tests
if python3 -c "import mpi4py.MPI, strux.dist; assert strux.dist.available()"; then
  step "Python cases, 2 GPUs" 600 "${MPIRUN[@]}" -np 2 "${X[@]}" python3 tests/mpi/dist_cases.py --device cuda
  step "Python cases, 1 GPU" 600 "${MPIRUN[@]}" -np 1 "${X[@]}" python3 tests/mpi/dist_cases.py --device cuda --quick
  step "pytest test_dist*.py (mpirun inside; one process on 2 GPUs)" 900 python3 -m pytest -q -rs -p no:cacheprovider \
    tests/python/test_dist.py tests/python/test_dist_group.py
else
  echo "== strux.dist not available from Python (mpi4py or the _dist module missing): Python steps skipped"; rc=1
fi

if [ $BENCH = 1 ]; then
  # The C++ benchmark (no mpi4py needed): 1 GPU with FHAT_GB, 2 GPUs weak, 2 GPUs strong.
  NT=${NT:-1000}
  n_for() { python3 -c "import math; print(int(math.sqrt($1 * 1e9 / (($NT + 1) * 8))))"; }
  N1=$(n_for "$FHAT_GB"); N2=$(n_for "2 * $FHAT_GB")
  [ -n "$QUICK" ] && NT=64 N1=256 N2=362
  CB=(build/gpu/strux_dist_bench)
  step "C++ bench 1 GPU" 600 bash -c "${MPIRUN[*]} -np 1 ${X[*]} ${CB[*]} $NT $N1 $N1 --cuda ${DIST_CPP_BENCH_ARGS:-} > $OUT/dist_cpp_np1.json"
  step "C++ bench 2 GPUs weak" 600 bash -c "${MPIRUN[*]} -np 2 ${X[*]} ${CB[*]} $NT $N2 $N2 --cuda ${DIST_CPP_BENCH_ARGS:-} > $OUT/dist_cpp_np2_weak.json"
  step "C++ bench 2 GPUs strong" 600 bash -c "${MPIRUN[*]} -np 2 ${X[*]} ${CB[*]} $NT $N1 $N1 --cuda ${DIST_CPP_BENCH_ARGS:-} > $OUT/dist_cpp_np2_strong.json"
  cat "$OUT"/dist_cpp_*.json
fi

if [ $BENCH = 1 ] && python3 -c "import mpi4py.MPI" 2>/dev/null; then
  B=(python3 -m strux.bench.dist --device cuda --nt "${NT:-1000}" --fhat-gb "$FHAT_GB" $QUICK ${DIST_BENCH_ARGS:-})
  step "bench 1 GPU" 600 "${MPIRUN[@]}" -np 1 "${X[@]}" "${B[@]}" --scale weak --json "$OUT/dist_np1.json"
  step "bench 2 GPUs weak" 600 "${MPIRUN[@]}" -np 2 "${X[@]}" "${B[@]}" --scale weak --json "$OUT/dist_np2_weak.json"
  step "bench 2 GPUs strong" 600 "${MPIRUN[@]}" -np 2 "${X[@]}" "${B[@]}" --scale strong --json "$OUT/dist_np2_strong.json"
  step "bench 2 GPUs weak, chunks=1 (no overlap)" 600 "${MPIRUN[@]}" -np 2 "${X[@]}" "${B[@]}" --scale weak --chunks 1 \
    --json "$OUT/dist_np2_weak_chunks1.json"
  python3 - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
def load(n):
    p = os.path.join(out, n)
    return json.load(open(p)) if os.path.exists(p) else None
one, weak, strong, w1 = (load(n) for n in ("dist_np1.json", "dist_np2_weak.json", "dist_np2_strong.json",
                                          "dist_np2_weak_chunks1.json"))
res = {}
for op in ("matvec", "rmatvec"):
    r = {}
    if one and weak:
        r["weak_efficiency"] = one[op]["wall_s"] / weak[op]["wall_s"]
    if one and strong:
        r["strong_speedup"] = one[op]["wall_s"] / strong[op]["wall_s"]
    if weak and w1:
        r["overlap_gain"] = w1[op]["wall_s"] / weak[op]["wall_s"]
    for name, run in (("np1", one), ("np2_weak", weak), ("np2_strong", strong), ("np2_weak_chunks1", w1)):
        if run:
            r[name] = {"grid": run["grid"], "shape": run["shape"], "fhat_gb_per_rank": run["fhat_gb_per_rank_max"],
                       **{k: v for k, v in run[op].items()}}
    res[op] = r
json.dump(res, open(os.path.join(out, "dist_scaling.json"), "w"), indent=1)
for op, r in res.items():
    print(op, {k: round(v, 3) for k, v in r.items() if isinstance(v, float)})
EOF
fi
echo "== done, rc=$rc"
exit $rc
