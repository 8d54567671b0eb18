// SPDX-License-Identifier: Apache-2.0
// Benchmark: one prefill's admission, a burst of 512 new blocks, into three full tiers of real
// memory (emulated topology, host memory; 1 MiB blocks: tiers of 512, 512 and 1,024 blocks).
// Each burst demotes 512 blocks from the fastest tier to the second and 512 from the second to
// the third, and drops 512 from the third: 1 GiB copied a burst. The watermarks are 1.0, so
// that the background mover keeps no headroom and every burst finds the tiers full.
//
//   BM_AdmitBurst512       cxlt_block_admit_batch of the 512 keys (the candidate)
//   BM_AdmitSingles512     512 cxlt_block_admit calls (the same admissions one at a time)
//   BM_MemcpySameBytes     the bytes the burst's demotions copy (1,024 blocks of 1 MiB), copied
//                          by as many threads as the runtime has migration threads (2), with
//                          memcpy between buffers already touched: the baseline
//
// Time per burst, lower is better; the counters give blocks/s and the demotions' GB/s. The
// ratio lines divide the baseline's time by the candidate's (higher is better; goal >= 0.8).
#include "bench_ratio.hpp"

#include <cxltier/cxltier.h>

#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBurst = 512;
constexpr size_t kBlockBytes = 1u << 20;  // geometry.layers = 16 (64 KiB a layer)
constexpr unsigned kThreads = 2;          // runtime.migration_threads (the default)

struct Tiers {
  cxlt_runtime_t *rt = nullptr;
  uint64_t next_sequence = 1;
  std::vector<cxlt_key_t> keys = std::vector<cxlt_key_t>(kBurst);
  std::vector<cxlt_block_t> blocks = std::vector<cxlt_block_t>(kBurst);
  std::string error;

  Tiers() {
    cxlt_config_t *cfg = nullptr;
    bool ok = cxlt_config_create(&cfg) == CXLT_OK;
    const char *kv[][2] = {{"topology", "emulated"},         {"runtime.huge_pages", "none"},
                           {"geometry.layers", "16"},        {"tiers.0.kind", "hbm"},
                           {"tiers.0.budget", "512MiB"},     {"tiers.1.kind", "dram"},
                           {"tiers.1.budget", "512MiB"},     {"tiers.2.kind", "cxl"},
                           {"tiers.2.budget", "1GiB"},       {"runtime.high_watermark", "1"},
                           {"runtime.low_watermark", "1"},   {"runtime.migration_threads", "2"},
                           {"store.capacity", "1048576"}};
    for (auto &p : kv) ok = ok && cxlt_config_set(cfg, p[0], p[1]) == CXLT_OK;
    ok = ok && cxlt_runtime_open_config(cfg, &rt) == CXLT_OK;
    cxlt_config_destroy(cfg);
    if (!ok) {
      error = cxlt_last_error();
      rt = nullptr;
      return;
    }
    // Fill the three tiers (2,048 blocks), writing every block so that no copy later meets a
    // page touched for the first time.
    for (int burst = 0; burst < 4 && ok; ++burst) {
      next_keys();
      ok = cxlt_block_admit_batch(rt, keys.data(), kBurst, 0, blocks.data(), nullptr) == CXLT_OK;
      for (size_t i = 0; ok && i < kBurst; ++i) std::memset(blocks[i].data, static_cast<int>(i), blocks[i].bytes);
    }
    ok = ok && cxlt_runtime_wait_idle(rt, 60000) == CXLT_OK;
    if (!ok) error = cxlt_last_error();
  }
  ~Tiers() { cxlt_runtime_close(rt); }

