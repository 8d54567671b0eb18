// SPDX-License-Identifier: Apache-2.0
// The GPU benchmark's measurements (see gpu_bench.hpp). Candidates go through the real tier
// backends ("cuda" for device memory, "cuda-host" over "emulated" for pinned host memory), one
// block per call from `threads` threads per direction, exactly as the runtime's migration
// workers call them; baselines are one cuMemcpyAsync of the whole pass per direction from
// cuMemAllocHost memory. Each run measures the baseline then the candidate, so drift in the
// machine affects both. The bytes are checked after the last pass (host -> device -> host).
#include "gpu_bench.hpp"

#include "lib/memory/backend.hpp"
// The CUDA tier's driver loader, copy engine and kernels: the bench drives them as the cuda
// backend does, to compare each path with the plain driver call of the same bytes.
#include "tiers/cuda/copy_engine.hpp"
#include "tiers/cuda/driver.hpp"
#include "tiers/cuda/kv_kernels.hpp"
#include "tiers/cuda/kv_layout.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace cxltier::gpu_bench {

namespace {

using Clock = std::chrono::steady_clock;
using cuda::CUresult;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

void check(const cuda::DriverApi &api, CUresult r, const char *what) {
  if (r != cuda::kSuccess) fail(CXLT_ERROR_BACKEND, "gpu bench: ", what, " failed: ", cuda::result_string(&api, r));
}

// Runs fn(block index) for blocks [0, n) on `threads` threads; throws the first failure.
void parallel_blocks(unsigned threads, uint32_t n, const std::function<cxlt_result_t(uint32_t)> &fn) {
  std::atomic<uint32_t> next{0};
  std::atomic<bool> failed{false};
  std::string first_error;
  std::mutex mu;
  auto work = [&] {
    for (uint32_t i; !failed && (i = next.fetch_add(1)) < n;) {
      cxlt_result_t r = fn(i);
      if (r != CXLT_OK) {
        std::lock_guard lk(mu);
        if (!failed.exchange(true)) first_error = "block " + std::to_string(i) + ": " + backend_last_error();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work);
  for (std::thread &t : pool) t.join();
  if (failed) fail(CXLT_ERROR_BACKEND, "gpu bench: a copy failed: ", first_error);
}

struct Extents {
  TierBackend &b;
  std::vector<TierExtent> list;
  explicit Extents(TierBackend &backend) : b(backend) {}
  ~Extents() {
    for (const TierExtent &e : list) b.try_free_extent(e);
  }
  char *take(size_t bytes) {
    list.push_back(b.alloc_extent(bytes));
    return static_cast<char *>(list.back().base);
  }
};

struct PinnedHost {
  const cuda::DriverApi &api;
  void *p = nullptr;
  PinnedHost(const cuda::DriverApi &a, size_t bytes) : api(a) { check(api, api.cuMemAllocHost(&p, bytes), "cuMemAllocHost"); }
  ~PinnedHost() {
    if (p) api.cuMemFreeHost(p);
  }
};

void measure_device(const GpuDevice &gpu, const Params &p, std::vector<Row> &rows) {
  const cuda::DriverApi &api = cuda::driver().api;
  const uint64_t B = p.block_bytes, N = p.blocks, pass = B * N;
  auto say = [&](const std::string &s) {
    if (p.progress) p.progress("gpu " + std::to_string(gpu.ordinal) + ": " + s);
  };

  TierBackendParams dp;
  dp.tier_name = "bench-gpu" + std::to_string(gpu.ordinal);
  dp.kind = TierKind::gpu;
  dp.set_option(CXLT_OPTION_DEVICE, std::to_string(gpu.ordinal));
  dp.block_bytes = B;
  dp.budget_bytes = 2 * pass;
  TierBackend dev("cuda", dp);
  TierBackendParams hp;
  hp.tier_name = "bench-host";
  hp.kind = TierKind::dram;
  hp.set_option(CXLT_OPTION_DEVICE, std::to_string(gpu.ordinal));
  hp.block_bytes = B;
  hp.budget_bytes = 2 * pass;
  hp.huge_pages = HugePageMode::thp;
  hp.set_option(CXLT_OPTION_INNER_BACKEND, "emulated");
  TierBackend host("cuda-host", hp);

  Extents dx(dev), hx(host);
  char *dA = dx.take(pass), *dB = dx.take(pass);
  char *hA = hx.take(pass), *hB = hx.take(pass);
  for (uint64_t i = 0; i < pass; ++i) hA[i] = static_cast<char>((i * 131u + i / 4096u) & 0xff);
  std::memset(hB, 0, pass);

  cuda::CUdevice cdev = 0;
  cuda::CUcontext ctx = nullptr;
  check(api, api.cuDeviceGet(&cdev, gpu.ordinal), "cuDeviceGet");
  check(api, api.cuDevicePrimaryCtxRetain(&ctx, cdev), "cuDevicePrimaryCtxRetain");
  struct CtxGuard {
    const cuda::DriverApi &api;
    cuda::CUdevice dev;
    ~CtxGuard() { api.cuDevicePrimaryCtxRelease(dev); }
  } ctx_guard{api, cdev};
  cuda::ScopedContext scope(api, ctx);
  check(api, scope.result(), "cuCtxPushCurrent");
  PinnedHost pinA(api, pass), pinB(api, pass);
  std::memcpy(pinA.p, hA, pass);
  cuda::CUstream s0 = nullptr, s1 = nullptr;
  check(api, api.cuStreamCreate(&s0, cuda::kStreamNonBlocking), "cuStreamCreate");
  check(api, api.cuStreamCreate(&s1, cuda::kStreamNonBlocking), "cuStreamCreate");
  struct StreamGuard {
    const cuda::DriverApi &api;
    cuda::CUstream a, b;
    ~StreamGuard() {
      api.cuStreamDestroy(a);
      api.cuStreamDestroy(b);
    }
  } stream_guard{api, s0, s1};
  const auto dA_ptr = static_cast<cuda::CUdeviceptr>(reinterpret_cast<uintptr_t>(dA));
  const auto dB_ptr = static_cast<cuda::CUdeviceptr>(reinterpret_cast<uintptr_t>(dB));

  const TierOps &dops = dev.ops(), &hops = host.ops();
  void *dstate = dev.state();
  const std::string per_block = "cuda backend, 1 block per call, " + std::to_string(p.threads) + " thread(s)";
  const std::string plain = "cuMemcpyAsync of the pass from cuMemAllocHost memory, one stream per direction";

  // --- baselines: one copy of the whole pass per direction
  auto base_h2d = [&] {
    auto t0 = Clock::now();
    check(api, api.cuMemcpyHtoDAsync(dA_ptr, pinA.p, pass, s0), "cuMemcpyHtoDAsync");
    check(api, api.cuStreamSynchronize(s0), "cuStreamSynchronize");
    return pass / seconds(t0, Clock::now()) / 1e9;
  };
  auto base_d2h = [&] {
    auto t0 = Clock::now();
    check(api, api.cuMemcpyDtoHAsync(pinB.p, dA_ptr, pass, s0), "cuMemcpyDtoHAsync");
    check(api, api.cuStreamSynchronize(s0), "cuStreamSynchronize");
    return pass / seconds(t0, Clock::now()) / 1e9;
  };
  auto base_d2d = [&] {
    auto t0 = Clock::now();
    check(api, api.cuMemcpyDtoDAsync(dB_ptr, dA_ptr, pass, s0), "cuMemcpyDtoDAsync");
    check(api, api.cuStreamSynchronize(s0), "cuStreamSynchronize");
    return pass / seconds(t0, Clock::now()) / 1e9;
  };
  auto base_bidir = [&] {
    auto t0 = Clock::now();
    check(api, api.cuMemcpyHtoDAsync(dB_ptr, pinA.p, pass, s0), "cuMemcpyHtoDAsync");
    check(api, api.cuMemcpyDtoHAsync(pinB.p, dA_ptr, pass, s1), "cuMemcpyDtoHAsync");
    check(api, api.cuStreamSynchronize(s0), "cuStreamSynchronize");
    check(api, api.cuStreamSynchronize(s1), "cuStreamSynchronize");
    return 2.0 * pass / seconds(t0, Clock::now()) / 1e9;
  };
  // --- candidates: the backends, block by block, as the runtime calls them
  auto h2d_block = [&](char *d, uint32_t i) { return dops.ext_copy_in(dstate, d + i * B, hA + i * B, B, &hops); };
  auto d2h_block = [&](char *h, uint32_t i) { return dops.ext_copy_out(dstate, h + i * B, dA + i * B, B, &hops); };
  auto cand_h2d = [&] {
    auto t0 = Clock::now();
    parallel_blocks(p.threads, p.blocks, [&](uint32_t i) { return h2d_block(dA, i); });
    return pass / seconds(t0, Clock::now()) / 1e9;
  };
  auto cand_d2h = [&] {
    auto t0 = Clock::now();
    parallel_blocks(p.threads, p.blocks, [&](uint32_t i) { return d2h_block(hB, i); });
    return pass / seconds(t0, Clock::now()) / 1e9;
  };
  auto cand_d2d = [&] {
    auto t0 = Clock::now();
    parallel_blocks(p.threads, p.blocks,
                    [&](uint32_t i) { return dops.ext_copy_in(dstate, dB + i * B, dA + i * B, B, &dops); });
    return pass / seconds(t0, Clock::now()) / 1e9;
  };
  auto cand_bidir = [&] {
    auto t0 = Clock::now();
    std::exception_ptr err;
    std::thread up([&] {
      try {
        parallel_blocks(p.threads, p.blocks, [&](uint32_t i) { return h2d_block(dB, i); });
      } catch (...) {
        err = std::current_exception();
      }
    });
    parallel_blocks(p.threads, p.blocks, [&](uint32_t i) { return d2h_block(hB, i); });
    up.join();
    if (err) std::rethrow_exception(err);
    return 2.0 * pass / seconds(t0, Clock::now()) / 1e9;
  };

  auto measure = [&](const std::string &what, const std::string &method, const std::function<double()> &base,
                     const std::function<double()> &cand) {
    say(what + " (" + method + ")");
    Row row;
    row.device = gpu.ordinal;
    row.what = what;
    row.method = method;
    row.baseline = plain;
    for (unsigned r = 0; r < p.warmup + p.runs; ++r) {
      double b = base(), c = cand();
      if (r >= p.warmup) {
        row.baseline_gbps_runs.push_back(b);
        row.gbps_runs.push_back(c);
      }
    }
    row.measured = true;
    rows.push_back(std::move(row));
  };
  measure("H2D", per_block, base_h2d, cand_h2d);
  measure("D2H", per_block, base_d2h, cand_d2h);
  measure("D2D", per_block, base_d2d, cand_d2d);
  measure("bidirectional", per_block + " each way", base_bidir, cand_bidir);

  // Integrity of the candidate path: hA -> dA (H2D pass) -> hB (D2H pass).
  cand_h2d();
  std::memset(hB, 0, pass);
  cand_d2h();
  if (std::memcmp(hA, hB, pass) != 0)
    fail(CXLT_ERROR_BACKEND, "gpu bench: device ", gpu.ordinal, ": bytes differ after host -> device -> host");

  // --- per-layer layouts: gather (arena dA -> contiguous hB) and scatter (hA -> arena dB)
  const uint32_t segments = 2 * p.layers;
  if (B % segments != 0) {
    for (const char *w : {"gather D2H", "scatter H2D"}) {
      Row row;
      row.device = gpu.ordinal;
      row.what = w;
      row.reason = "a block of " + std::to_string(B) + " bytes does not split into " + std::to_string(segments) + " segments";
      rows.push_back(row);
    }
    return;
  }
  const cuda::KvLayout L = cuda::kv_layout_for_block(B, segments);
  cuda::CopyEngine engine(api, ctx, 2);
  cuda::KvKernels kernels(api, ctx);
  cuda::CUdeviceptr hB_dev = 0, hA_dev = 0;
  const bool mapped = api.cuMemHostGetDevicePointer(&hB_dev, hB, 0) == cuda::kSuccess &&
                      api.cuMemHostGetDevicePointer(&hA_dev, hA, 0) == cuda::kSuccess;
  auto gather_memcpy = [&] {
    auto t0 = Clock::now();
    parallel_blocks(p.threads, p.blocks, [&](uint32_t i) {
      auto segs = cuda::plan_gather(L, dA_ptr, N, i, reinterpret_cast<uintptr_t>(hB) + i * B);
      std::string e;
      cxlt_result_t r = engine.copy(cuda::Direction::d2h, segs.data(), segs.size(), &e);
      if (r != CXLT_OK) backend_set_error(e);
      return r;
    });
    return pass / seconds(t0, Clock::now()) / 1e9;
  };
  auto scatter_memcpy = [&] {
    auto t0 = Clock::now();
    parallel_blocks(p.threads, p.blocks, [&](uint32_t i) {
      auto segs = cuda::plan_scatter(L, reinterpret_cast<uintptr_t>(hA) + i * B, dB_ptr, N, i);
      std::string e;
      cxlt_result_t r = engine.copy(cuda::Direction::h2d, segs.data(), segs.size(), &e);
      if (r != CXLT_OK) backend_set_error(e);
      return r;
    });
    return pass / seconds(t0, Clock::now()) / 1e9;
  };
  auto by_kernel = [&](bool gather) {
    auto t0 = Clock::now();
    parallel_blocks(p.threads, p.blocks, [&](uint32_t i) {
      cuda::CopyEngine::Ticket t;
      std::string e;
      cxlt_result_t r = engine.submit_with(
          gather ? cuda::Direction::d2h : cuda::Direction::h2d,
          [&](cuda::CUstream st) {
            return gather ? kernels.enqueue_gather(st, dA_ptr, N * L.extent_bytes, i * L.extent_bytes, L.extent_bytes,
                                                   L.segments(), hB_dev + i * B)
                          : kernels.enqueue_scatter(st, hA_dev + i * B, N * L.extent_bytes, i * L.extent_bytes,
                                                    L.extent_bytes, L.segments(), dB_ptr);
          },
          &t, &e);
      if (r == CXLT_OK) r = engine.wait(t, &e);
      if (r != CXLT_OK) backend_set_error(e);
      return r;
    });
    return pass / seconds(t0, Clock::now()) / 1e9;
  };
  const std::string lay = std::to_string(segments) + " segments of " + format_bytes(L.extent_bytes);
  measure("gather D2H", "per-layer (" + lay + "), batched cuMemcpyAsync", base_d2h, gather_memcpy);
  measure("scatter H2D", "per-layer (" + lay + "), batched cuMemcpyAsync", base_h2d, scatter_memcpy);
  if (kernels.available() && mapped) {
    measure("gather D2H", "per-layer (" + lay + "), kernel writing mapped host memory", base_d2h,
            [&] { return by_kernel(true); });
    measure("scatter H2D", "per-layer (" + lay + "), kernel reading mapped host memory", base_h2d,
            [&] { return by_kernel(false); });
    // The kernel's gather must equal the memcpy gather, byte for byte.
    gather_memcpy();
    std::vector<char> ref(hB, hB + pass);
    std::memset(hB, 0, pass);
    by_kernel(true);
    if (std::memcmp(ref.data(), hB, pass) != 0)
      fail(CXLT_ERROR_BACKEND, "gpu bench: device ", gpu.ordinal, ": the gather kernel's bytes differ from batched memcpy's");
  } else {
    for (const char *w : {"gather D2H", "scatter H2D"}) {
      Row row;
      row.device = gpu.ordinal;
      row.what = w;
      row.method = "per-layer, kernel";
      row.reason = !kernels.available() ? kernels.why() : "host memory has no device mapping";
      rows.push_back(row);
    }
  }
}

}  // namespace

Result run(const Params &params) {
  validate(params);
  Result r;
  r.params = params;
  const GpuDiscovery &g = gpu_discovery();
  r.devices = g.devices;
  if (!g.available) {
    r.why = g.why;
    return r;
  }
  if (params.device >= static_cast<int>(g.devices.size()))
    fail(CXLT_ERROR_INVALID_ARGUMENT, "gpu bench: device ", params.device, " does not exist (", g.devices.size(),
         " device(s))");
  r.available = true;
  for (const GpuDevice &d : g.devices)
    if (params.device < 0 || params.device == d.ordinal) measure_device(d, params, r.rows);
  return r;
}

}  // namespace cxltier::gpu_bench
