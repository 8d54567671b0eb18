// SPDX-License-Identifier: Apache-2.0
// Micro-benchmarks of the policy core, each against its baseline in the same binary:
//  - batched LRFU score update (contiguous arrays) vs a naive per-key hash-map update
//    (goal >= 10x, and >= 200 M block updates per second per core);
//  - victim selection by the exact index vs the brute-force scan at 1K, 100K and 1M resident
//    blocks, in a steady state of evict + admit + accesses (goal >= 100x at 1M).
// Time per operation, lower is better; the ratio lines at the end are baseline / candidate.
#include "bench_ratio.hpp"
#include "lib/policy/lrfu_index.hpp"

#include <cxltier/key.hpp>
#include <cxltier/policy.hpp>

#include <benchmark/benchmark.h>
#include <sched.h>

#include <random>
#include <unordered_map>
#include <vector>

using namespace cxltier;

namespace {

void pin() { cxlt_bench_stats::pin_to_cpu(0); }

void BM_ScoreUpdateBatched(benchmark::State &state) {
  pin();
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<double> scores(n, 0.0);
  std::vector<float> att(n);
  std::mt19937 rng(1);
  for (float &a : att) a = static_cast<float>(rng() % 1000) / 1000.0f;
  for (auto _ : state) {
    lrfu_update_batch(scores.data(), att.data(), n, 0.05);
    benchmark::DoNotOptimize(scores.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_ScoreUpdateBatched)->Arg(1 << 20);

void BM_ScoreUpdateHashMap(benchmark::State &state) {
  pin();
  const size_t n = static_cast<size_t>(state.range(0));
  std::unordered_map<Key, double, KeyHash> map;
  std::vector<Key> keys(n);
  std::vector<float> att(n);
  std::mt19937 rng(1);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = key_from_sequence(i / 64, i % 64);
    map[keys[i]] = 0.0;
    att[i] = static_cast<float>(rng() % 1000) / 1000.0f;
  }
  for (auto _ : state) {
    for (size_t i = 0; i < n; ++i) {
      double &s = map[keys[i]];
      s = lrfu_update(s, att[i], 0.05);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_ScoreUpdateHashMap)->Arg(1 << 20);

// A resident set shaped like a decode workload: scores from a few accesses with attention
// concentrated on a minority of blocks, last accesses spread over the last 5,000 steps.
struct Workload {
  LrfuIndex index{LrfuParams{}, 256, false};
  std::vector<NodeId> residents;
  std::vector<PolicyState> st;
  std::vector<size_t> pos;
  std::vector<NodeId> free_ids;
  uint64_t now = 10000;
  std::mt19937_64 rng{7};

  explicit Workload(size_t n) {
    size_t ids = n + 1024;
    index.reserve_ids(ids);
    st.resize(ids);
    pos.assign(ids, SIZE_MAX);
    for (size_t i = n; i < ids; ++i) free_ids.push_back(static_cast<NodeId>(i));
    for (NodeId id = 0; id < n; ++id) {
      PolicyState &s = st[id];
      int accesses = 1 + static_cast<int>(rng() % 8);
      for (int a = 0; a < accesses; ++a) s.score = lrfu_update(s.score, (rng() % 10 == 0) ? 0.3 : 0.002, 0.05);
      s.last_access = now - rng() % 5000;
      pos[id] = residents.size();
      residents.push_back(id);
      index.insert(id, key_from_sequence(id, 0), s);
    }
  }
  // One steady-state round after the victim is known: evict it, admit a fresh block, touch a
  // few residents, sometimes advance the clock.
  void round(NodeId v) {
    index.erase(v, EraseReason::evicted);
    size_t p = pos[v];
    residents[p] = residents.back();
    pos[residents[p]] = p;
    residents.pop_back();
    pos[v] = SIZE_MAX;
    free_ids.push_back(v);
    NodeId fresh = free_ids.front();
    free_ids.erase(free_ids.begin());
    st[fresh] = PolicyState{0.05 * 0.01, now, 1, 0};
    pos[fresh] = residents.size();
    residents.push_back(fresh);
    index.insert(fresh, key_from_sequence(fresh, now), st[fresh]);
    for (int k = 0; k < 4; ++k) {
      NodeId id = residents[rng() % residents.size()];
      st[id].score = lrfu_access(st[id].score, now - st[id].last_access, 0.01, LrfuParams{});
      st[id].last_access = now;
      index.access(id, st[id]);
    }
    if (rng() % 8 == 0) ++now;
  }
};

void BM_VictimIndex(benchmark::State &state) {
  pin();
  Workload w(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    NodeId v = w.index.victim(w.now, Eligible::all());
    benchmark::DoNotOptimize(v);
    state.PauseTiming();
    w.round(v);
    state.ResumeTiming();
  }
  state.counters["examined_per_victim"] =
      static_cast<double>(w.index.stats().entries_examined) / static_cast<double>(std::max<uint64_t>(1, w.index.stats().victims));
}
BENCHMARK(BM_VictimIndex)->Arg(1000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMicrosecond);

void BM_VictimBruteForce(benchmark::State &state) {
  pin();
  Workload w(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    NodeId v = w.index.victim_bruteforce(w.now, Eligible::all());
    benchmark::DoNotOptimize(v);
    state.PauseTiming();
    w.round(v);
    state.ResumeTiming();
  }
}
BENCHMARK(BM_VictimBruteForce)->Arg(1000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMicrosecond);

}  // namespace

CXLT_BENCH_RATIO("batched score update vs hash map", "BM_ScoreUpdateBatched/1048576", "BM_ScoreUpdateHashMap/1048576", 10);
CXLT_BENCH_RATIO("victim selection at 1K residents", "BM_VictimIndex/1000", "BM_VictimBruteForce/1000", 0);
CXLT_BENCH_RATIO("victim selection at 100K residents", "BM_VictimIndex/100000", "BM_VictimBruteForce/100000", 0);
CXLT_BENCH_RATIO("victim selection at 1M residents", "BM_VictimIndex/1000000", "BM_VictimBruteForce/1000000", 100);
