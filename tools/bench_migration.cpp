// SPDX-License-Identifier: Apache-2.0
// The measurements behind `cxltier bench` (see bench_migration.hpp and bench/README.md): one
// runtime opened on the configured tiers with budgets sized for the benchmark's blocks; libc
// memcpy between those blocks' own memory on one and on N threads (pinned with --pin); move_pages on
// buffers of the same size between two NUMA nodes; then the runtime's migration over every
// ordered tier pair, batched (queued moves, the migration threads copy) for the rate and one
// block at a time (move with wait) for the per-block latency.
#include "bench_migration.hpp"
#include "bench_stats.hpp"
#include "exit_status.hpp"

#include "tiers/hostmem.hpp"

#include <cxltier/config.hpp>
#include <cxltier/error.hpp>
#include <cxltier/key.hpp>
#include <cxltier/runtime.hpp>
#include <cxltier/tools/units.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace cxltier::bench {

namespace {

using Clock = std::chrono::steady_clock;
using cxlt_bench_stats::median_of;
using cxlt_bench_stats::pin_to_cpu;
using cxlt_bench_stats::quantile_of;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
double micros(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

// Worker threads, pinned one per CPU (round robin over the allowed CPUs) when asked, else left
// to the scheduler like the runtime's migration threads; created once so that
// no measured pass pays for thread creation. run() hands the same function to the first k of
// them and returns when all k are done; each records its own start and end, so a pass's time
// is from the first start to the last end, without the wake-up of the caller.
class Crew {
public:
  Crew(unsigned n, const std::vector<int> &cpus, bool pin) {
    for (unsigned i = 0; i < n; ++i) {
      int cpu = pin ? cpus[i % cpus.size()] : -1;
      threads_.emplace_back([this, i, cpu] { loop(i, cpu); });
    }
  }
  ~Crew() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread &t : threads_) t.join();
  }
  Crew(const Crew &) = delete;
  Crew &operator=(const Crew &) = delete;

