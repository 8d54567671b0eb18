// SPDX-License-Identifier: Apache-2.0
// The measurements behind `cxltier bench` (see bench_migration.hpp and bench/README.md): one
// runtime opened on the configured tiers with budgets sized for the benchmark's blocks; libc
// memcpy between those blocks' own memory on one and on N threads (pinned with --pin); move_pages on
// buffers of the same size between two NUMA nodes (bench_move_pages.cpp); then the runtime's
// migration over every ordered tier pair, batched (queued moves, the migration threads copy) for
// the rate and one block at a time (move with wait) for the per-block latency. The report and
// JSON are cmd_bench.cpp's.
#include "bench_migration.hpp"
#include "bench_crew.hpp"
#include "bench_move_pages.hpp"
#include "bench_stats.hpp"
#include "exit_status.hpp"

#include <cxltier/config.hpp>
#include <cxltier/error.hpp>
#include <cxltier/key.hpp>
#include <cxltier/runtime.hpp>
#include <cxltier/tools/units.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cxltier::bench {

namespace {

using cxlt_bench_stats::median_of;
using cxlt_bench_stats::quantile_of;
using Progress = std::function<void(const std::string &)>;

// An Euler circuit of the complete directed graph on n tiers, from tier `start` back to it:
// every ordered pair once, each starting where the previous one ended, so the blocks never need
// an unmeasured trip to get into place.
std::vector<std::pair<int, int>> pair_circuit(int n, int start) {
  std::vector<std::vector<int>> out(static_cast<size_t>(n));
  for (int a = 0; a < n; ++a)
    for (int b = n - 1; b >= 0; --b)
      if (a != b) out[static_cast<size_t>(a)].push_back(b);
  std::vector<int> stack{start}, path;
  while (!stack.empty()) {
    int v = stack.back();
    if (!out[static_cast<size_t>(v)].empty()) {
      stack.push_back(out[static_cast<size_t>(v)].back());
      out[static_cast<size_t>(v)].pop_back();
    } else {
      path.push_back(v);
      stack.pop_back();
    }
  }
  std::reverse(path.begin(), path.end());
  std::vector<std::pair<int, int>> edges;
  for (size_t i = 1; i < path.size(); ++i) edges.emplace_back(path[i - 1], path[i]);
  return edges;
}

void fill_pattern(void *data, size_t bytes, uint64_t seed) {
  auto *w = static_cast<uint64_t *>(data);
  for (size_t i = 0; i < bytes / 8; ++i) w[i] = seed + i * 0x9e3779b97f4a7c15ull;
}

double load_average() {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}


// --- the configuration ----------------------------------------------------------------------------

// What the parameters and the user's configuration resolve to, before anything is allocated.
struct Plan {
  RuntimeConfig cfg;
  uint64_t block = 0;    // bytes per block
  uint32_t n = 0;        // blocks per pass
  uint32_t batch = 0;    // moves queued before waiting for them
  unsigned threads = 0;  // memcpy, move_pages and migration threads
  bool emulated = false;
  std::vector<std::vector<unsigned>> tier_nodes;  // each configured tier's NUMA nodes
};

// The user's configuration with the budgets, threads and store the benchmark needs; checks the
// parameters and records them, as resolved, in `res`.
Plan plan_bench(const BenchParams &p, BenchResult &res) {
  Plan plan;
  plan.cfg = RuntimeConfig::from_sources(p.config_path);
  RuntimeConfig &cfg = plan.cfg;
  if (!p.topology.empty()) cfg.set("topology", p.topology);
  if (p.block_bytes != 0) {
    if (p.block_bytes < 4096 || p.block_bytes > (uint64_t{1} << 30))
      fail(CXLT_ERROR_INVALID_ARGUMENT, "--block-bytes ", p.block_bytes, " (", format_bytes(p.block_bytes),
           ") is outside 4 KiB .. 1 GiB");
    // Keep the model's shape when the size is a whole number of its tokens; else one flat
    // tensor of the size asked for.
    const uint64_t per_token = cfg.geometry.bytes_per_token();
    if (p.block_bytes % per_token == 0) {
      cfg.geometry.tokens_per_block = static_cast<uint32_t>(p.block_bytes / per_token);
    } else {
      cfg.geometry.layers = cfg.geometry.kv_heads = cfg.geometry.head_dim = cfg.geometry.bytes_per_element = 1;
      cfg.geometry.k_and_v = false;
      cfg.geometry.tokens_per_block = static_cast<uint32_t>(p.block_bytes);
    }
  }
  const uint64_t block = cfg.geometry.bytes();
  if (block > (uint64_t{1} << 30))
    fail(CXLT_ERROR_INVALID_ARGUMENT, "block size ", format_bytes(block), " (from the geometry) is over 1 GiB");
  const uint32_t n = p.blocks ? p.blocks
                              : static_cast<uint32_t>(std::max<uint64_t>(4, (uint64_t{160} << 20) / block +
                                                                                ((uint64_t{160} << 20) % block != 0)));
  if (n == 0 || n > (1u << 20)) fail(CXLT_ERROR_INVALID_ARGUMENT, "--blocks ", n, " is outside 1 .. 1048576");
  const uint32_t batch = p.batch ? std::min(p.batch, n) : n;
  res.cpus = allowed_cpus();
  const unsigned threads = p.threads ? p.threads : static_cast<unsigned>(res.cpus.size());
  if (threads == 0 || threads > 1024) fail(CXLT_ERROR_INVALID_ARGUMENT, "--threads ", threads, " is outside 1 .. 1024");
  if (p.runs < 5) fail(CXLT_ERROR_INVALID_ARGUMENT, "--runs ", p.runs, ": at least 5 measured runs are needed");
  res.block_bytes = block;
  res.blocks = n;
  res.batch = batch;
  res.threads = threads;
  res.runs = p.runs;
  res.warmup = p.warmup;

  cfg.migration_threads = threads;
  cfg.store_path.clear();  // never touch the user's checkpoint
  cfg.checkpoint_every_steps = 0;
  const Topology topo = discover_topology(cfg.topology);
  const bool emulated = topo.source == TopologySource::emulated;
  if (cfg.tiers.empty()) {
    // The tiers Runtime::open would make, named the same way; by kind alone where the topology
    // is emulated (its tiers share the host's nodes), with their nodes where they are real.
    // A tier that neither a kind nor nodes can tell apart from an earlier one (a second GPU)
    // is left out, as Runtime::open leaves it out.
    for (const TierDesc &t : topo.tiers) {
      TierConfig tc;
      tc.kind = t.kind;
      tc.name = tier_kind_name(t.kind);
      bool duplicate = false;
      for (const TierConfig &w : cfg.tiers)
        if (w.kind == t.kind) {
          tc.name += std::to_string(t.rank);
          duplicate = true;
        }
      if (!emulated) tc.numa_nodes = t.numa_nodes;
      if (duplicate && tc.numa_nodes.empty()) continue;
      cfg.tiers.push_back(tc);
    }
    if (cfg.tiers.size() > CXLT_MAX_TIERS) cfg.tiers.resize(CXLT_MAX_TIERS);
  }
  // Every tier holds the 2n blocks of the memcpy pass at most; the budget keeps that under the
  // high watermark so the background mover never competes with the measured moves.
  const uint64_t slots = static_cast<uint64_t>(std::floor(2.0 * n / std::min(1.0, cfg.high_watermark))) + 2;
  for (size_t i = 0; i < cfg.tiers.size(); ++i) {
    if (cfg.tiers[i].backend == "null")
      fail(CXLT_ERROR_CONFIG, "tiers.", i, ".backend = null holds no bytes: there is nothing to copy or time");
    cfg.tiers[i].budget_bytes = slots * block;
  }
  // Each tier's nodes (a tier configured by kind alone has those of the topology's tier of
  // that kind), for choosing move_pages' nodes and for the report.
  std::vector<std::vector<unsigned>> tier_nodes;
  for (const TierConfig &tc : cfg.tiers) {
    std::vector<unsigned> nodes = tc.numa_nodes;
    if (nodes.empty() && tc.kind)
      for (const TierDesc &t : topo.tiers)
        if (t.kind == *tc.kind) {
          nodes = t.numa_nodes;
          break;
        }
    tier_nodes.push_back(nodes);
  }
  const uint64_t all_slots = slots * cfg.tiers.size();
  if (cfg.store_capacity != 0 && cfg.store_capacity < all_slots) cfg.store_capacity = all_slots;
  res.verify_copies = cfg.verify_copies;
  res.copy_kernel = cfg.copy_kernel;
  plan.block = block;
  plan.n = n;
  plan.batch = batch;
  plan.threads = threads;
  plan.emulated = emulated;
  plan.tier_nodes = std::move(tier_nodes);
  return plan;
}

// --- the runtime and its blocks -------------------------------------------------------------------

// The runtime opened on the plan's tiers, with n source blocks in the first tier of host memory
// (a GPU tier's bytes are not the CPU's to write or memcpy), filled with a pattern whose
// checksums are kept, and n memcpy destinations in the second host tier, pinned to the end.
struct Blocks {
  std::unique_ptr<Runtime> rt;
  int home = 0, memcpy_to = 0;
  std::vector<Key> src, dst;
  std::vector<uint64_t> sums;
  std::vector<void *> dst_ptr;
};

Blocks open_blocks(const Plan &plan, BenchResult &res) {
  const uint64_t block = plan.block;
  const uint32_t n = plan.n;
  const std::vector<std::vector<unsigned>> &tier_nodes = plan.tier_nodes;
  Blocks bl;
  bl.rt = cli::setup([&] { return Runtime::open(plan.cfg); });
  std::unique_ptr<Runtime> &rt = bl.rt;
  res.topology = rt->topology();
  const int nt = static_cast<int>(rt->tier_count());
  for (int t = 0; t < nt; ++t) {
    cxlt_tier_info_t info = rt->tier_info(static_cast<size_t>(t));
    TierInfo ti{info.name, cxlt_tier_kind_name(info.kind), info.backend, tier_nodes[static_cast<size_t>(t)]};
    res.tiers.push_back(ti);
  }
  // The blocks start in the first tier of host memory (a GPU tier's bytes are not the CPU's to
  // write or memcpy); the memcpy destinations are n more blocks in the second host tier.
  std::vector<int> host;
  for (int t = 0; t < nt; ++t)
    if (res.tiers[static_cast<size_t>(t)].backend != "cuda") host.push_back(t);
  if (host.empty()) fail(CXLT_ERROR_CONFIG, "no tier holds host memory: memcpy has nothing to copy between");
  bl.home = host[0];
  bl.memcpy_to = host.size() > 1 ? host[1] : host[0];
  const int home = bl.home, memcpy_to = bl.memcpy_to;
  std::vector<Key> &src = bl.src, &dst = bl.dst;
  std::vector<uint64_t> &sums = bl.sums;
  src.resize(n);
  dst.resize(n);
  sums.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    src[i] = key_from_trace_id(i);
    dst[i] = key_from_trace_id(uint64_t{n} + i);
    Block b = rt->admit(src[i]);
    if (b.tier != home) b = rt->move(src[i], home, true);
    if (b.data == nullptr) fail(CXLT_ERROR_CONFIG, "tier '", res.tiers[static_cast<size_t>(b.tier)].name, "' holds no bytes");
    fill_pattern(b.data, block, i);
    sums[i] = XXH3_64bits(b.data, block);
  }
  bl.dst_ptr.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (rt->admit(dst[i]).tier != memcpy_to) rt->move(dst[i], memcpy_to, true);
    Block b = rt->pin(dst[i]);  // pinned to the end: nothing moves them while memcpy writes
    bl.dst_ptr[i] = b.data;
  }
  return bl;
}

