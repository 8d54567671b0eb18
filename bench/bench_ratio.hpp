// SPDX-License-Identifier: Apache-2.0
// Ratios against a baseline measured in the same run. A benchmark file declares pairs with
// CXLT_BENCH_RATIO; bench_main.cpp runs every benchmark, then prints one line per pair:
//   ratio <label>: <baseline> / <candidate> = <x> (goal >= <g>) met|MISSED
// Time per item is compared where the benchmark counts items (SetItemsProcessed), else time
// per iteration (the median when --benchmark_repetitions is given), so a ratio above 1 means
// the candidate is that many times faster. Speed targets are checked this
// way, never by timed unit tests.
#pragma once

#include "tools/bench_stats.hpp"

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace cxlt_bench {

struct RatioSpec {
  std::string label;
  std::string candidate;  // full benchmark name, e.g. "BM_Victim/1000000"
  std::string baseline;
  double goal;            // minimum ratio wanted (0: report only)
};

std::vector<RatioSpec> &ratio_specs();

struct RatioRegistrar {
  RatioRegistrar(std::string label, std::string candidate, std::string baseline, double goal) {
    ratio_specs().push_back({std::move(label), std::move(candidate), std::move(baseline), goal});
  }
};

// Pin the calling thread to CPU $CXLT_BENCH_CPU (default 0), so that a candidate and its
// baseline run where the other's cache state cannot follow them around; `offset` CPUs past it
// (modulo the CPUs online) for a benchmark's further threads.
inline void pin_to_bench_cpu(int offset = 0) {
  int cpu = 0;
  if (const char *c = std::getenv("CXLT_BENCH_CPU")) cpu = std::atoi(c);
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  cxlt_bench_stats::pin_to_cpu(static_cast<int>((cpu + offset) % (ncpu > 0 ? ncpu : 1)));
}

}  // namespace cxlt_bench

#define CXLT_BENCH_CONCAT2(a, b) a##b
#define CXLT_BENCH_CONCAT(a, b) CXLT_BENCH_CONCAT2(a, b)
#define CXLT_BENCH_RATIO(label, candidate, baseline, goal) \
  static ::cxlt_bench::RatioRegistrar CXLT_BENCH_CONCAT(cxlt_ratio_, __LINE__)(label, candidate, baseline, goal)
