// SPDX-License-Identifier: Apache-2.0
// main() for every benchmark binary: Google Benchmark's own flags, then the ratio lines of
// bench_ratio.hpp computed from the runs of this process.
#include "bench_ratio.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>

namespace cxlt_bench {

std::vector<RatioSpec> &ratio_specs() {
  static std::vector<RatioSpec> specs;
  return specs;
}

namespace {

// A ratio compares the time per item (1 / items_per_second) when both runs count items, else
// the time per iteration. Items matter for threaded runs: there Google Benchmark's iterations
// are summed over the threads, so one iteration of a two-thread run is each thread's share of
// the work, and its time per iteration is not comparable with a one-thread run's.
class CollectingReporter : public benchmark::ConsoleReporter {
public:
  struct Cost {
    double per_iteration = 0;
    double per_item = 0;  // 0: the benchmark counts no items
  };
  void ReportRuns(const std::vector<Run> &runs) override {
    for (const Run &r : runs) {
      if (r.error_occurred) continue;
      Cost c{r.GetAdjustedRealTime(), 0};
      if (auto it = r.counters.find("items_per_second"); it != r.counters.end() && it->second.value > 0)
        c.per_item = 1e9 / it->second.value;
      std::string name = r.run_name.str();
      if (r.run_type == Run::RT_Aggregate) {
        if (r.aggregate_name == "median") median_[name] = c;
      } else {
        single_[name].push_back(c);
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  bool cost_of(const std::string &name, Cost *c) const {
    if (auto it = median_.find(name); it != median_.end()) {
      *c = it->second;
      return true;
    }
    if (auto it = single_.find(name); it != single_.end() && !it->second.empty()) {
      std::vector<Cost> v = it->second;
      std::sort(v.begin(), v.end(), [](const Cost &a, const Cost &b) { return a.per_iteration < b.per_iteration; });
      *c = v[v.size() / 2];
      return true;
    }
    return false;
  }

private:
  std::map<std::string, Cost> median_;
  std::map<std::string, std::vector<Cost>> single_;
};

}  // namespace
}  // namespace cxlt_bench

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  cxlt_bench::CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  for (const auto &spec : cxlt_bench::ratio_specs()) {
    cxlt_bench::CollectingReporter::Cost cand, base;
    if (!reporter.cost_of(spec.candidate, &cand) || !reporter.cost_of(spec.baseline, &base)) continue;
    const bool items = cand.per_item > 0 && base.per_item > 0;
    const double c = items ? cand.per_item : cand.per_iteration, b = items ? base.per_item : base.per_iteration;
    if (c <= 0) continue;
    double ratio = b / c;
    if (spec.goal > 0)
      std::printf("ratio %s: %s / %s = %.1fx (goal >= %gx) %s\n", spec.label.c_str(), spec.baseline.c_str(),
                  spec.candidate.c_str(), ratio, spec.goal, ratio >= spec.goal ? "met" : "MISSED");
    else
      std::printf("ratio %s: %s / %s = %.2fx\n", spec.label.c_str(), spec.baseline.c_str(), spec.candidate.c_str(), ratio);
  }
  benchmark::Shutdown();
  return 0;
}