// --- memcpy rows: libc memcpy between the blocks' own memory, on one thread and on N -------------

void label_memcpy_rows(BenchResult &res, const Blocks &bl, unsigned threads, uint64_t block) {
  res.memcpy_1thread.label = "memcpy, 1 thread";
  res.memcpy_threads.label = "memcpy, " + std::to_string(threads) + " thread" + (threads == 1 ? "" : "s");
  res.memcpy_1thread.method = res.memcpy_threads.method = "memcpy";
  res.memcpy_1thread.threads = 1;
  res.memcpy_threads.threads = threads;
  res.memcpy_1thread.unit_bytes = res.memcpy_threads.unit_bytes = block;
  const std::string t0 = res.tiers[static_cast<size_t>(bl.home)].name, t1 = res.tiers[static_cast<size_t>(bl.memcpy_to)].name;
  res.memcpy_1thread.from = res.memcpy_threads.from = t0;
  res.memcpy_1thread.to = res.memcpy_threads.to = t1;
}

// One pass over the blocks on the first k threads, block i of the pass on thread i % k; kept in
// `row` unless a warm-up.
void memcpy_pass(Crew &crew, std::vector<ThreadSpan> &spans, unsigned k, const std::vector<void *> &src_ptr,
                 const std::vector<void *> &dst_ptr, uint64_t block, Row &row, bool keep) {
  const uint32_t n = static_cast<uint32_t>(src_ptr.size());
  for (ThreadSpan &s : spans) s.latency_us.clear();
  crew.run(k, [&](unsigned t) {
    ThreadSpan &s = spans[t];
    s.start = Clock::now();
    Clock::time_point last = s.start;
    for (uint32_t i = t; i < n; i += k) {
      std::memcpy(dst_ptr[i], src_ptr[i], block);
      Clock::time_point now = Clock::now();
      s.latency_us.push_back(micros(last, now));
      last = now;
    }
    s.end = last;
  });
  if (keep) keep_pass(row, spans, k, static_cast<double>(block) * n);
}

