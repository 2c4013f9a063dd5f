#!/usr/bin/env bash
# GPU part "ksfused" of scripts/gpu_session.sh (limit ~170 s): the fused Monarch pair, round 3
# (bench/NOTES-gpu-ks-scan.md, "ks-fused round 3"). The fused-pair GPU tests and the CPU model of
# the Monarch kernel's indexing, compute-sanitizer racecheck on Monarch-kernel calls whose blocks
# loop over several tiles, then bench/gpu_ks_fused.py --quick: monarch1024 and monarch4096 at batch
# 25088, bf16 and float32, both layouts, the fused pair against the factor-by-factor chain, two
# single-factor calls, dense and bmm in the same process, with the HBM floor fraction and
# pair_kernel's tb sweep (forced tb = the old kernel). Logs and gpu_ks_fused.json under $OUT.
set -uo pipefail
source scripts/gpu_step.sh  # OUT, PYTHONPATH, rc and step()
step 75 "tests (fused pair, Monarch kernel model)" python3 -m pytest -q -rs -p no:cacheprovider \
  tests/python/test_ks_fused_gpu.py tests/python/test_ks_fused_mon_model.py > "$OUT/pytest_fused.log" 2>&1
grep -E "^(FAILED|ERROR|E  )|passed|failed" "$OUT/pytest_fused.log" | head -20
SMALL='
import torch
from strux import _cuda_ks as K
from strux.patterns import monarch
for n, nb in ((1024, 32), (256, 16)):
    ps = monarch(n, nb)
    for dt in (torch.bfloat16, torch.float16):
        ws = [torch.randn(*p, device="cuda").to(dt) for p in ps]
        for batch in (37, 132 * 16 * 2 + 5):  # one partial tile; blocks with two or three tiles
            x = torch.randn(batch, n, device="cuda").to(dt)
            K.ks_chain(x, ws, ps, options={"chain": "fused"})
torch.cuda.synchronize()
'
step 30 "compute-sanitizer racecheck (Monarch kernel)" compute-sanitizer --tool racecheck --error-exitcode 9 \
  python3 -c "$SMALL" > "$OUT/racecheck.log" 2>&1
grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$OUT/racecheck.log" | tail -1
step 60 "bench (bench/gpu_ks_fused.py --quick)" python3 -u bench/gpu_ks_fused.py --out "$OUT" --quick \
  > "$OUT/bench.log" 2>&1
grep -E "^device|^\| pair|^\| monarch|^batch 25088" "$OUT/bench.log"
exit $rc
