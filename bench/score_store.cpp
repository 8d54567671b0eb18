// SPDX-License-Identifier: Apache-2.0
// Micro-benchmark: score-store lookup and insert at 10 M keys, against std::unordered_map of
// the same keys and states. Time per operation, lower is better.
#include "bench_ratio.hpp"
#include "lib/store/score_store.hpp"

#include <cxltier/key.hpp>

#include <benchmark/benchmark.h>

#include <random>
#include <unordered_map>
#include <vector>

using namespace cxltier;

namespace {

std::vector<Key> make_keys(size_t n) {
  std::vector<Key> k(n);
  for (size_t i = 0; i < n; ++i) k[i] = key_from_sequence(i >> 10, i & 1023);
  return k;
}

void BM_StoreFind(benchmark::State &state) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto keys = make_keys(n);
  ScoreStore store(StoreOptions{n, PolicyKind::lrfu, {}});
  for (const Key &k : keys) store.insert(k, nullptr);
  std::mt19937_64 rng(3);
  for (auto _ : state) {
    NodeId id = store.find(keys[rng() % n]);
    benchmark::DoNotOptimize(id);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StoreFind)->Arg(100000)->Arg(10000000);

// A full bounded store on either side of a key-index size: 2^23 states fill their 2^24 slots
// to 1/2 (the most a store's index holds), 2^23 + 1 fill 2^25 to about 1/4. Keys present
// (range(1) 1) or absent (0: an admission's lookup of a new key, which probes to an empty slot).
// Time per lookup, lower is better; the store's bytes per state when full
// (ScoreStore::bytes_per_state) are reported as a counter.
void BM_StoreFindFull(benchmark::State &state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const bool present = state.range(1) != 0;
  auto keys = make_keys(2 * n);  // the second half is never inserted
  ScoreStore store(StoreOptions{n, PolicyKind::lrfu, {}});
  for (size_t i = 0; i < n; ++i) store.insert(keys[i], nullptr);
  std::mt19937_64 rng(3);
  for (auto _ : state) {
    NodeId id = store.find(keys[rng() % n + (present ? 0 : n)]);
    benchmark::DoNotOptimize(id);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["bytes_per_state"] = ScoreStore::bytes_per_state(n);
}
BENCHMARK(BM_StoreFindFull)->ArgsProduct({{8388608, 8388609}, {1, 0}})->ArgNames({"capacity", "present"});

void BM_UnorderedMapFind(benchmark::State &state) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto keys = make_keys(n);
  std::unordered_map<Key, PolicyState, KeyHash> map;
  map.reserve(n);
  for (const Key &k : keys) map.emplace(k, PolicyState{});
  std::mt19937_64 rng(3);
  for (auto _ : state) {
    auto it = map.find(keys[rng() % n]);
    benchmark::DoNotOptimize(it);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_UnorderedMapFind)->Arg(100000)->Arg(10000000);

// Insert n keys into an empty bounded store (capacity n): time per insert.
void BM_StoreInsert(benchmark::State &state) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto keys = make_keys(n);
  for (auto _ : state) {
    ScoreStore store(StoreOptions{n, PolicyKind::lrfu, {}});
    for (const Key &k : keys) benchmark::DoNotOptimize(store.insert(k, nullptr));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_StoreInsert)->Arg(10000000)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_UnorderedMapInsert(benchmark::State &state) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto keys = make_keys(n);
  for (auto _ : state) {
    std::unordered_map<Key, PolicyState, KeyHash> map;
    map.reserve(n);
    for (const Key &k : keys) map.emplace(k, PolicyState{});
    benchmark::DoNotOptimize(map.size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_UnorderedMapInsert)->Arg(10000000)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

CXLT_BENCH_RATIO("store find at 10M keys", "BM_StoreFind/10000000", "BM_UnorderedMapFind/10000000", 0);
CXLT_BENCH_RATIO("store insert at 10M keys", "BM_StoreInsert/10000000/iterations:1", "BM_UnorderedMapInsert/10000000/iterations:1", 0);