  void next_keys() {
    for (size_t i = 0; i < kBurst; ++i) keys[i] = cxlt_key_from_sequence(next_sequence, i);
    ++next_sequence;
  }
  uint64_t demoted_bytes() const {
    cxlt_stats_t st;
    std::memset(&st, 0, sizeof st);
    st.size = sizeof st;
    st.version = CXLT_STATS_VERSION;
    if (cxlt_stats_get(rt, &st) != CXLT_OK) return 0;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < st.tier_count; ++i)
      for (uint32_t j = i + 1; j < st.tier_count; ++j) bytes += st.pair_bytes[i][j];
    return bytes;
  }
};

void report(benchmark::State &state, uint64_t bytes) {
  state.counters["blocks_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBurst), benchmark::Counter::kIsRate);
  state.counters["demotion_GBps"] = benchmark::Counter(static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsRate);
}

// Checks after the timed loop that every burst demoted what it should (two tier levels of
// 512 blocks): a burst that found room would measure nothing.
void check_demotions(benchmark::State &state, uint64_t bytes) {
  const uint64_t want = state.iterations() * 2 * kBurst * kBlockBytes;
  if (bytes < want)
    state.SkipWithError(("the bursts demoted " + std::to_string(bytes) + " bytes, not " + std::to_string(want)).c_str());
}

// One burst a timed iteration (new keys each, made outside the timing), admitted by `admit`.
template <class Admit>
void run_bursts(benchmark::State &state, Admit admit) {
  Tiers t;
  if (!t.rt) return state.SkipWithError(t.error.c_str());
  const uint64_t before = t.demoted_bytes();
  for (auto _ : state) {
    state.PauseTiming();
    t.next_keys();
    state.ResumeTiming();
    if (!admit(t)) return state.SkipWithError(cxlt_last_error());
  }
  const uint64_t bytes = t.demoted_bytes() - before;
  report(state, bytes);
  check_demotions(state, bytes);
}

void BM_AdmitBurst512(benchmark::State &state) {
  run_bursts(state, [](Tiers &t) {
    return cxlt_block_admit_batch(t.rt, t.keys.data(), kBurst, 0, t.blocks.data(), nullptr) == CXLT_OK;
  });
}
BENCHMARK(BM_AdmitBurst512)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_AdmitSingles512(benchmark::State &state) {
  run_bursts(state, [](Tiers &t) {
    for (size_t i = 0; i < kBurst; ++i)
      if (cxlt_block_admit(t.rt, t.keys[i], &t.blocks[i]) != CXLT_OK) return false;
    return true;
  });
}
BENCHMARK(BM_AdmitSingles512)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MemcpySameBytes(benchmark::State &state) {
  // Two levels of 512 blocks, as the burst copies: each thread copies its share of a 512 MiB
  // source into a 512 MiB destination, twice.
  std::vector<char> src(kBurst * kBlockBytes, 1), dst(kBurst * kBlockBytes, 2);
  const size_t share = kBurst / kThreads * kBlockBytes;
  for (auto _ : state) {
    for (int level = 0; level < 2; ++level) {
      std::vector<std::thread> th;
      for (unsigned k = 0; k < kThreads; ++k)
        th.emplace_back([&, k] { std::memcpy(dst.data() + k * share, src.data() + k * share, share); });
      for (auto &x : th) x.join();
    }
    benchmark::DoNotOptimize(dst.data());
  }
  state.counters["blocks_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBurst), benchmark::Counter::kIsRate);
  state.counters["demotion_GBps"] = benchmark::Counter(
      static_cast<double>(state.iterations() * 2 * kBurst * kBlockBytes) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MemcpySameBytes)->Unit(benchmark::kMillisecond)->UseRealTime();

CXLT_BENCH_RATIO("admission of a 512-block burst into full tiers vs multithreaded memcpy of its demotions",
                 "BM_AdmitBurst512/real_time", "BM_MemcpySameBytes/real_time", 0.8);
CXLT_BENCH_RATIO("the same 512 admissions one call at a time vs multithreaded memcpy", "BM_AdmitSingles512/real_time",
                 "BM_MemcpySameBytes/real_time", 0);

}  // namespace
