#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one call to make on a machine with an NVIDIA GPU (docs/gpu.md, "Not yet measured on a
# GPU"): runs tests/gpu/run-on-gpu.sh run (builds from source unless .gpu-carry/ travelled, then
# the gpu_device tests, the no-device tests with a GPU present, the GPU benchmark and the
# PyTorch example) under one overall time limit, then prints on stdout the test verdicts and
# the bandwidth figures as JSON, so that the tail of the call's output holds the results.
#
#   here:  tests/gpu/run-on-gpu.sh prepare
#   there: run(command="tests/gpu/device_check.sh", carry=[".gpu-carry"], timeout_s=590)
#
# Environment: CXLT_DEVICE_CHECK_LIMIT_S (overall limit, default 560 s), OUT (results folder,
# default ./gpu-results; the device tool sets it and brings its files back).
# Exit status: 0 when every step passed, 1 when one failed, 124 when the limit cut the run.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LIMIT=${CXLT_DEVICE_CHECK_LIMIT_S:-560}
export OUT="${OUT:-$ROOT/gpu-results}"
mkdir -p "$OUT"

echo "device_check: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), limit ${LIMIT} s, results in $OUT"
timeout --kill-after=10 "$LIMIT" "$ROOT/tests/gpu/run-on-gpu.sh" run
rc=$?
[ $rc -eq 137 ] && rc=124

echo
echo "== test verdicts (GoogleTest)"
for log in "$OUT"/gtest-device.log "$OUT"/gtest-nodevice.log; do
  [ -f "$log" ] || { echo "$(basename "$log"): not run"; continue; }
  echo "-- $(basename "$log")"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]|^\[==========\] .* ran' "$log" || tail -n 5 "$log"
done

# On a GPU machine a skipped GPU test is a failure of the check, not a pass.
if nvidia-smi -L >/dev/null 2>&1 && grep -q '^\[  SKIPPED \]' "$OUT/gtest-device.log" 2>/dev/null; then
  echo "device_check: a GPU is present but gpu_device tests skipped (see gtest-device.log for the reason)"
  [ $rc -eq 0 ] && rc=1
fi

echo
echo "== bandwidth, JSON (GB/s = 1e9 bytes/s of wall time, higher is better; ratio = candidate /"
echo "== plain cuMemcpyAsync from pinned memory in the same run, higher is better, goal >= 0.90)"
if [ -s "$OUT/gpu-bench.json" ] && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$OUT/gpu-bench.json" 2>/dev/null; then
  cat "$OUT/gpu-bench.json"
else
  # The benchmark did not run or did not finish: say so as JSON, with the log's last lines.
  python3 - "$OUT/gpu-bench.json" <<'PY'
import json, os, sys
p = sys.argv[1]
tail = open(p, errors="replace").read().splitlines()[-20:] if os.path.exists(p) else []
print(json.dumps({"error": "no benchmark figures: the GPU benchmark did not run or did not finish",
                  "log_tail": tail}, indent=1))
PY
fi
echo
echo "device_check: exit $rc (0: all steps passed; 1: a step failed; 124: the ${LIMIT} s limit cut the run)"
exit $rc
