// SPDX-License-Identifier: Apache-2.0
// Micro-benchmark: the batch calls of the C ABI against the single-block calls they replace.
// cxlt_prefix_lookup of a 512-block prompt (all resident) against 512 cxlt_block_lookup calls,
// and with pins: cxlt_prefix_lookup(CXLT_LOOKUP_PIN) + cxlt_block_unpin_batch against 512
// cxlt_block_pin + 512 cxlt_block_unpin. Null tiers (the bookkeeping only: key hashing happens
// in neither). Time per 512 blocks, lower is better; the ratio is single calls / batch (higher
// is better). The thread is pinned (CXLT_BENCH_CPU, default 0).
#include "bench_ratio.hpp"

#include <cxltier/cxltier.h>

#include <benchmark/benchmark.h>

#include <vector>

namespace {

constexpr size_t kPrompt = 512;

struct Setup {
  cxlt_runtime_t *rt = nullptr;
  std::vector<cxlt_key_t> keys;
  std::vector<cxlt_block_t> blocks;
  Setup() {
    cxlt_config_t *cfg = nullptr;
    bool ok = cxlt_config_create(&cfg) == CXLT_OK;
    const char *kv[][2] = {{"topology", "emulated"},     {"runtime.huge_pages", "none"},
                           {"tiers.0.kind", "hbm"},      {"tiers.0.backend", "null"},
                           {"tiers.0.budget", "4GiB"},   {"tiers.1.kind", "dram"},
                           {"tiers.1.backend", "null"},  {"tiers.1.budget", "8GiB"}};
    for (auto &p : kv) ok = ok && cxlt_config_set(cfg, p[0], p[1]) == CXLT_OK;
    ok = ok && cxlt_runtime_open_config(cfg, &rt) == CXLT_OK;
    cxlt_config_destroy(cfg);
    if (!ok) {
      rt = nullptr;
      return;
    }
    for (size_t i = 0; i < kPrompt; ++i) keys.push_back(cxlt_key_from_sequence(1, i));
    blocks.resize(kPrompt);
    if (cxlt_block_admit_batch(rt, keys.data(), kPrompt, 0, blocks.data(), nullptr) != CXLT_OK) {
      cxlt_runtime_close(rt);
      rt = nullptr;
    }
  }
  ~Setup() { cxlt_runtime_close(rt); }
};

void BM_PrefixLookup512(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  Setup s;
  if (!s.rt) return state.SkipWithError(cxlt_last_error());
  size_t matched = 0;
  for (auto _ : state) {
    if (cxlt_prefix_lookup(s.rt, s.keys.data(), kPrompt, 0, &matched, s.blocks.data()) != CXLT_OK || matched != kPrompt)
      return state.SkipWithError("prefix lookup failed");
    benchmark::DoNotOptimize(s.blocks.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kPrompt));
}
BENCHMARK(BM_PrefixLookup512);

void BM_SingleLookups512(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  Setup s;
  if (!s.rt) return state.SkipWithError(cxlt_last_error());
  for (auto _ : state) {
    for (size_t i = 0; i < kPrompt; ++i)
      if (cxlt_block_lookup(s.rt, s.keys[i], &s.blocks[i]) != CXLT_OK) return state.SkipWithError("lookup failed");
    benchmark::DoNotOptimize(s.blocks.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kPrompt));
}
BENCHMARK(BM_SingleLookups512);

void BM_PrefixPinUnpin512(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  Setup s;
  if (!s.rt) return state.SkipWithError(cxlt_last_error());
  size_t matched = 0;
  for (auto _ : state) {
    if (cxlt_prefix_lookup(s.rt, s.keys.data(), kPrompt, CXLT_LOOKUP_PIN, &matched, s.blocks.data()) != CXLT_OK ||
        matched != kPrompt || cxlt_block_unpin_batch(s.rt, s.keys.data(), kPrompt) != CXLT_OK)
      return state.SkipWithError("prefix pin failed");
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kPrompt));
}
BENCHMARK(BM_PrefixPinUnpin512);

void BM_SinglePinUnpin512(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  Setup s;
  if (!s.rt) return state.SkipWithError(cxlt_last_error());
  for (auto _ : state) {
    for (size_t i = 0; i < kPrompt; ++i)
      if (cxlt_block_pin(s.rt, s.keys[i], &s.blocks[i]) != CXLT_OK) return state.SkipWithError("pin failed");
    for (size_t i = 0; i < kPrompt; ++i)
      if (cxlt_block_unpin(s.rt, s.keys[i]) != CXLT_OK) return state.SkipWithError("unpin failed");
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kPrompt));
}
BENCHMARK(BM_SinglePinUnpin512);

CXLT_BENCH_RATIO("cxlt_prefix_lookup of 512 keys vs 512 cxlt_block_lookup", "BM_PrefixLookup512",
                 "BM_SingleLookups512", 10);
CXLT_BENCH_RATIO("prefix_lookup(PIN) + unpin_batch of 512 vs 512 pin + 512 unpin", "BM_PrefixPinUnpin512",
                 "BM_SinglePinUnpin512", 10);

}  // namespace
