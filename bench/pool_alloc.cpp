// SPDX-License-Identifier: Apache-2.0
// Micro-benchmark: one block slot allocate+free from a BlockPool, against the allocators a
// runtime without pools would call for the same 5 MiB: numa_alloc_onnode+numa_free and
// memkind_malloc+memkind_free (memkind only where built). Time per pair, lower is better.
// Goal: the pool >= 100x faster than either baseline, median <= 100 ns.
// The thread is pinned to one CPU (CXLT_BENCH_CPU, default 0) so runs are comparable.
#include "bench_ratio.hpp"
#include "lib/memory/pool.hpp"
#include "lib/memory/backend.hpp"

#include "cxlt_config.h"

#include <benchmark/benchmark.h>
#include <numa.h>
#include <sched.h>

#if CXLT_HAVE_MEMKIND
#include <memkind.h>
#endif

#include <cstdlib>
#include <memory>

namespace {

constexpr size_t kBlock = 5u << 20;  // the canonical model's block, 5 MiB


int bench_node() {
  int node = numa_available() < 0 ? -1 : numa_node_of_cpu(0);
  return node < 0 ? 0 : node;
}

// The pool: numa backend on the pinned CPU's node, 16 blocks reserved up front (80 MiB), so
// the loop measures the slot stack, not the kernel. One slot stays allocated so the loop pops
// from a non-trivial stack.
void BM_PoolSlotAllocFree(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  cxltier::TierBackendParams p;
  p.numa_nodes = {static_cast<unsigned>(bench_node())};
  cxltier::TierBackend backend("numa", p);
  cxltier::BlockPool pool(backend, {"bench", kBlock, 16 * kBlock, 16, true});
  cxltier::SlotId keep;
  if (pool.allocate(&keep) != CXLT_OK) state.SkipWithError("pool allocate failed");
  for (auto _ : state) {
    cxltier::SlotId s;
    cxlt_result_t r = pool.allocate(&s);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(r);
    pool.free(s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PoolSlotAllocFree);

// Baseline: what numa_alloc_onnode costs for the same size (mmap + mbind + munmap). Memory is
// not touched, as the pool loop touches none either.
void BM_NumaAllocOnnodeFree(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  if (numa_available() < 0) {
    state.SkipWithError("no NUMA support");
    return;
  }
  const int node = bench_node();
  for (auto _ : state) {
    void *b = numa_alloc_onnode(kBlock, node);
    benchmark::DoNotOptimize(b);
    numa_free(b, kBlock);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NumaAllocOnnodeFree);

#if CXLT_HAVE_MEMKIND
void BM_MemkindMallocFree(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  for (auto _ : state) {
    void *b = memkind_malloc(MEMKIND_REGULAR, kBlock);
    benchmark::DoNotOptimize(b);
    memkind_free(MEMKIND_REGULAR, b);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MemkindMallocFree);
#endif

}  // namespace

BENCHMARK_MAIN();
