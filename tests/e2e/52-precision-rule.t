#!/bin/bash
# The precision rule (stark_rules.precision_flagged) on emulated matmul
# arithmetic from K = 1024 to 65536: honest float32 orders and 3xTF32 never
# flagged, TF32/float16/bfloat16 operands and float16 accumulation always,
# 3xTF32 on one truncating tensor-core accumulator from K = 4096 on
# (tests/helpers/precision_rule.py).  About 15 s.
cd "$(dirname "$0")/../.." || exit 1
PY=$(scripts/find-python) || { echo "1..0 # skip no python with torch"; exit 0; }
exec "$PY" tests/helpers/precision_rule.py
