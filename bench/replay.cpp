// SPDX-License-Identifier: Apache-2.0
// Replay speed in block references per second (items/s, higher is better), reading included:
// replay::run (reader + Runtime::reference on null tiers) for every policy on a 4.9 M-reference
// Mooncake stream, the shared trace 40 times over with shifted block ids and times (what
// bench/make_replay_trace.py writes, so each copy's blocks are new), at 10 % of one copy's
// unique blocks. Baselines in the same run: the reader alone on the same file, and a textbook
// LRU (list + hash map) on the same ids already in memory. The tie-heavy LRFU case is the
// sweep grid's corner alpha 0.001, beta 0.1 at 10 % and at 200 % of one copy's working set
// (goal: 200 % no slower than twice 10 %), on 16 copies.
#include "bench_ratio.hpp"

#include <cxltier/key.hpp>
#include <cxltier/tools/replay.hpp>
#include <cxltier/tools/trace.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include <unistd.h>

using namespace cxltier;

namespace {

const std::string kData = CXLT_TRACE_DATA;
constexpr int kCopies = 40;

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

struct Shifted {
  std::string path;
  uint64_t unique_per_copy = 0;
};

// The shared Mooncake trace `copies` times: copy c adds c * (max id + 1) to every id and
// c * (last timestamp + 1) to every timestamp (the layout of bench/make_replay_trace.py).
Shifted write_shifted(int copies) {
  trace::Reader r(kData + "/mooncake__synthetic_trace.jsonl");
  trace::Request q;
  struct Row {
    double ts_ms;
    uint64_t in, out;
    std::vector<uint64_t> ids;
  };
  std::vector<Row> rows;
  uint64_t max_id = 0;
  std::unordered_map<uint64_t, int> unique;
  while (r.next(q)) {
    Row row{std::round(q.timestamp_s * 1000.0), q.input_tokens, q.output_tokens, {q.blocks.begin(), q.blocks.end()}};
    for (uint64_t id : row.ids) {
      max_id = std::max(max_id, id);
      unique[id] = 1;
    }
    rows.push_back(std::move(row));
  }
  const uint64_t id_span = max_id + 1, time_span = static_cast<uint64_t>(rows.back().ts_ms) + 1;
  Shifted out;
  out.path = g_temp.make("_mooncake_x" + std::to_string(copies) + ".jsonl");
  out.unique_per_copy = unique.size();
  std::ofstream f(out.path, std::ios::binary);
  for (uint64_t c = 0; c < static_cast<uint64_t>(copies); ++c)
    for (const Row &row : rows) {
      f << "{\"timestamp\": " << static_cast<uint64_t>(row.ts_ms) + c * time_span << ", \"input_length\": " << row.in
        << ", \"output_length\": " << row.out << ", \"hash_ids\": [";
      for (size_t i = 0; i < row.ids.size(); ++i) f << (i ? ", " : "") << row.ids[i] + c * id_span;
      f << "]}\n";
    }
  return out;
}
const Shifted &mooncake_x40() {
  static Shifted s = write_shifted(kCopies);
  return s;
}
const Shifted &mooncake_x16() {
  static Shifted s = write_shifted(16);
  return s;
}

uint64_t percent_of_copy(double pct) {
  return std::max<uint64_t>(1, static_cast<uint64_t>(pct / 100.0 * static_cast<double>(mooncake_x40().unique_per_copy)));
}

void replay_bench(benchmark::State &state, const char *policy, uint64_t cap, double alpha = 0.05, double beta = 0.001,
                  const Shifted &trace = mooncake_x40()) {
  replay::Options o;
  o.trace = trace.path;
  o.policy = replay::parse_policy(policy);
  o.capacity_blocks = cap;
  o.lrfu.alpha = alpha;
  o.lrfu.beta = beta;
  uint64_t refs = 0;
  replay::Result r;
  for (auto _ : state) {
    r = replay::run(o);
    refs += r.references;
  }
  state.SetItemsProcessed(static_cast<int64_t>(refs));
  state.counters["hit_rate_pct"] = 100.0 * r.hit_rate;
  state.counters["capacity_blocks"] = static_cast<double>(cap);
}

// 10 % of one copy's unique blocks (4392 of 43924), as in bench/README.md's comparison.
void BM_ReplayLru(benchmark::State &state) { replay_bench(state, "lru", percent_of_copy(10)); }
BENCHMARK(BM_ReplayLru)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_ReplayFifo(benchmark::State &state) { replay_bench(state, "fifo", percent_of_copy(10)); }
BENCHMARK(BM_ReplayFifo)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_ReplayArc(benchmark::State &state) { replay_bench(state, "arc", percent_of_copy(10)); }
BENCHMARK(BM_ReplayArc)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_ReplayLfu(benchmark::State &state) { replay_bench(state, "lfu", percent_of_copy(10)); }
BENCHMARK(BM_ReplayLfu)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_ReplayLrfu(benchmark::State &state) { replay_bench(state, "lrfu", percent_of_copy(10)); }
BENCHMARK(BM_ReplayLrfu)->Unit(benchmark::kMillisecond)->UseRealTime();
// Tie-heavy: alpha 0.001, beta 0.1 (the grid's corner), at 10 % and 200 % of one copy, on 16
// copies (1.95 M references). The exact victim search walks tied blocks, and how far grows with
// the trace: 200 % took 1.7x the 10 % time on 8 copies, 16x on 16, and ran past 200 s on 40.
void BM_ReplayLrfuTies10(benchmark::State &state) {
  replay_bench(state, "lrfu", percent_of_copy(10), 0.001, 0.1, mooncake_x16());
}
BENCHMARK(BM_ReplayLrfuTies10)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_ReplayLrfuTies200(benchmark::State &state) {
  replay_bench(state, "lrfu", percent_of_copy(200), 0.001, 0.1, mooncake_x16());
}
BENCHMARK(BM_ReplayLrfuTies200)->Unit(benchmark::kMillisecond)->UseRealTime();

// Baseline 1: the reader alone on the same file, each id turned into its key as the replay does.
void BM_ReaderOnly(benchmark::State &state) {
  trace::Reader r(mooncake_x40().path);
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

// Baseline 2: textbook LRU (std::list + std::unordered_map) on the same ids already in memory.
void BM_TextbookLruInMemory(benchmark::State &state) {
  std::vector<uint64_t> stream;
  {
    trace::Reader r(mooncake_x40().path);
    trace::Request q;
    while (r.next(q)) stream.insert(stream.end(), q.blocks.begin(), q.blocks.end());
  }
  const size_t cap = percent_of_copy(10);
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

// Report-only ratios (goal 0): a textbook LRU on the ids already in memory over each policy's
// replay, reading included (the baseline's time over the replay's: below 1, the replay takes
// 1/x times as long).
CXLT_BENCH_RATIO("replay lru vs textbook in-memory lru", "BM_ReplayLru/real_time", "BM_TextbookLruInMemory/real_time", 0);
CXLT_BENCH_RATIO("replay fifo vs textbook in-memory lru", "BM_ReplayFifo/real_time", "BM_TextbookLruInMemory/real_time", 0);
CXLT_BENCH_RATIO("replay arc vs textbook in-memory lru", "BM_ReplayArc/real_time", "BM_TextbookLruInMemory/real_time", 0);
CXLT_BENCH_RATIO("replay lfu vs textbook in-memory lru", "BM_ReplayLfu/real_time", "BM_TextbookLruInMemory/real_time", 0);
CXLT_BENCH_RATIO("replay lrfu vs textbook in-memory lru", "BM_ReplayLrfu/real_time", "BM_TextbookLruInMemory/real_time", 0);
CXLT_BENCH_RATIO("replay lru vs reading alone (cost of the runtime path)", "BM_ReplayLru/real_time",
                 "BM_ReaderOnly/real_time", 0);
// The tie-heavy LRFU case: the 10 % run's time over the 200 % run's (goal >= 0.5: 200 % takes
// at most twice as long).
CXLT_BENCH_RATIO("replay lrfu ties: 200 % capacity vs 10 %", "BM_ReplayLrfuTies200/real_time",
                 "BM_ReplayLrfuTies10/real_time", 0.5);
