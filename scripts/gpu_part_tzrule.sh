#!/usr/bin/env bash
# GPU part "tzrule" (about 60 s, after the session's build): whole toeplitz calls at seven shapes,
# cuBLAS (algo 0) against the own kernels (algo 2), the automatic choice and the 16-bit F̂
# (bench/gpu_toeplitz_algo_rule.py). JSON lines in $OUT/algo_rule.jsonl.
set -uo pipefail
OUT=${OUT:-out/tzrule}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-$PWD/python:$PWD/tests/python}
python3 bench/gpu_toeplitz_algo_rule.py "$OUT/algo_rule.jsonl"
