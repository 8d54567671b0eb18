// SPDX-License-Identifier: Apache-2.0
// The GPU rows of the migration benchmark: host-to-device, device-to-host, device-to-device and
// both directions at once, for 5 MiB blocks moved one block per call through the cuda and
// cuda-host backends (the path the runtime's migrations take), each as a ratio to plain
// cuMemcpyAsync of the same bytes from cuMemAllocHost memory on one stream, measured in the
// same run (goal >= 0.90x). Plus the per-layer gather/scatter rows: batched cuMemcpyAsync
// against the kernel of kv_copy.cu, both against a contiguous copy of the same bytes.
//
// Rates are GB/s = 10^9 bytes per second of wall time, each byte counted once (both
// directions: the bytes of both). Higher is better; the ratio is candidate / baseline.
//
// Part of the CLI, not the library: called by `cxltier gpu --bench` (tools/cmd_gpu.cpp) and
// meant for `cxltier bench` to call when gpu_discovery().available (see docs/gpu.md). Same
// declarations in every build; without the CUDA tier (gpu_bench_off.cpp) or a driver the
// result says why and has no rows.
#pragma once

#include "lib/topology/gpu.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cxltier::gpu_bench {

struct Params {
  uint64_t block_bytes = 5242880;  // the canonical model's block
  uint32_t blocks = 32;            // per pass (160 MiB at 5 MiB)
  unsigned threads = 2;            // copying threads per direction (the runtime's migration threads)
  unsigned runs = 5;               // measured passes after `warmup` unmeasured ones
  unsigned warmup = 1;
  int device = -1;                 // one CUDA device, or -1: each
  uint32_t layers = 80;            // per-layer rows: K and V of this many layers per block
  std::function<void(const std::string &)> progress;  // one status line at a time, or empty
};

struct Row {
  int device = -1;
  std::string what;       // "H2D", "D2H", "D2D", "bidirectional", "gather D2H", "scatter H2D"
  std::string method;     // "cuda backend, 1 block per call", "per-layer, batched cuMemcpyAsync", ...
  std::string baseline;   // "cuMemcpyAsync from cuMemAllocHost memory, one stream"
  bool measured = false;
  std::string reason;     // why not measured
  std::vector<double> gbps_runs, baseline_gbps_runs;
  double gbps() const;           // median
  double baseline_gbps() const;  // median
  double ratio() const;          // gbps / baseline_gbps (0 if either is 0)
  double spread_pct() const;     // (max - min) / median of gbps_runs, percent
};

struct Result {
  bool available = false;
  std::string why;        // when !available
  Params params;
  std::vector<GpuDevice> devices;
  std::vector<Row> rows;
};

inline constexpr double kGoalRatio = 0.90;

// Throws Error(CXLT_ERROR_INVALID_ARGUMENT) naming a parameter out of range.
void validate(const Params &params);

// Measure. Never throws for a missing GPU (available = false, why); throws Error for a
// parameter out of range (INVALID_ARGUMENT, named) or a driver failure mid-run (BACKEND).
Result run(const Params &params);

// A table with units and the goal in the headers, one row per Row, then the devices.
std::string to_table(const Result &r);
// {"available", "why", "block_bytes", "blocks", "threads", "runs", "devices": [...], "rows": [{"device",
//  "what", "method", "baseline", "measured", "reason", "gbps", "baseline_gbps", "ratio", "spread_pct",
//  "gbps_runs", "baseline_gbps_runs"}]}; numbers null when not measured.
std::string to_json(const Result &r, int indent = 2);

}  // namespace cxltier::gpu_bench
