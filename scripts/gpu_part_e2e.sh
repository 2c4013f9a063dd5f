#!/usr/bin/env bash
# GPU part "e2e" of scripts/gpu_session.sh (~200 s): issue 15's end-to-end MLP benchmark
# (bench/e2e_ks_mlp.py --quick: ViT-S/16 and GPT-2-medium MLP blocks and whole models, KSLinear
# chains against dense nn.Linear, float32 and bfloat16, inference and a training step), after its
# CPU-part tests and the fused ks tests. Table on stdout; e2e_ks_mlp.json under $OUT.
set -uo pipefail
source scripts/gpu_step.sh
step 60 "tests (e2e cpu part, ks fused)" bash -c 'python3 -m pytest -q -x -p no:cacheprovider tests/python/test_e2e_ks_mlp_cpu.py \
  tests/python/test_ks_fused_gpu.py > "$OUT/pytest.log" 2>&1'
tail -1 "$OUT/pytest.log"
step 200 "bench e2e_ks_mlp --quick" python3 bench/e2e_ks_mlp.py --out "$OUT" --quick
exit $rc
