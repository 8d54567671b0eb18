// SPDX-License-Identifier: Apache-2.0
// The GPU benchmark's rows, statistics and renderings (table, JSON), built in every
// configuration; the measuring code is gpu_bench.cpp (CUDA builds) and gpu_bench_off.cpp's
// run() answers "not available" elsewhere.
#include "gpu_bench.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace cxltier::gpu_bench {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

nlohmann::ordered_json num_or_null(bool ok, double v) { return ok ? nlohmann::ordered_json(v) : nlohmann::ordered_json(); }

}  // namespace

void validate(const Params &params) {
  if (params.block_bytes < 4096 || params.block_bytes > (uint64_t{1} << 30))
    fail(CXLT_ERROR_INVALID_ARGUMENT, "gpu bench: block size ", params.block_bytes, " is outside 4 KiB .. 1 GiB");
  if (params.blocks < 1 || params.blocks > 65536)
    fail(CXLT_ERROR_INVALID_ARGUMENT, "gpu bench: blocks ", params.blocks, " is outside 1 .. 65536");
  if (params.threads < 1 || params.threads > 64)
    fail(CXLT_ERROR_INVALID_ARGUMENT, "gpu bench: threads ", params.threads, " is outside 1 .. 64");
  if (params.runs < 1 || params.runs > 1000)
    fail(CXLT_ERROR_INVALID_ARGUMENT, "gpu bench: runs ", params.runs, " is outside 1 .. 1000");
  if (params.layers < 1 || params.layers > 4096)
    fail(CXLT_ERROR_INVALID_ARGUMENT, "gpu bench: layers ", params.layers, " is outside 1 .. 4096");
}

double Row::gbps() const { return median(gbps_runs); }
double Row::baseline_gbps() const { return median(baseline_gbps_runs); }
double Row::ratio() const {
  const double a = gbps(), b = baseline_gbps();
  return a > 0 && b > 0 ? a / b : 0;
}
double Row::spread_pct() const {
  if (gbps_runs.empty()) return 0;
  const auto [lo, hi] = std::minmax_element(gbps_runs.begin(), gbps_runs.end());
  const double m = gbps();
  return m > 0 ? (*hi - *lo) / m * 100.0 : 0;
}

std::string to_table(const Result &r) {
  std::ostringstream os;
  if (!r.available) {
    os << "GPU benchmark: " << r.why << "\n";
    return os.str();
  }
  os << "GPU benchmark: " << format_bytes(r.params.block_bytes) << " blocks, " << r.params.blocks << " per pass, "
     << r.params.threads << " thread(s) per direction, median of " << r.params.runs << " runs after " << r.params.warmup
     << " warm-up\n";
  os << "GB/s = 10^9 bytes/s, higher is better; ratio = row / baseline of the same run (goal >= " << fixed(kGoalRatio, 2)
     << ")\n\n";
  const std::vector<std::string> head = {"gpu", "what", "method", "GB/s", "baseline GB/s", "ratio", "spread %", "goal"};
  std::vector<std::vector<std::string>> rows;
  for (const Row &x : r.rows) {
    if (!x.measured) {
      rows.push_back({std::to_string(x.device), x.what, x.method, "-", "-", "-", "-", "not measured: " + x.reason});
      continue;
    }
    const bool is_gpu_row = x.what == "H2D" || x.what == "D2H" || x.what == "D2D" || x.what == "bidirectional";
    rows.push_back({std::to_string(x.device), x.what, x.method, fixed(x.gbps(), 1), fixed(x.baseline_gbps(), 1),
                    fixed(x.ratio(), 2), fixed(x.spread_pct(), 1),
                    is_gpu_row ? (x.ratio() >= kGoalRatio ? "met" : "MISSED") : "report only"});
  }
  std::vector<size_t> w(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (const auto &row : rows) w[c] = std::max(w[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string> &cells) {
    for (size_t c = 0; c < cells.size(); ++c)
      os << (c ? "  " : "") << cells[c] << std::string(c + 1 < cells.size() ? w[c] - cells[c].size() : 0, ' ');
    os << "\n";
  };
  line(head);
  for (const auto &row : rows) line(row);
  os << "\nbaseline: plain cuMemcpyAsync of all the pass's bytes as one copy per direction, from cuMemAllocHost memory, "
        "one stream per direction\n";
  for (const GpuDevice &g : r.devices)
    os << "gpu " << g.ordinal << ": " << g.name << ", PCI " << g.pci_bus_id << ", " << format_bytes(g.total_bytes) << ", "
       << g.async_engines << " copy engines, " << g.numa_evidence << "\n";
  return os.str();
}

std::string to_json(const Result &r, int indent) {
  nlohmann::ordered_json j;
  j["available"] = r.available;
  j["why"] = r.why;
  j["block_bytes"] = r.params.block_bytes;
  j["blocks"] = r.params.blocks;
  j["threads"] = r.params.threads;
  j["runs"] = r.params.runs;
  j["goal_ratio"] = kGoalRatio;
  nlohmann::ordered_json devs = nlohmann::ordered_json::array();
  for (const GpuDevice &g : r.devices) {
    nlohmann::ordered_json d;
    d["device"] = g.ordinal;
    d["name"] = g.name;
    d["pci_bus_id"] = g.pci_bus_id;
    d["total_bytes"] = g.total_bytes;
    d["numa_node"] = g.numa_node;
    d["copy_engines"] = g.async_engines;
    devs.push_back(std::move(d));
  }
  j["devices"] = std::move(devs);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const Row &x : r.rows) {
    nlohmann::ordered_json o;
    o["device"] = x.device;
    o["what"] = x.what;
    o["method"] = x.method;
    o["baseline"] = x.baseline;
    o["measured"] = x.measured;
    o["reason"] = x.reason;
    o["gbps"] = num_or_null(x.measured, x.gbps());
    o["baseline_gbps"] = num_or_null(x.measured, x.baseline_gbps());
    o["ratio"] = num_or_null(x.measured, x.ratio());
    o["spread_pct"] = num_or_null(x.measured, x.spread_pct());
    o["gbps_runs"] = x.gbps_runs;
    o["baseline_gbps_runs"] = x.baseline_gbps_runs;
    rows.push_back(std::move(o));
  }
  j["rows"] = std::move(rows);
  return j.dump(indent);
}

}  // namespace cxltier::gpu_bench
