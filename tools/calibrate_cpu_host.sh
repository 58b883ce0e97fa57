#!/usr/bin/env bash
# Measure what the cpu-host simulator profile is fitted from, three rounds
# (docs/simulate.md, "Calibration"), then fit it and compare its predictions
# with the measured pp512 / tg64 of the two models:
#   tools/calibrate_cpu_host.sh BUILD SMOLLM2.gguf TINYLLAMA-Q4_0.gguf OUT.json [LOG]
# BUILD holds staticlm and tests/bench_kernels (cmake --build BUILD --target
# bench_kernels). Takes about 4 minutes on 2 idle cores; the load (uptime) is
# logged with each round: measure on an idle machine.
set -euo pipefail
[ $# -ge 4 ] || { sed -n 2,9p "$0"; exit 2; }
BUILD=$1 S=$2 T=$3 OUT=$4 LOG=${5:-calibrate.log}
HERE=$(cd "$(dirname "$0")/.." && pwd)
B="$BUILD/staticlm"
ST="$HERE/models/stories260K.bin" TOK="$HERE/models/tok512.bin"
{
  echo "== kernels $(uptime)"
  "$BUILD/tests/bench_kernels" avx512 q4_0_r16 q5_0_r16 q4_k_r16 q6_k_r16 q8_0_r16
  for r in 1 2 3; do
    echo "== round $r $(uptime)"
    "$B" bench -m "$ST" -z "$TOK" -p 0 -n 0 -t 2 -r 1 --no-profile --bw-mib 1024 2>&1 | grep bandwidth
    "$B" bench -m "$ST" -z "$TOK" -p 0 -n 0 -t 2 -r 1 --no-profile --bw-mib 128 2>&1 | grep bandwidth
    "$B" bench -m "$ST" -z "$TOK" -p 0 -n 64 -t 2 -r 3 --bw-mib 0 2>&1 | grep -E "tg64|runtime" | grep "|"
    "$B" bench -m "$S" -p 64 -n 0 -t 2 -r 3 --no-profile --bw-mib 0 2>&1 | grep "pp64"
    "$B" bench -m "$S" -p 64 -n 0 -d 448 -t 2 -r 3 --no-profile --bw-mib 0 2>&1 | grep "pp64"
    "$B" bench -m "$T" -p 64 -n 0 -t 2 -r 3 --no-profile --bw-mib 0 2>&1 | grep "pp64"
    echo "-- validation $(uptime)"
    "$B" bench -m "$S" -p 512 -n 64 -t 2 -r 1 --no-profile --bw-mib 0 2>&1 | grep -E "pp512|tg64" | grep "|"
    "$B" bench -m "$T" -p 512 -n 64 -t 2 -r 1 --no-profile --bw-mib 0 2>&1 | grep -E "pp512|tg64" | grep "|"
  done
  echo "== done $(uptime)"
} 2>&1 | tee "$LOG"
python3 "$HERE/tools/calibrate_cpu_host.py" "$LOG" "$OUT" "$B" "$S" "$T" "$ST"