// --- tier-pair rows: the runtime's own migration over every ordered pair ------------------------

// A row for every ordered pair of tiers, in (from, to) order for the report; returns the index
// in res.pairs of pair (a, b) at a * tier_count + b.
std::vector<int> make_pair_rows(BenchResult &res, Runtime &rt, bool synchronous, unsigned threads, uint64_t block) {
  const int nt = static_cast<int>(rt.tier_count());
  std::vector<int> pair_index(static_cast<size_t>(nt * nt), -1);
  for (int a = 0; a < nt; ++a)
    for (int b = 0; b < nt; ++b) {
      if (a == b) continue;
      Row r;
      r.from = res.tiers[static_cast<size_t>(a)].name;
      r.to = res.tiers[static_cast<size_t>(b)].name;
      r.from_rank = a;
      r.to_rank = b;
      r.label = r.from + " -> " + r.to;
      r.method = rt.copy_method(static_cast<size_t>(a), static_cast<size_t>(b));
      r.threads = synchronous ? 1 : threads;
      r.unit_bytes = block;
      r.measured = true;
      pair_index[static_cast<size_t>(a * nt + b)] = static_cast<int>(res.pairs.size());
      res.pairs.push_back(std::move(r));
    }
  return pair_index;
}

void check_all_in(Runtime &rt, const std::vector<Key> &src, int tier) {
  for (uint32_t i = 0; i < src.size(); ++i) {
    Block b;
    if (!rt.lookup(src[i], &b) || b.tier != tier)
      fail(CXLT_ERROR_BACKEND, "block ", i, " is in tier ", b.tier, " after its move to tier ", tier,
           " (a failed copy leaves a block where it was)");
  }
}

