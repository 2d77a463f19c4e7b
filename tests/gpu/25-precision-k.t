#!/bin/bash
# The precision rule on the GPU's own matmul arithmetic across K (1024 to
# 65536), outside stark: fp32 SGEMM and 3xTF32 with its MMA accumulator
# promoted every k-tile are never flagged, cuBLAS TF32 and a TF32 wmma
# kernel always are, 3xTF32 carried in one tensor-core accumulator is from
# K = 4096 on (tests/gpu/integrity/precision_k.py says why).  About a
# minute on an H100.  Skips where no CUDA device is usable.
cd "$(dirname "$0")/../.." || exit 1
PY=$(scripts/find-python) || { echo "1..0 # skip no python with torch"; exit 0; }
exec "$PY" tests/gpu/integrity/precision_k.py
