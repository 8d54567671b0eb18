// SPDX-License-Identifier: Apache-2.0
// Micro-benchmark: the copy kernels of lib/memory/copy.hpp on 5 MiB blocks, against libc
// memcpy in the same binary. Source and destination rotate over 16 blocks each (80 MiB per
// side, larger than the last-level cache), so the figures are memory bandwidth, not cache.
// GB/s = 10^9 bytes copied per CPU second (bytes counted once), higher is better. The thread
// is pinned (CXLT_BENCH_CPU, default 0).
#include "lib/memory/copy.hpp"
#include "tools/bench_stats.hpp"

#include <benchmark/benchmark.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kBlock = 5u << 20;
constexpr int kBlocks = 16;

void pin_thread(int index) {
  int first = 0;
  if (const char *c = std::getenv("CXLT_BENCH_CPU")) first = std::atoi(c);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  cxlt_bench_stats::pin_to_cpu(static_cast<int>((first + index) % (ncpu > 0 ? ncpu : 1)));
}

// Touched, THP-advised host memory, as the emulated and numa backends hand out.
struct Buffer {
  size_t bytes;
  char *p;
  explicit Buffer(size_t n) : bytes(n) {
    void *m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p = m == MAP_FAILED ? nullptr : static_cast<char *>(m);
    if (p) {
      madvise(p, n, MADV_HUGEPAGE);
      std::memset(p, 0x5a, n);
    }
  }
  ~Buffer() {
    if (p) munmap(p, bytes);
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
};

void BM_Copy5MiB(benchmark::State &state, cxltier::CopyKernel kernel) {
  pin_thread(0);
  if (!cxltier::copy_kernel_available(kernel)) {
    state.SkipWithError("this CPU lacks the kernel");
    return;
  }
  cxltier::CopyFn fn = cxltier::copy_kernel_fn(kernel);
  Buffer src(kBlock * kBlocks), dst(kBlock * kBlocks);
  if (!src.p || !dst.p) {
    state.SkipWithError("mmap failed");
    return;
  }
  int i = 0;
  for (auto _ : state) {
    fn(dst.p + size_t(i) * kBlock, src.p + size_t((i + 5) % kBlocks) * kBlock, kBlock);
    benchmark::ClobberMemory();
    i = (i + 1) % kBlocks;
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kBlock));
  state.counters["GB/s"] = benchmark::Counter(double(state.iterations()) * double(kBlock), benchmark::Counter::kIsRate);
  state.SetLabel(cxltier::copy_kernel_name(cxltier::resolve_copy_kernel(kernel)));
}

void register_all() {
  for (cxltier::CopyKernel k : cxltier::available_copy_kernels()) {
    std::string name = std::string("BM_Copy5MiB/") + cxltier::copy_kernel_name(k);
    // One thread: one call copies one block; the migration engine runs blocks in parallel.
    // Rates are per CPU second (the default), so other processes on a shared machine do not
    // count against the kernel.
    benchmark::RegisterBenchmark(name.c_str(), BM_Copy5MiB, k);
  }
}

}  // namespace

int main(int argc, char **argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
