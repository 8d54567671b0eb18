// SPDX-License-Identifier: Apache-2.0
// The statistics and CPU pinning every benchmark here uses (cxltier bench, bench-remote and the
// Google Benchmark programs under bench/), written once.
#pragma once

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace cxlt_bench_stats {

// The median (the mean of the two middle values for an even count); 0 for no samples.
inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Nearest rank: the smallest value with at least q of the samples at or below it.
inline double quantile_of(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];
}

// Pins the calling thread to one CPU (a failure leaves it unpinned: the figures only get noisier).
inline void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

}  // namespace cxlt_bench_stats