  void run(unsigned k, const std::function<void(unsigned)> &fn) {
    std::unique_lock lk(mu_);
    job_ = &fn;
    active_ = std::min<unsigned>(k, static_cast<unsigned>(threads_.size()));
    remaining_ = active_;
    arrived_.store(0, std::memory_order_relaxed);
    ++generation_;
    cv_.notify_all();
    done_cv_.wait(lk, [&] { return remaining_ == 0; });
    job_ = nullptr;
  }

private:
  void loop(unsigned index, int cpu) {
    if (cpu >= 0) pin_to_cpu(cpu);
    uint64_t seen = 0;
    std::unique_lock lk(mu_);
    while (true) {
      cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= active_) continue;
      const std::function<void(unsigned)> *fn = job_;
      const unsigned k = active_;
      lk.unlock();
      // Start together: a pass begins when all k threads run, not when the first one woke.
      arrived_.fetch_add(1, std::memory_order_acq_rel);
      while (arrived_.load(std::memory_order_acquire) < k) std::this_thread::yield();
      (*fn)(index);  // never throws: the jobs below record errors instead
      lk.lock();
      if (--remaining_ == 0) done_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(unsigned)> *job_ = nullptr;
  unsigned active_ = 0, remaining_ = 0;
  std::atomic<unsigned> arrived_{0};
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

struct ThreadSpan {
  Clock::time_point start, end;
  std::vector<double> latency_us;
  std::string error;
};

// Rate of one pass: bytes over the span from the first thread's start to the last one's end.
double pass_gbps(const std::vector<ThreadSpan> &spans, unsigned k, double bytes) {
  Clock::time_point s = spans[0].start, e = spans[0].end;
  for (unsigned t = 1; t < k; ++t) {
    s = std::min(s, spans[t].start);
    e = std::max(e, spans[t].end);
  }
  const double secs = seconds(s, e);
  return secs > 0 ? bytes / secs / 1e9 : 0;
}

// --- move_pages buffers -----------------------------------------------------------------------

// `blocks` units of `unit` bytes (a block rounded up to the page size), laid out contiguously,
// whose pages move between two nodes.
struct PageBuffer {
  void *map = nullptr;
  size_t map_bytes = 0;
  char *base = nullptr;
  size_t page = 4096;
  size_t unit = 0;
  uint32_t blocks = 0;
  std::string kind;  // "4 KiB", "hugetlb 2 MiB", "transparent 2 MiB"

  PageBuffer() = default;
  PageBuffer(const PageBuffer &) = delete;
  PageBuffer &operator=(const PageBuffer &) = delete;
  ~PageBuffer() {
    if (map) munmap(map, map_bytes);
  }
  size_t pages_per_unit() const { return unit / page; }
  size_t bytes() const { return unit * blocks; }
};

size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

// move_pages over [base, base + bytes) in `page` steps to `node` (a query when node < 0).
// Returns the number of pages that are not on `node` afterwards; *first_error describes the first.
size_t move_range(char *base, size_t bytes, size_t page, int node, std::vector<void *> &pages, std::vector<int> &nodes,
                  std::vector<int> &status, std::string *first_error) {
  const size_t n = bytes / page;
  pages.resize(n);
  nodes.assign(n, node);
  status.assign(n, -1);
  for (size_t i = 0; i < n; ++i) pages[i] = base + i * page;
  long r = move_pages(0, n, pages.data(), node < 0 ? nullptr : nodes.data(), status.data(), node < 0 ? 0 : MPOL_MF_MOVE);
  if (r < 0) {
    if (first_error && first_error->empty()) *first_error = std::string("move_pages: ") + std::strerror(errno);
    return n;
  }
  // With automatic NUMA balancing on (the default on multi-node machines), the kernel's scanner
  // turns PTEs into NUMA-hinting (PROT_NONE) entries, and move_pages on Linux 6.1-6.4 reports
  // such pages as not present (-ENOENT) without moving them (seen in the QEMU guest). Touching
  // a page resolves its hinting fault; those pages are moved once more, inside the measured
  // time: it is what a user of move_pages pays on such a kernel.
  if (node >= 0) {
    size_t absent = 0;
    for (size_t i = 0; i < n; ++i)
      if (status[i] == -ENOENT) {
        (void)*static_cast<volatile char *>(pages[i]);
        pages[absent] = pages[i];
        ++absent;
      }
    if (absent != 0) {
      std::vector<int> again(absent, -1);
      if (move_pages(0, absent, pages.data(), nodes.data(), again.data(), MPOL_MF_MOVE) >= 0) {
        size_t j = 0;
        for (size_t i = 0; i < n; ++i)
          if (status[i] == -ENOENT) status[i] = again[j++];
      }
      for (size_t i = 0; i < n; ++i) pages[i] = base + i * page;
    }
  }
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    if (status[i] == node) continue;
    if (bad++ == 0 && first_error && first_error->empty()) {
      int q = -1;
      void *pg = pages[i];
      long qr = move_pages(0, 1, &pg, nullptr, &q, 0);
      *first_error = "page " + std::to_string(i) + " of " + std::to_string(n) + " is " +
                     (status[i] < 0 ? std::string("not movable: ") + std::strerror(-status[i])
                                    : "on node " + std::to_string(status[i])) +
                     " after a move to node " + std::to_string(node) + " (move_pages returned " + std::to_string(r) +
                     "; a query now says " + (qr == 0 ? std::to_string(q) : "?") + ")";
    }
  }
  if (bad && first_error) *first_error += "; " + std::to_string(bad) + " such pages";
  return bad;
}

// Bytes of the mapping that contains `p` backed by transparent huge pages (/proc/self/smaps).
uint64_t anon_huge_bytes(const void *p) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  while (std::getline(in, line)) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find(':') == std::string::npos || line.find('-') < line.find(' ')) {
      if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
        inside = addr >= lo && addr < hi;
        continue;
      }
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::strtoull(line.c_str() + 14, nullptr, 10) * 1024;
  }
  return 0;
}

