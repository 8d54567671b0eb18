#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Regenerates every table of docs/replay-report.md: on each shared trace (tests/data/traces),
# the LRFU alpha x beta grid (touch and decay score modes) with every baseline and the OPT bound
# at a capacity of 32 GiB of 5 MiB blocks and at 5 % and 10 % of the unique blocks, persistence
# on and off; then hit rate against capacity. On two loaded cores: 22 min wall (10.5 min CPU),
# 17 of them the decay-mode grid of the synthetic trace; CXLT_REPORT_MODES=touch skips decay
# mode and takes about 4 min. See docs/replay-report.md for why some grid points are slow.
# Usage: bench/replay_report.sh [BUILD_DIR] [OUT_DIR]   (defaults: build, replay-report)
# Environment: CXLT_REPORT_JOBS (parallel runs, default 2), CXLT_REPORT_MODES (default "touch decay").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
out="${2:-replay-report}"
cx="$build/tools/cxltier"
mkdir -p "$out"
jobs="${CXLT_REPORT_JOBS:-2}"
for t in mooncake__synthetic_trace.jsonl dynamo__mooncake_trace_1000.jsonl dynamo__pi_request_trace.jsonl.gz; do
  trace="$root/tests/data/traces/$t"
  name="${t%%.*}"
  for mode in ${CXLT_REPORT_MODES:-touch decay}; do
    # Exit status 1 would mean a policy beat OPT: set -e stops the report there.
    "$cx" sweep --trace "$trace" --budget 32GiB --capacity-fraction 0.05,0.1 --persist on,off \
      --score-mode "$mode" --jobs "$jobs" --quiet --csv "$out/$name-grid-$mode.csv" >"$out/$name-grid-$mode.txt"
  done
  "$cx" sweep --trace "$trace" --capacity-fraction 0.01,0.02,0.05,0.1,0.2,0.5,1 --alpha 0.05 --beta 0.001 \
    --persist on,off --jobs "$jobs" --quiet --csv "$out/$name-curve.csv" >"$out/$name-curve.txt"
done
echo "tables in $out/" >&2
