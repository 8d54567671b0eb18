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

// What a ratio compares for one run: the time per item (1 / items_per_second) when the
// benchmark counts items, else the time per iteration. Items matter for threaded runs: there
// Google Benchmark's iterations are summed over the threads, so one iteration of a two-thread
// run is each thread's share of the work, and its time per iteration is not comparable with a
// one-thread run's.
double cost_of(const benchmark::BenchmarkReporter::Run &r) {
  if (auto it = r.counters.find("items_per_second"); it != r.counters.end() && it->second.value > 0)
    return 1e9 / it->second.value;
  return r.GetAdjustedRealTime();
}

class CollectingReporter : public benchmark::ConsoleReporter {
public:
  void ReportRuns(const std::vector<Run> &runs) override {
    for (const Run &r : runs) {
      if (r.error_occurred) continue;
      std::string name = r.run_name.str();
      double t = cost_of(r);
      if (r.run_type == Run::RT_Aggregate) {
        if (r.aggregate_name == "median") median_[name] = t;
      } else {
        single_[name].push_back(t);
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  bool time_of(const std::string &name, double *t) const {
    if (auto it = median_.find(name); it != median_.end()) {
      *t = it->second;
      return true;
    }
    if (auto it = single_.find(name); it != single_.end() && !it->second.empty()) {
      std::vector<double> v = it->second;
      std::sort(v.begin(), v.end());
      *t = v[v.size() / 2];
      return true;
    }
    return false;
  }

private:
  std::map<std::string, double> median_;
  std::map<std::string, std::vector<double>> single_;
};

}  // namespace
}  // namespace cxlt_bench

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  cxlt_bench::CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  for (const auto &spec : cxlt_bench::ratio_specs()) {
    double cand = 0, base = 0;
    if (!reporter.time_of(spec.candidate, &cand) || !reporter.time_of(spec.baseline, &base) || cand <= 0) continue;
    double ratio = base / cand;
    if (spec.goal > 0)
      std::printf("ratio %s: %s / %s = %.1fx (goal >= %gx) %s\n", spec.label.c_str(), spec.baseline.c_str(),
                  spec.candidate.c_str(), ratio, spec.goal, ratio >= spec.goal ? "met" : "MISSED");
    else
      std::printf("ratio %s: %s / %s = %.2fx\n", spec.label.c_str(), spec.baseline.c_str(), spec.candidate.c_str(), ratio);
  }
  benchmark::Shutdown();
  return 0;
}
