// SPDX-License-Identifier: Apache-2.0
// The measurements behind `cxltier bench`: in one run, on the same blocks, libc memcpy on one
// thread and on N pinned threads (the machine's limit), the kernel's move_pages between two NUMA
// nodes (4 KiB and huge pages), and the runtime's own migration for every ordered tier pair.
// Rates are GB/s = 10^9 bytes per second of wall time, each byte counted once.
#pragma once

#include <cxltier/topology.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cxltier::bench {

struct BenchParams {
  std::string config_path;      // TOML file; "" for none (the environment applies either way)
  std::string topology;         // "" : the configuration's (auto)
  uint64_t block_bytes = 0;     // 0: the configuration's geometry (the canonical model's 5 MiB)
  uint32_t blocks = 0;          // 0: enough for 160 MiB per pass, at least 4
  uint32_t batch = 0;           // moves queued before waiting for them; 0: all blocks at once
  unsigned threads = 0;         // memcpy, move_pages and migration threads; 0: CPUs this process may use
  unsigned runs = 5;            // measured runs, after `warmup` unmeasured ones
  unsigned warmup = 1;
  // Pin the memcpy and move_pages threads one per allowed CPU. Off by default: the runtime's
  // migration threads are not pinned, and on a shared, loaded machine a pinned baseline waits
  // for its one CPU while the candidate's threads go where the scheduler finds room, which
  // made the ratio to memcpy read 3-5x (bench/README.md). On a quiet machine, --pin is fair too.
  bool pin = false;
  std::function<void(const std::string &)> progress;  // one status line at a time, or empty
};

// One measured thing over the runs. Rates per run; latencies per block, all runs pooled.
struct Row {
  std::string label;   // "memcpy, 2 threads", "hbm -> dram"
  std::string method;  // "memcpy", "move_pages", the runtime's copy method of the pair
  std::string from, to;
  int from_rank = -1, to_rank = -1;
  bool measured = false;
  std::string reason;         // why not measured ("not applicable: one NUMA node")
  unsigned threads = 0;
  uint64_t unit_bytes = 0;    // bytes per block as counted (huge pages: rounded up to the page)
  std::vector<double> gbps_runs;
  std::vector<double> latency_us;

  double gbps() const;        // median over runs
  double gbps_min() const;
  double gbps_max() const;
  double spread_pct() const;  // (max - min) / median, percent
  double blocks_per_s() const;
  double latency_median_us() const;
  double latency_p99_us() const;
};

struct TierInfo {
  std::string name, kind, backend;
  std::vector<unsigned> numa_nodes;
};

struct BenchResult {
  // The parameters as resolved.
  uint64_t block_bytes = 0;
  uint32_t blocks = 0, batch = 0;
  unsigned threads = 0, runs = 0, warmup = 0;
  std::vector<int> cpus;  // CPUs this process may use; the bench threads are pinned to them when `pinned`
  bool pinned = false;
  Topology topology;
  std::vector<TierInfo> tiers;
  bool verify_copies = false;
  std::string copy_kernel;  // runtime.copy_kernel as configured
  // move_pages: the two nodes (source first), or -1 when not applicable.
  int node_a = -1, node_b = -1;
  std::string huge_kind;    // "hugetlb 2 MiB", "transparent 2 MiB" or ""
  int compare_pair_a = -1, compare_pair_b = -1;  // tier ranks on node_a / node_b, or -1

  Row memcpy_1thread, memcpy_threads, move_pages_4k, move_pages_huge;
  std::vector<Row> pairs;   // every ordered pair, by (from, to) rank

  uint64_t integrity_checked = 0, integrity_errors = 0;
  double load_before = -1, load_after = -1;  // 1-minute load average
};

// Run the whole measurement for one point. Throws Error: CONFIG (the configuration), TOPOLOGY,
// INVALID_ARGUMENT (a parameter, named), BACKEND (a copy failed).
BenchResult run_bench(const BenchParams &params);

// The CPUs this process may run on, ascending.
std::vector<int> allowed_cpus();

}  // namespace cxltier::bench