// 4 KiB pages: THP refused for the range, touched, then moved to `node` (unmeasured).
bool make_4k_buffer(PageBuffer &b, uint64_t block, uint32_t blocks, int node, std::string *why) {
  b.page = hostmem::page_size();
  b.unit = round_up(block, b.page);
  b.blocks = blocks;
  b.kind = "4 KiB";
  b.map_bytes = b.bytes();
  void *m = mmap(nullptr, b.map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    *why = std::string("mmap of ") + format_bytes(b.map_bytes) + ": " + std::strerror(errno);
    return false;
  }
  b.map = m;
  b.base = static_cast<char *>(m);
  madvise(b.base, b.bytes(), MADV_NOHUGEPAGE);
  std::memset(b.base, 0x5a, b.bytes());
  std::vector<void *> pages;
  std::vector<int> nodes, status;
  std::string err;
  if (move_range(b.base, b.bytes(), b.page, node, pages, nodes, status, &err) != 0) {
    *why = "could not place the 4 KiB buffer on node " + std::to_string(node) + ": " + err;
    return false;
  }
  return true;
}

// Huge pages: explicit 2 MiB hugetlb pages when both nodes have enough free, else transparent
// huge pages when the kernel gives them; either way first placed on `a`.
bool make_huge_buffer(PageBuffer &b, uint64_t block, uint32_t blocks, int a, int bnode, std::string *why) {
  constexpr size_t kHuge = hostmem::kHugePage2M;
  b.page = kHuge;
  b.unit = round_up(block, kHuge);
  b.blocks = blocks;
  const uint64_t need = b.bytes() / kHuge;
  const uint64_t free_a = hostmem::free_huge_pages_2m(a), free_b = hostmem::free_huge_pages_2m(bnode);
  std::vector<void *> pages;
  std::vector<int> nodes, status;
  std::string err;
  if (free_a >= need && free_b >= need) {
    void *m = mmap(nullptr, b.bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (21 << MAP_HUGE_SHIFT),
                   -1, 0);
    if (m != MAP_FAILED) {
      unsigned long mask[16] = {};
      mask[a / 64] |= 1ul << (a % 64);
      // Bound to `a` before the first touch so the pages come from a's pool; populate reports
      // a shortage as an error where a plain write would raise SIGBUS.
      if (mbind(m, b.bytes(), MPOL_BIND, mask, 64 * 16, 0) == 0 && hostmem::populate(m, b.bytes()) == CXLT_OK) {
        b.map = m;
        b.map_bytes = b.bytes();
        b.base = static_cast<char *>(m);
        b.kind = "hugetlb 2 MiB";
        std::memset(b.base, 0x5a, b.bytes());
        if (move_range(b.base, b.bytes(), kHuge, a, pages, nodes, status, &err) == 0) return true;
        *why = "hugetlb buffer not on node " + std::to_string(a) + ": " + err;
        return false;
      }
      munmap(m, b.bytes());
    }
  }
  if (!hostmem::thp_enabled()) {
    *why = "no huge pages: " + std::to_string(need) + " free 2 MiB hugetlb pages needed on nodes " + std::to_string(a) +
           " and " + std::to_string(bnode) + " (they have " + std::to_string(free_a) + " and " + std::to_string(free_b) +
           ") and transparent huge pages are off";
    return false;
  }
  b.map_bytes = b.bytes() + kHuge;
  void *m = mmap(nullptr, b.map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    *why = std::string("mmap: ") + std::strerror(errno);
    return false;
  }
  b.map = m;
  b.base = reinterpret_cast<char *>(round_up(reinterpret_cast<uintptr_t>(m), kHuge));
  madvise(b.base, b.bytes(), MADV_HUGEPAGE);
  std::memset(b.base, 0x5a, b.bytes());
  const uint64_t huge = anon_huge_bytes(b.base);
  if (huge < b.bytes() * 9 / 10) {
    *why = "no huge pages: hugetlb has " + std::to_string(free_a) + " and " + std::to_string(free_b) +
           " free 2 MiB pages on nodes " + std::to_string(a) + " and " + std::to_string(bnode) + " (" +
           std::to_string(need) + " needed) and the kernel backed only " + format_bytes(huge) + " of " +
           format_bytes(b.bytes()) + " with transparent huge pages";
    return false;
  }
  b.kind = "transparent 2 MiB";
  if (move_range(b.base, b.bytes(), kHuge, a, pages, nodes, status, &err) != 0) {
    *why = "transparent huge page buffer not on node " + std::to_string(a) + ": " + err;
    return false;
  }
  return true;
}

