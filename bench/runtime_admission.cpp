// SPDX-License-Identifier: Apache-2.0
// Micro-benchmark: admission of a new block when the top tier is full, so that the runtime must
// make room (its victim demoted to the second tier, whose own victim is dropped, as in a full
// cache's steady state), against admission into free room (admit, then release(forget) to
// keep the room). Two null tiers (top N blocks, second 4N), synchronous runtime: only the
// runtime's bookkeeping is timed (store, pools, both policy indexes, the move protocol's steps
// 1 and 3). Time per admission, lower is better. The thread is pinned (CXLT_BENCH_CPU, default 0).
// A second baseline is the least a cache could do for the same admission: a textbook LRU
// (std::list + std::unordered_map) holding as many blocks as both tiers, inserting the new key
// and evicting its oldest (BM_LruInsertEvict).
#include "bench_ratio.hpp"

#include <cxltier/config.hpp>
#include <cxltier/key.hpp>
#include <cxltier/runtime.hpp>

#include <benchmark/benchmark.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <list>
#include <memory>
#include <unordered_map>

namespace {


std::unique_ptr<cxltier::Runtime> open_two_tiers(size_t top) {
  cxltier::RuntimeConfig cfg;
  cfg.topology = "emulated";
  cfg.geometry.layers = cfg.geometry.kv_heads = cfg.geometry.head_dim = cfg.geometry.bytes_per_element = 1;
  cfg.geometry.k_and_v = false;
  cfg.geometry.tokens_per_block = 1024;  // 1 KiB "blocks": only budgets see the size
  const char *names[2] = {"hbm", "dram"};
  const cxltier::TierKind kinds[2] = {cxltier::TierKind::hbm, cxltier::TierKind::dram};
  for (int i = 0; i < 2; ++i) {
    cxltier::TierConfig t;
    t.name = names[i];
    t.kind = kinds[i];
    t.backend = "null";
    t.budget_bytes = (i == 0 ? top : 4 * top) * 1024;
    cfg.tiers.push_back(t);
  }
  cfg.synchronous = true;
  cfg.store_capacity = 8 * top;  // states of dropped blocks are kept, then forgotten
  return cxltier::Runtime::open(cfg);
}

// Candidate: both tiers full before timing starts; every admission demotes and drops.
void BM_AdmitDemote(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  const size_t top = static_cast<size_t>(state.range(0));
  auto rt = open_two_tiers(top);
  uint64_t next = 0;
  for (size_t i = 0; i < 5 * top; ++i) rt->admit(cxltier::key_from_trace_id(next++));
  const uint64_t demotions_before = rt->stats().demotions;
  for (auto _ : state) {
    cxltier::Block b = rt->admit(cxltier::key_from_trace_id(next++));
    benchmark::DoNotOptimize(b);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  // Every timed admission must have demoted (else this measured something else).
  if (rt->stats().demotions - demotions_before < static_cast<uint64_t>(state.iterations())) state.SkipWithError("an admission did not demote");
}
BENCHMARK(BM_AdmitDemote)->Arg(1 << 10)->Arg(1 << 16);

// Baseline: the top tier half full; admit a new block into free room, then release it.
void BM_AdmitIntoRoom(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  const size_t top = static_cast<size_t>(state.range(0));
  auto rt = open_two_tiers(top);
  uint64_t next = 0;
  for (size_t i = 0; i < top / 2; ++i) rt->admit(cxltier::key_from_trace_id(next++));
  for (auto _ : state) {
    const cxltier::Key k = cxltier::key_from_trace_id(next++);
    cxltier::Block b = rt->admit(k);
    benchmark::DoNotOptimize(b);
    rt->release(k, true);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  if (rt->stats().demotions != 0) state.SkipWithError("the baseline demoted");
}
BENCHMARK(BM_AdmitIntoRoom)->Arg(1 << 10)->Arg(1 << 16);

// Baseline: a textbook LRU of 5N blocks (both tiers' room), full; insert a new key, evict the
// least recently used.
void BM_LruInsertEvict(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  const size_t cap = 5 * static_cast<size_t>(state.range(0));
  std::list<cxltier::Key> order;  // front = most recent
  std::unordered_map<cxltier::Key, std::list<cxltier::Key>::iterator, cxltier::KeyHash> where;
  where.reserve(cap + 1);
  uint64_t next = 0;
  for (size_t i = 0; i < cap; ++i) {
    const cxltier::Key k = cxltier::key_from_trace_id(next++);
    order.push_front(k);
    where[k] = order.begin();
  }
  for (auto _ : state) {
    const cxltier::Key k = cxltier::key_from_trace_id(next++);
    order.push_front(k);
    where[k] = order.begin();
    where.erase(order.back());
    order.pop_back();
    benchmark::DoNotOptimize(where.size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  if (where.size() != cap) state.SkipWithError("the LRU did not stay full");
}
BENCHMARK(BM_LruInsertEvict)->Arg(1 << 10)->Arg(1 << 16);

// The memory a bounded store's states take once it is full: a runtime with LRFU on range(1)
// null tiers of 1,024 blocks each and store.capacity range(0) references range(0) new keys (each
// admitted, the coldest dropped, its state kept), then reads its resident set (/proc/self/statm)
// against before it opened. Counter bytes_per_state: resident bytes per state, lower is better
// (docs/runtime.md, "Memory per block": 113 B with one tier at a power-of-two capacity, the key
// index's share more above one). Time per admission. The 10M-state cases give the figure; at
// 2^16 states (the smoke run's) the allocator's reuse of freed memory and the process's own
// start blur it.
// Free heap memory goes back to the system first (malloc_trim): an earlier case's freed buffers,
// kept by the allocator and resident, would otherwise count in the case that reuses them or not.
long resident_bytes() {
  malloc_trim(0);
  long pages = 0, resident = 0;
  if (FILE *f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * sysconf(_SC_PAGESIZE);
}

void BM_FillStore(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  const auto states = static_cast<uint64_t>(state.range(0));
  const auto tiers = static_cast<size_t>(state.range(1));
  double per_state = 0;
  for (auto _ : state) {
    const long before = resident_bytes();
    cxltier::RuntimeConfig cfg;
    cfg.topology = "emulated";
    cfg.geometry.layers = cfg.geometry.kv_heads = cfg.geometry.head_dim = cfg.geometry.bytes_per_element = 1;
    cfg.geometry.k_and_v = false;
    cfg.geometry.tokens_per_block = 1024;
    const char *names[3] = {"hbm", "dram", "cxl"};
    for (size_t i = 0; i < tiers; ++i) {
      cxltier::TierConfig t;
      t.name = names[i];
      t.numa_nodes = {1023u - static_cast<unsigned>(i)};  // no topology tier: unbounded by a declared capacity
      t.backend = "null";
      t.budget_bytes = 1024 * 1024;
      cfg.tiers.push_back(t);
    }
    cfg.store_capacity = states;
    cfg.synchronous = true;
    cfg.huge_pages = cxltier::HugePages::none;
    cfg.state_huge_pages = false;  // 4 KiB pages: the resident set counts what is touched
    cfg.extent_blocks = 1024;
    auto rt = cxltier::Runtime::open(cfg);
    for (uint64_t i = 0; i < states; ++i) rt->reference(cxltier::Key{7, i}, 1.0f, UINT64_MAX);
    per_state = static_cast<double>(resident_bytes() - before) / static_cast<double>(states);
  }
  state.counters["bytes_per_state"] = per_state;
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * states));
}
BENCHMARK(BM_FillStore)->ArgsProduct({{1 << 16, 10000000}, {1, 3}})->ArgNames({"states", "tiers"})->Iterations(1)->Unit(benchmark::kMillisecond);

CXLT_BENCH_RATIO("admission with demotion (every tier full) vs textbook LRU insert+evict, 64K-block top tier",
                 "BM_AdmitDemote/65536", "BM_LruInsertEvict/65536", 0);
CXLT_BENCH_RATIO("admission with demotion (every tier full) vs textbook LRU insert+evict, 1K-block top tier",
                 "BM_AdmitDemote/1024", "BM_LruInsertEvict/1024", 0);
CXLT_BENCH_RATIO("admission with demotion (top full) vs into free room, 64K-block top tier", "BM_AdmitDemote/65536",
                 "BM_AdmitIntoRoom/65536", 0);
CXLT_BENCH_RATIO("admission with demotion (top full) vs into free room, 1K-block top tier", "BM_AdmitDemote/1024",
                 "BM_AdmitIntoRoom/1024", 0);

}  // namespace
