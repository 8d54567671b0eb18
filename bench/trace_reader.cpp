// SPDX-License-Identifier: Apache-2.0
// Trace reading speed, in block ids per second (items/s) and uncompressed bytes per second:
// the streaming reader on the shared Mooncake trace (from the page cache), on a 30x larger
// concatenation of it (bigger than the CPU caches), on the gzip Dynamo trace and on a
// generated attention trace; the baseline parses the same Mooncake lines with nlohmann::json.
// The replay needs >= 10 M references/s including reading, so the reader should do several
// times that. Also the generator's speed (references generated per second).
#include "bench_ratio.hpp"

#include <cxltier/tools/trace.hpp>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

using namespace cxltier::trace;

namespace {

const std::string kData = CXLT_TRACE_DATA;

std::string slurp(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Files made once per process under /tmp and removed at exit.
struct TempFiles {
  std::vector<std::string> paths;
  ~TempFiles() {
    for (auto &p : paths) unlink(p.c_str());
  }
  std::string make(const std::string &suffix) {
    std::string p = "/tmp/cxlt_bench_trace_" + std::to_string(getpid()) + suffix;
    paths.push_back(p);
    return p;
  }
};
TempFiles g_temp;

const std::string &large_mooncake() {
  static std::string path = [] {
    std::string p = g_temp.make("_mooncake_x30.jsonl");
    std::string text = slurp(kData + "/mooncake__synthetic_trace.jsonl");
    std::ofstream f(p, std::ios::binary);
    for (int i = 0; i < 30; ++i) f << text;
    return p;
  }();
  return path;
}

const std::string &attention_trace() {
  static std::string path = [] {
    std::string p = g_temp.make("_attention.jsonl");
    write_attention_trace(p, SyntheticParams{});
    return p;
  }();
  return path;
}

void read_file(benchmark::State &state, const std::string &path) {
  Reader r(path);
  uint64_t refs = 0, bytes = 0;
  Request q;
  for (auto _ : state) {
    r.rewind();
    while (r.next(q)) benchmark::DoNotOptimize(q.blocks.data());
    refs += r.stats().references;
    bytes += r.stats().bytes;
  }
  state.SetItemsProcessed(static_cast<int64_t>(refs));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["refs_per_pass"] = static_cast<double>(r.stats().references);
}

void BM_ReaderMooncake(benchmark::State &state) { read_file(state, kData + "/mooncake__synthetic_trace.jsonl"); }
BENCHMARK(BM_ReaderMooncake)->Unit(benchmark::kMillisecond);

void BM_ReaderMooncakeX30(benchmark::State &state) { read_file(state, large_mooncake()); }
BENCHMARK(BM_ReaderMooncakeX30)->Unit(benchmark::kMillisecond);

void BM_ReaderDynamoGzip(benchmark::State &state) { read_file(state, kData + "/dynamo__pi_request_trace.jsonl.gz"); }
BENCHMARK(BM_ReaderDynamoGzip)->Unit(benchmark::kMillisecond);

void BM_ReaderAttention(benchmark::State &state) { read_file(state, attention_trace()); }
BENCHMARK(BM_ReaderAttention)->Unit(benchmark::kMillisecond);

// Baseline: the same Mooncake file, lines split the same way, each parsed into a DOM.
void BM_NlohmannMooncake(benchmark::State &state) {
  std::string text = slurp(kData + "/mooncake__synthetic_trace.jsonl");
  uint64_t refs = 0, bytes = 0;
  std::vector<uint64_t> ids;
  for (auto _ : state) {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      auto j = nlohmann::json::parse(text.begin() + static_cast<std::ptrdiff_t>(pos),
                                     text.begin() + static_cast<std::ptrdiff_t>(nl));
      ids.clear();
      for (auto &v : j["hash_ids"]) ids.push_back(v.get<uint64_t>());
      benchmark::DoNotOptimize(ids.data());
      refs += ids.size();
      pos = nl + 1;
    }
    bytes += text.size();
  }
  state.SetItemsProcessed(static_cast<int64_t>(refs));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_NlohmannMooncake)->Unit(benchmark::kMillisecond);

// The generator alone (no file): references generated per second with the default parameters.
void BM_SyntheticGenerate(benchmark::State &state) {
  uint64_t refs = 0;
  Step s;
  for (auto _ : state) {
    SyntheticWorkload w(SyntheticParams{});
    while (w.next_step(s)) refs += s.block.size();
  }
  state.SetItemsProcessed(static_cast<int64_t>(refs));
}
BENCHMARK(BM_SyntheticGenerate)->Unit(benchmark::kMillisecond);

}  // namespace

CXLT_BENCH_RATIO("trace reader vs nlohmann::json, Mooncake lines", "BM_ReaderMooncake", "BM_NlohmannMooncake", 5.0);