// --- the pieces of a run ------------------------------------------------------------------------

std::vector<unsigned> memory_nodes() {
  std::vector<unsigned> out;
  if (numa_available() < 0) return out;
  struct bitmask *allowed = numa_get_mems_allowed();
  for (int n = 0; n <= numa_max_node(); ++n)
    if (numa_bitmask_isbitset(allowed, static_cast<unsigned>(n)) && numa_node_size64(n, nullptr) > 0)
      out.push_back(static_cast<unsigned>(n));
  numa_bitmask_free(allowed);
  return out;
}

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
  auto progress = [&](const std::string &s) {
    if (p.progress) p.progress(s);
  };

  // --- configuration: the user's, with the budgets, threads and store the benchmark needs.
  RuntimeConfig cfg = RuntimeConfig::from_sources(p.config_path);
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

  // --- move_pages buffers first, so that explicit huge pages are not already in the tiers' pools.
  const std::vector<unsigned> mem_nodes = memory_nodes();
  res.move_pages_4k.label = "move_pages, 4 KiB pages";
  res.move_pages_huge.label = "move_pages, huge pages";
  res.move_pages_4k.method = res.move_pages_huge.method = "move_pages";
  res.move_pages_4k.threads = res.move_pages_huge.threads = threads;
  PageBuffer buf4k, bufhuge;
  bool have4k = false, havehuge = false;
  if (mem_nodes.size() < 2) {
    res.move_pages_4k.reason = res.move_pages_huge.reason = "not applicable: one NUMA node";
  } else {
    // The nodes of the first two tiers when they are real and distinct (so the kernel and the
    // runtime move between the same memory); else the first CPU's node and another one.
    if (!emulated && tier_nodes.size() >= 2 && !tier_nodes[0].empty() && !tier_nodes[1].empty() &&
        tier_nodes[0][0] != tier_nodes[1][0]) {
      res.node_a = static_cast<int>(tier_nodes[0][0]);
      res.node_b = static_cast<int>(tier_nodes[1][0]);
      res.compare_pair_a = 0;
      res.compare_pair_b = 1;
    } else {
      int local = numa_node_of_cpu(res.cpus[0]);
      res.node_a = std::find(mem_nodes.begin(), mem_nodes.end(), static_cast<unsigned>(local)) != mem_nodes.end()
                       ? local
                       : static_cast<int>(mem_nodes[0]);
      for (unsigned m : mem_nodes)
        if (static_cast<int>(m) != res.node_a) {
          res.node_b = static_cast<int>(m);
          break;
        }
    }
    std::string why;
    have4k = make_4k_buffer(buf4k, block, n, res.node_a, &why);
    if (!have4k) res.move_pages_4k.reason = why;
    why.clear();
    havehuge = make_huge_buffer(bufhuge, block, n, res.node_a, res.node_b, &why);
    if (!havehuge) res.move_pages_huge.reason = why;
    res.huge_kind = havehuge ? bufhuge.kind : "";
  }
  res.move_pages_4k.unit_bytes = buf4k.unit;
  res.move_pages_huge.unit_bytes = bufhuge.unit;
  if (have4k) res.move_pages_4k.label += " (node " + std::to_string(res.node_a) + " <-> " + std::to_string(res.node_b) + ")";
  if (havehuge) res.move_pages_huge.label = "move_pages, " + bufhuge.kind + " pages (node " + std::to_string(res.node_a) +
                                            " <-> " + std::to_string(res.node_b) + ")";

  // --- the runtime and its blocks.
  progress("opening the runtime");
  std::unique_ptr<Runtime> rt = cli::setup([&] { return Runtime::open(cfg); });
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
  const int home = host[0], memcpy_to = host.size() > 1 ? host[1] : host[0];
  std::vector<Key> src(n), dst(n);
  std::vector<uint64_t> sums(n);
  for (uint32_t i = 0; i < n; ++i) {
    src[i] = key_from_trace_id(i);
    dst[i] = key_from_trace_id(uint64_t{n} + i);
    Block b = rt->admit(src[i]);
    if (b.tier != home) b = rt->move(src[i], home, true);
    if (b.data == nullptr) fail(CXLT_ERROR_CONFIG, "tier '", res.tiers[static_cast<size_t>(b.tier)].name, "' holds no bytes");
    fill_pattern(b.data, block, i);
    sums[i] = XXH3_64bits(b.data, block);
  }
  std::vector<void *> dst_ptr(n), src_ptr(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (rt->admit(dst[i]).tier != memcpy_to) rt->move(dst[i], memcpy_to, true);
    Block b = rt->pin(dst[i]);  // pinned to the end: nothing moves them while memcpy writes
    dst_ptr[i] = b.data;
  }

  res.pinned = p.pin;
  Crew crew(threads, res.cpus, p.pin);
  std::vector<ThreadSpan> spans(threads);
  const double pass_bytes = static_cast<double>(block) * n;

  res.memcpy_1thread.label = "memcpy, 1 thread";
  res.memcpy_threads.label = "memcpy, " + std::to_string(threads) + " thread" + (threads == 1 ? "" : "s");
  res.memcpy_1thread.method = res.memcpy_threads.method = "memcpy";
  res.memcpy_1thread.threads = 1;
  res.memcpy_threads.threads = threads;
  res.memcpy_1thread.unit_bytes = res.memcpy_threads.unit_bytes = block;
  const std::string t0 = res.tiers[static_cast<size_t>(home)].name, t1 = res.tiers[static_cast<size_t>(memcpy_to)].name;
  res.memcpy_1thread.from = res.memcpy_threads.from = t0;
  res.memcpy_1thread.to = res.memcpy_threads.to = t1;

  // Block i of the pass goes to thread i % k.
  auto memcpy_pass = [&](unsigned k, Row &row, bool keep) {
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
    if (!keep) return;
    row.gbps_runs.push_back(pass_gbps(spans, k, pass_bytes));
    for (unsigned t = 0; t < k; ++t) row.latency_us.insert(row.latency_us.end(), spans[t].latency_us.begin(), spans[t].latency_us.end());
  };

  // move_pages of every unit of the buffer to `node`, units split over k threads as above.
  auto move_pages_pass = [&](PageBuffer &b, int node, Row &row, bool keep) {
    for (ThreadSpan &s : spans) {
      s.latency_us.clear();
      s.error.clear();
    }
    crew.run(threads, [&](unsigned t) {
      ThreadSpan &s = spans[t];
      std::vector<void *> pages;
      std::vector<int> nodes, status;
      pages.reserve(b.pages_per_unit());
      nodes.reserve(b.pages_per_unit());
      status.reserve(b.pages_per_unit());
      s.start = Clock::now();
      Clock::time_point last = s.start;
      for (uint32_t i = t; i < b.blocks; i += threads) {
        move_range(b.base + size_t{i} * b.unit, b.unit, b.page, node, pages, nodes, status, &s.error);
        Clock::time_point now = Clock::now();
        s.latency_us.push_back(micros(last, now));
        last = now;
      }
      s.end = last;
    });
    for (unsigned t = 0; t < threads; ++t)
      if (!spans[t].error.empty())
        fail(CXLT_ERROR_BACKEND, "move_pages of the ", b.kind, " buffer to node ", node, ": ", spans[t].error);
    if (!keep) return;
    row.gbps_runs.push_back(pass_gbps(spans, threads, static_cast<double>(b.bytes())));
    for (unsigned t = 0; t < threads; ++t) row.latency_us.insert(row.latency_us.end(), spans[t].latency_us.begin(), spans[t].latency_us.end());
  };

  // Pairs, in (from, to) order for the report; measured along the circuit.
  const std::vector<std::pair<int, int>> circuit = pair_circuit(nt, home);
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
      r.method = rt->copy_method(static_cast<size_t>(a), static_cast<size_t>(b));
      r.threads = cfg.synchronous ? 1 : threads;
      r.unit_bytes = block;
      r.measured = true;
      pair_index[static_cast<size_t>(a * nt + b)] = static_cast<int>(res.pairs.size());
      res.pairs.push_back(std::move(r));
    }

  auto check_all_in = [&](int tier) {
    for (uint32_t i = 0; i < n; ++i) {
      Block b;
      if (!rt->lookup(src[i], &b) || b.tier != tier)
        fail(CXLT_ERROR_BACKEND, "block ", i, " is in tier ", b.tier, " after its move to tier ", tier,
             " (a failed copy leaves a block where it was)");
    }
  };

  const unsigned total = p.warmup + p.runs;
  for (unsigned run = 0; run < total; ++run) {
    const bool keep = run >= p.warmup;
    const std::string tag = "run " + std::to_string(run + 1) + "/" + std::to_string(total) + (keep ? "" : " (warm-up)");
    progress(tag + ": memcpy");
    for (uint32_t i = 0; i < n; ++i) src_ptr[i] = rt->pin(src[i]).data;
    memcpy_pass(1, res.memcpy_1thread, keep);
    memcpy_pass(threads, res.memcpy_threads, keep);
    for (uint32_t i = 0; i < n; ++i) rt->unpin(src[i]);

    // Alternate directions, so every run starts with the pages where the last one left them.
    const int to = run % 2 == 0 ? res.node_b : res.node_a;
    if (have4k) {
      progress(tag + ": move_pages 4 KiB");
      move_pages_pass(buf4k, to, res.move_pages_4k, keep);
    }
    if (havehuge) {
      progress(tag + ": move_pages huge pages");
      move_pages_pass(bufhuge, to, res.move_pages_huge, keep);
    }

    // Batched: queue `batch` moves, wait for the migration threads to finish them, repeat.
    for (auto [a, b] : circuit) {
      Row &row = res.pairs[static_cast<size_t>(pair_index[static_cast<size_t>(a * nt + b)])];
      progress(tag + ": " + row.label + " batched");
      const Clock::time_point s = Clock::now();
      for (uint32_t i = 0; i < n; i += batch) {
        const uint32_t e = std::min(n, i + batch);
        for (uint32_t j = i; j < e; ++j) rt->move(src[j], b, false);
        rt->wait_idle(-1);
      }
      const Clock::time_point e = Clock::now();
      check_all_in(b);
      if (keep) row.gbps_runs.push_back(pass_bytes / seconds(s, e) / 1e9);
    }
    // One at a time: the wait for a single block's move (the calling thread copies).
    for (auto [a, b] : circuit) {
      Row &row = res.pairs[static_cast<size_t>(pair_index[static_cast<size_t>(a * nt + b)])];
      progress(tag + ": " + row.label + " one block at a time");
      for (uint32_t i = 0; i < n; ++i) {
        const Clock::time_point s = Clock::now();
        rt->move(src[i], b, true);
        const Clock::time_point e = Clock::now();
        if (keep) row.latency_us.push_back(micros(s, e));
      }
      check_all_in(b);
    }
  }
  res.memcpy_1thread.measured = res.memcpy_threads.measured = true;
  res.move_pages_4k.measured = have4k;
  res.move_pages_huge.measured = havehuge;

  // The source blocks went around every pair twice a run: their bytes must be what was written.
  for (uint32_t i = 0; i < n; ++i) {
    Block b;
    ++res.integrity_checked;
    if (!rt->lookup(src[i], &b) || b.data == nullptr || XXH3_64bits(b.data, block) != sums[i]) ++res.integrity_errors;
  }
  for (uint32_t i = 0; i < n; ++i) rt->unpin(dst[i]);
  rt.reset();
  res.load_after = load_average();
  return res;
}

}  // namespace cxltier::bench