// Every pair along `circuit`, batched: queue `batch` moves, wait for the migration threads to
// finish them, repeat. The pass's rate goes to the pair's row unless a warm-up.
void pairs_batched_pass(BenchResult &res, Runtime &rt, const std::vector<Key> &src,
                        const std::vector<std::pair<int, int>> &circuit, const std::vector<int> &pair_index,
                        uint64_t block, uint32_t batch, bool keep, const std::string &tag, const Progress &progress) {
  const int nt = static_cast<int>(rt.tier_count());
  const uint32_t n = static_cast<uint32_t>(src.size());
  const double pass_bytes = static_cast<double>(block) * n;
  for (auto [a, b] : circuit) {
    Row &row = res.pairs[static_cast<size_t>(pair_index[static_cast<size_t>(a * nt + b)])];
    progress(tag + ": " + row.label + " batched");
    const Clock::time_point s = Clock::now();
    for (uint32_t i = 0; i < n; i += batch) {
      const uint32_t e = std::min(n, i + batch);
      for (uint32_t j = i; j < e; ++j) rt.move(src[j], b, false);
      rt.wait_idle(-1);
    }
    const Clock::time_point e = Clock::now();
    check_all_in(rt, src, b);
    if (keep) row.gbps_runs.push_back(pass_bytes / seconds(s, e) / 1e9);
  }
}

// Every pair along `circuit`, one block at a time: the wait for a single block's move (the
// calling thread copies). The latencies go to the pair's row unless a warm-up.
void pairs_one_at_a_time_pass(BenchResult &res, Runtime &rt, const std::vector<Key> &src,
                              const std::vector<std::pair<int, int>> &circuit, const std::vector<int> &pair_index,
                              bool keep, const std::string &tag, const Progress &progress) {
  const int nt = static_cast<int>(rt.tier_count());
  for (auto [a, b] : circuit) {
    Row &row = res.pairs[static_cast<size_t>(pair_index[static_cast<size_t>(a * nt + b)])];
    progress(tag + ": " + row.label + " one block at a time");
    for (uint32_t i = 0; i < src.size(); ++i) {
      const Clock::time_point s = Clock::now();
      rt.move(src[i], b, true);
      const Clock::time_point e = Clock::now();
      if (keep) row.latency_us.push_back(micros(s, e));
    }
    check_all_in(rt, src, b);
  }
}

