// SPDX-License-Identifier: Apache-2.0
// Replay speed in block references per second (items/s, higher is better), reading included:
// replay::run (reader + Runtime::reference on null tiers) for LRU and LRFU on a 3.7 M-reference
// Mooncake stream (the shared trace 30 times over) and on a generated attention trace. Measured
// in the same run, the baselines: the reader alone on the same file, and a textbook LRU (list +
// hash map) on the stream already in memory. Goal: >= 10 M references/s for LRU and
// LRFU; the ratio lines say what the runtime's path costs over those baselines.
#include "bench_ratio.hpp"

#include <cxltier/key.hpp>
#include <cxltier/replay.hpp>
#include <cxltier/trace.hpp>

#include <benchmark/benchmark.h>

#include <fstream>
#include <list>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <unistd.h>

using namespace cxltier;

namespace {

const std::string kData = CXLT_TRACE_DATA;

struct TempFiles {
  std::vector<std::string> paths;
  ~TempFiles() {
    for (auto &p : paths) unlink(p.c_str());
  }
  std::string make(const std::string &suffix) {
    std::string p = "/tmp/cxlt_bench_replay_" + std::to_string(getpid()) + suffix;
    paths.push_back(p);
    return p;
  }
};
TempFiles g_temp;

const std::string &mooncake_x30() {
  static std::string path = [] {
    std::ifstream in(kData + "/mooncake__synthetic_trace.jsonl", std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    std::string p = g_temp.make("_mooncake_x30.jsonl");
    std::ofstream f(p, std::ios::binary);
    for (int i = 0; i < 30; ++i) f << ss.str();
    return p;
  }();
  return path;
}

const std::string &attention() {
  static std::string path = [] {
    std::string p = g_temp.make("_attention.jsonl");
    trace::write_attention_trace(p, trace::SyntheticParams{});
    return p;
  }();
  return path;
}

void replay_bench(benchmark::State &state, const std::string &path, const char *policy, uint64_t cap) {
  replay::Options o;
  o.trace = path;
  o.policy = replay::parse_policy(policy);
  o.capacity_blocks = cap;
  uint64_t refs = 0;
  replay::Result r;
  for (auto _ : state) {
    r = replay::run(o);
    refs += r.references;
  }
  state.SetItemsProcessed(static_cast<int64_t>(refs));
  state.counters["hit_rate_pct"] = 100.0 * r.hit_rate;
  state.counters["unique_blocks"] = static_cast<double>(r.unique_blocks);
}

// 6553 blocks: 32 GiB of 5 MiB blocks.
void BM_ReplayLru(benchmark::State &state) { replay_bench(state, mooncake_x30(), "lru", 6553); }
BENCHMARK(BM_ReplayLru)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_ReplayLrfu(benchmark::State &state) { replay_bench(state, mooncake_x30(), "lrfu", 6553); }
BENCHMARK(BM_ReplayLrfu)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_ReplayLrfuAttention(benchmark::State &state) { replay_bench(state, attention(), "lrfu", 2048); }
BENCHMARK(BM_ReplayLrfuAttention)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_ReplayLruAttention(benchmark::State &state) { replay_bench(state, attention(), "lru", 2048); }
BENCHMARK(BM_ReplayLruAttention)->Unit(benchmark::kMillisecond)->UseRealTime();

// Baseline 1: the reader alone on the same file, each id turned into its key as the replay does.
void BM_ReaderOnly(benchmark::State &state) {
  trace::Reader r(mooncake_x30());
  trace::Request q;
  uint64_t refs = 0;
  for (auto _ : state) {
    r.rewind();
    while (r.next(q))
      for (uint64_t id : q.blocks) benchmark::DoNotOptimize(key_from_trace_id(id));
    refs += r.stats().references;
  }
  state.SetItemsProcessed(static_cast<int64_t>(refs));
}
BENCHMARK(BM_ReaderOnly)->Unit(benchmark::kMillisecond)->UseRealTime();

// Baseline 2: textbook LRU (std::list + std::unordered_map) on the stream already in memory.
void BM_TextbookLruInMemory(benchmark::State &state) {
  std::vector<uint64_t> stream;
  {
    trace::Reader r(mooncake_x30());
    trace::Request q;
    while (r.next(q)) stream.insert(stream.end(), q.blocks.begin(), q.blocks.end());
  }
  const size_t cap = 6553;
  uint64_t refs = 0, hits = 0;
  for (auto _ : state) {
    std::list<uint64_t> order;
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
    hits = 0;
    for (uint64_t id : stream) {
      auto it = where.find(id);
      if (it != where.end()) {
        ++hits;
        order.splice(order.begin(), order, it->second);
        continue;
      }
      if (order.size() == cap) {
        where.erase(order.back());
        order.pop_back();
      }
      order.push_front(id);
      where[id] = order.begin();
    }
    refs += stream.size();
  }
  state.SetItemsProcessed(static_cast<int64_t>(refs));
  state.counters["hit_rate_pct"] = 100.0 * static_cast<double>(hits) / static_cast<double>(stream.size());
}
BENCHMARK(BM_TextbookLruInMemory)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

// Report-only ratios (goal 0): how much the runtime's path costs over reading alone and over a
// textbook in-memory LRU. The absolute goal (10 M references/s) is read from items_per_second.
CXLT_BENCH_RATIO("replay lru vs reading alone (cost of the runtime path)", "BM_ReplayLru/real_time",
                 "BM_ReaderOnly/real_time", 0);
CXLT_BENCH_RATIO("replay lru vs textbook in-memory lru", "BM_ReplayLru/real_time", "BM_TextbookLruInMemory/real_time", 0);
CXLT_BENCH_RATIO("replay lrfu vs replay lru", "BM_ReplayLrfu/real_time", "BM_ReplayLru/real_time", 0);
