#!/usr/bin/env bash
# GPU part "fcdense" of scripts/gpu_session.sh (limit ~300 s): the dense fftconv solver (Toeplitz
# blocks on tensor cores, plan algo 15 on mma.sync, 17 with the ungated forward on wgmma;
# bench/NOTES-gpu-fftconv-dense.md). Its tests and the fftconv
# GPU test files its plan wiring touches (tensor: the spectrum grid; four-step: the automatic
# gradient rule; blocks; the generic CUDA file), compute-sanitizer memcheck and racecheck on small
# forced calls, then bench/gpu_fftconv_dense.py (dense against the automatic choice) and
# bench/gpu_fftconv_percall.py (the per-call spectrum at FFT 256 / 1K). DENSE_ARGS: extra
# arguments of the dense bench (e.g. --quick). Logs and JSON under $OUT.
set -uo pipefail
source scripts/gpu_step.sh  # OUT, PYTHONPATH, rc and step()
step 150 "tests (dense)" python3 -m pytest -q -x -p no:cacheprovider tests/python/test_fftconv_dense_gpu.py \
  > "$OUT/pytest_dense.log" 2>&1
grep -E "^(FAILED|ERROR|E  )|passed|failed" "$OUT/pytest_dense.log" | head -16
SMALL='
import torch
from strux import _cuda_fftconv as F
for algo, mode, L, Lk in ((15, "causal", 301, 77), (15, "circular", 96, 96), (15, "causal", 33, 40),
                         (17, "causal", 301, 77), (17, "circular", 128, 128), (17, "causal", 2050, 129)):
    F.fftconv_algo = algo
    for dt in (torch.float16, torch.bfloat16):
        u = torch.randn(3, 2, L, device="cuda", dtype=dt)
        k = torch.randn(2, Lk, device="cuda", dtype=dt)
        g = torch.randn_like(u)
        F.fftconv(u, k, mode, g, g, k[:, 0].contiguous())
        F.fftconv(u, k, mode)
        F.fftconv_vjp(g, u, k, mode, g, g, k[:, 0].contiguous())
        F.fftconv_vjp(g, u, k, mode)
torch.cuda.synchronize()
'
for tool in memcheck racecheck; do
  step 40 "compute-sanitizer $tool (dense)" compute-sanitizer --tool $tool --error-exitcode 9 python3 -c "$SMALL" \
    > "$OUT/$tool.log" 2>&1
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/$tool.log" | tail -1
done
# FCDENSE_QUICK=1: only the dense tests, the sanitizers and the benches (the other files ran already)
[ "${FCDENSE_QUICK:-0}" = 1 ] || step 200 "tests (tensor, four-step, blocks, cuda fftconv)" python3 -m pytest -q -p no:cacheprovider \
  tests/python/test_fftconv_tensor_gpu.py tests/python/test_fftconv_fourstep_gpu.py \
  tests/python/test_fftconv_blocks_gpu.py tests/python/test_cuda_fftconv.py > "$OUT/pytest.log" 2>&1
[ -f "$OUT/pytest.log" ] && grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.log" | tail -12
step 150 "bench (bench/gpu_fftconv_dense.py ${DENSE_ARGS:-})" python3 -u bench/gpu_fftconv_dense.py "$OUT" \
  ${DENSE_ARGS:-}
[ "${FCDENSE_QUICK:-0}" = 1 ] || step 40 "bench (bench/gpu_fftconv_percall.py)" python3 bench/gpu_fftconv_percall.py "$OUT"
exit $rc