// The source blocks went around every pair twice a run: their bytes must be what was written.
void check_integrity(BenchResult &res, Runtime &rt, const Blocks &bl, uint64_t block) {
  for (uint32_t i = 0; i < bl.src.size(); ++i) {
    Block b;
    ++res.integrity_checked;
    if (!rt.lookup(bl.src[i], &b) || b.data == nullptr || XXH3_64bits(b.data, block) != bl.sums[i]) ++res.integrity_errors;
  }
}

}  // namespace

// --- Row ------------------------------------------------------------------------------------------

double Row::gbps() const { return median_of(gbps_runs); }
double Row::gbps_min() const { return gbps_runs.empty() ? 0 : *std::min_element(gbps_runs.begin(), gbps_runs.end()); }
double Row::gbps_max() const { return gbps_runs.empty() ? 0 : *std::max_element(gbps_runs.begin(), gbps_runs.end()); }
double Row::spread_pct() const {
  const double m = gbps();
  return m > 0 ? 100.0 * (gbps_max() - gbps_min()) / m : 0;
}
double Row::blocks_per_s() const { return unit_bytes ? gbps() * 1e9 / static_cast<double>(unit_bytes) : 0; }
double Row::latency_median_us() const { return median_of(latency_us); }
double Row::latency_p99_us() const { return quantile_of(latency_us, 0.99); }

std::vector<int> allowed_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  if (out.empty()) out.push_back(0);
  return out;
}

BenchResult run_bench(const BenchParams &p) {
  BenchResult res;
  res.load_before = load_average();
  const Progress progress = [&](const std::string &s) {
    if (p.progress) p.progress(s);
  };

  const Plan plan = plan_bench(p, res);
  const uint32_t n = plan.n;
  const unsigned threads = plan.threads;

  // The move_pages buffers first, so that explicit huge pages are not already in the tiers' pools.
  MovePagesBuffers pages;
  prepare_move_pages(res, pages, plan.tier_nodes, plan.emulated, plan.block, n, threads);

  progress("opening the runtime");
  Blocks bl = open_blocks(plan, res);
  Runtime &rt = *bl.rt;

  res.pinned = p.pin;
  Crew crew(threads, res.cpus, p.pin);
  std::vector<ThreadSpan> spans(threads);
  label_memcpy_rows(res, bl, threads, plan.block);
  // Pairs, in (from, to) order for the report; measured along the circuit.
  const std::vector<std::pair<int, int>> circuit = pair_circuit(static_cast<int>(rt.tier_count()), bl.home);
  const std::vector<int> pair_index = make_pair_rows(res, rt, plan.cfg.synchronous, threads, plan.block);

  std::vector<void *> src_ptr(n);
  const unsigned total = p.warmup + p.runs;
  for (unsigned run = 0; run < total; ++run) {
    const bool keep = run >= p.warmup;
    const std::string tag = "run " + std::to_string(run + 1) + "/" + std::to_string(total) + (keep ? "" : " (warm-up)");
    progress(tag + ": memcpy");
    for (uint32_t i = 0; i < n; ++i) src_ptr[i] = rt.pin(bl.src[i]).data;
    memcpy_pass(crew, spans, 1, src_ptr, bl.dst_ptr, plan.block, res.memcpy_1thread, keep);
    memcpy_pass(crew, spans, threads, src_ptr, bl.dst_ptr, plan.block, res.memcpy_threads, keep);
    for (uint32_t i = 0; i < n; ++i) rt.unpin(bl.src[i]);

    // Alternate directions, so every run starts with the pages where the last one left them.
    const int to = run % 2 == 0 ? res.node_b : res.node_a;
    if (pages.have_small) {
      progress(tag + ": move_pages 4 KiB");
      move_pages_pass(crew, spans, threads, pages.small, to, res.move_pages_4k, keep);
    }
    if (pages.have_huge) {
      progress(tag + ": move_pages huge pages");
      move_pages_pass(crew, spans, threads, pages.huge, to, res.move_pages_huge, keep);
    }

    pairs_batched_pass(res, rt, bl.src, circuit, pair_index, plan.block, plan.batch, keep, tag, progress);
    pairs_one_at_a_time_pass(res, rt, bl.src, circuit, pair_index, keep, tag, progress);
  }
  res.memcpy_1thread.measured = res.memcpy_threads.measured = true;
  res.move_pages_4k.measured = pages.have_small;
  res.move_pages_huge.measured = pages.have_huge;

  check_integrity(res, rt, bl, plan.block);
  for (uint32_t i = 0; i < n; ++i) rt.unpin(bl.dst[i]);
  bl.rt.reset();
  res.load_after = load_average();
  return res;
}

}  // namespace cxltier::bench
