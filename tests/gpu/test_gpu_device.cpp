// SPDX-License-Identifier: Apache-2.0
// The GPU tier on a real GPU: byte integrity of every kind of move (host <-> GPU through the
// runtime, GPU <-> GPU, per-layer gather and scatter by memcpy and by kernel) under concurrency,
// host registration in chunks, a clean failure for an oversized allocation, the C ABI, and the
// PyTorch allocator library. Every test skips, saying why, where no CUDA driver or GPU is
// present (this machine, CI). Built only with the CUDA tier.
#include "lib/memory/backend.hpp"
#include "tiers/cuda/driver.hpp"
#include "lib/topology/gpu.hpp"
#include "tiers/cuda/kv_kernels.hpp"
#include "tiers/cuda/kv_layout.hpp"
#include "lib/memory/tier_ops.hpp"

#include "../runtime/runtime_test_util.hpp"

#include <cxltier/config.hpp>
#include <cxltier/cxltier.h>
#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>
#include <cxltier/topology.hpp>

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace cxltier;

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

bool contains(const std::string &s, const std::string &what) { return s.find(what) != std::string::npos; }

// Skips the test unless a driver and a device are present; gives the driver API and device 0's
// primary context (current on this thread for the test's life) for the test's own copies.
class Gpu : public ::testing::Test {
protected:
  void SetUp() override {
    const GpuDiscovery &d = gpu_discovery();
    if (!d.available) GTEST_SKIP() << d.why;
    api_ = &cuda::driver().api;
    ASSERT_EQ(api_->cuDeviceGet(&dev_, 0), cuda::kSuccess);
    ASSERT_EQ(api_->cuDevicePrimaryCtxRetain(&ctx_, dev_), cuda::kSuccess);
    ASSERT_EQ(api_->cuCtxPushCurrent(ctx_), cuda::kSuccess);
    ASSERT_EQ(api_->cuStreamCreate(&stream_, cuda::kStreamNonBlocking), cuda::kSuccess);
  }
  void TearDown() override {
    if (api_ == nullptr) return;
    if (stream_) api_->cuStreamDestroy(stream_);
    cuda::CUcontext popped = nullptr;
    api_->cuCtxPopCurrent(&popped);
    if (ctx_) api_->cuDevicePrimaryCtxRelease(dev_);
  }
  // Synchronous copies for checking (never through the code under test).
  void to_device(void *dst, const void *src, size_t n) {
    ASSERT_EQ(api_->cuMemcpyHtoDAsync(reinterpret_cast<uintptr_t>(dst), src, n, stream_), cuda::kSuccess);
    ASSERT_EQ(api_->cuStreamSynchronize(stream_), cuda::kSuccess);
  }
  void to_host(void *dst, const void *src, size_t n) {
    ASSERT_EQ(api_->cuMemcpyDtoHAsync(dst, reinterpret_cast<uintptr_t>(src), n, stream_), cuda::kSuccess);
    ASSERT_EQ(api_->cuStreamSynchronize(stream_), cuda::kSuccess);
  }
  static TierBackendParams device_params(uint64_t block, uint32_t segments = 0) {
    TierBackendParams p;
    p.tier_name = "gpu-test";
    p.kind = TierKind::gpu;
    p.set_option(CXLT_OPTION_DEVICE, "0");
    p.block_bytes = block;
    p.budget_bytes = 64 * block;
    if (segments) p.set_option(CXLT_OPTION_KV_SEGMENTS, std::to_string(segments));
    return p;
  }
  static TierBackendParams host_params(uint64_t block) {
    TierBackendParams p;
    p.tier_name = "host-test";
    p.kind = TierKind::dram;
    p.set_option(CXLT_OPTION_DEVICE, "0");
    p.block_bytes = block;
    p.budget_bytes = 64 * block;
    p.huge_pages = HugePageMode::none;
    p.set_option(CXLT_OPTION_INNER_BACKEND, "emulated");
    return p;
  }

  const cuda::DriverApi *api_ = nullptr;
  cuda::CUdevice dev_ = 0;
  cuda::CUcontext ctx_ = nullptr;
  cuda::CUstream stream_ = nullptr;
};

void pattern(std::vector<unsigned char> &v, uint64_t seed) {
  std::mt19937_64 r(seed);
  for (size_t i = 0; i + 8 <= v.size(); i += 8) {
    uint64_t x = r();
    std::memcpy(&v[i], &x, 8);
  }
}

}  // namespace

TEST_F(Gpu, DiscoveryAndTheCApiAgree) {
  const GpuDiscovery &d = gpu_discovery();
  int n = 0;
  ASSERT_EQ(cxlt_gpu_count(&n), CXLT_OK) << cxlt_last_error();
  EXPECT_EQ(static_cast<size_t>(n), d.devices.size());
  cxlt_gpu_info_t info{};
  ASSERT_EQ(cxlt_gpu_info(0, &info), CXLT_OK) << cxlt_last_error();
  EXPECT_EQ(info.total_bytes, d.devices[0].total_bytes);
  EXPECT_GT(info.total_bytes, 0u);
  EXPECT_GT(std::strlen(info.name), 0u);
  EXPECT_TRUE(contains(info.pci_bus_id, ":")) << info.pci_bus_id;
  EXPECT_GE(info.copy_engines, 1);
  Topology t = discover_this_system();
  ASSERT_GE(t.tiers.size(), d.devices.size());
  for (size_t i = 0; i < d.devices.size(); ++i) {
    EXPECT_EQ(t.tiers[i].kind, TierKind::gpu);
    EXPECT_EQ(t.tiers[i].cuda_device, static_cast<int>(i));
  }
}

TEST_F(Gpu, OversizedAllocationFailsCleanly) {
  TierBackend b("cuda", device_params(kMiB));
  const uint64_t total = b.capacity().total_bytes;
  TierExtent e;
  cxlt_result_t r = b.try_alloc_extent(static_cast<size_t>(total * 2), &e);
  EXPECT_EQ(r, CXLT_ERROR_BACKEND);
  EXPECT_TRUE(contains(backend_last_error(), "cuMemAlloc of")) << backend_last_error();
  EXPECT_TRUE(contains(backend_last_error(), "free of")) << backend_last_error();
  // Nothing leaked and the backend still works.
  EXPECT_EQ(b.capacity().allocated_bytes, 0u);
  TierExtent ok = b.alloc_extent(4 * kMiB);
  EXPECT_EQ(ok.flags, CXLT_EXTENT_DEVICE);
  b.free_extent(ok);
}

TEST_F(Gpu, HostRegistrationInChunks) {
  setenv("CXLT_CUDA_REGISTER_CHUNK", "8MiB", 1);  // read at initialize: 64 MiB becomes 8 calls
  TierBackend host("cuda-host", host_params(kMiB));
  unsetenv("CXLT_CUDA_REGISTER_CHUNK");
  EXPECT_TRUE(contains(host.describe(), "chunks of at most 8 MiB")) << host.describe();
  TierExtent e = host.alloc_extent(64 * kMiB);
  auto *base = static_cast<char *>(e.base);
  for (int i = 0; i < 8; ++i) {
    unsigned flags = 0;
    ASSERT_EQ(api_->cuMemHostGetFlags(&flags, base + i * 8 * kMiB), cuda::kSuccess) << "chunk " << i << " not registered";
    EXPECT_TRUE(flags & cuda::kMemHostRegisterDeviceMap) << flags;
  }
  // Registered memory moves by DMA both ways.
  std::vector<unsigned char> want(64 * kMiB);
  pattern(want, 1);
  std::memcpy(base, want.data(), want.size());
  cuda::CUdeviceptr d = 0;
  ASSERT_EQ(api_->cuMemAlloc(&d, want.size()), cuda::kSuccess);
  to_device(reinterpret_cast<void *>(d), base, want.size());
  std::memset(base, 0, want.size());
  to_host(base, reinterpret_cast<void *>(d), want.size());
  EXPECT_EQ(std::memcmp(base, want.data(), want.size()), 0);
  api_->cuMemFree(d);
  host.free_extent(e);
}

TEST_F(Gpu, BackendCopiesBothDirectionsAtOnceKeepBytes) {
  const uint64_t B = 4 * kMiB;
  const uint32_t N = 16;
  TierBackend dev("cuda", device_params(B));
  TierBackend host("cuda-host", host_params(B));
  TierExtent de = dev.alloc_extent(2 * N * B), he = host.alloc_extent(2 * N * B);
  auto *d = static_cast<char *>(de.base), *h = static_cast<char *>(he.base);
  std::vector<unsigned char> src(N * B);
  pattern(src, 2);
  std::memcpy(h, src.data(), src.size());           // first half of host: the source of uploads
  to_device(d + N * B, src.data(), src.size());     // second half of device: the source of downloads
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uint32_t i = static_cast<uint32_t>(t); i < N; i += 4) {
        if (dev.ops().ext_copy_in(dev.state(), d + i * B, h + i * B, B, &host.ops()) != CXLT_OK) ++failures;
        if (dev.ops().ext_copy_out(dev.state(), h + (N + i) * B, d + (N + i) * B, B, &host.ops()) != CXLT_OK) ++failures;
      }
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << backend_last_error();
  std::vector<unsigned char> back(N * B);
  to_host(back.data(), d, back.size());
  EXPECT_EQ(back, src) << "host -> device copies";
  EXPECT_EQ(std::memcmp(h + N * B, src.data(), src.size()), 0) << "device -> host copies";
  // Device to device through copy_in with a cuda source.
  ASSERT_EQ(dev.ops().ext_copy_in(dev.state(), d + N * B, d, B, &dev.ops()), CXLT_OK) << backend_last_error();
  to_host(back.data(), d + N * B, B);
  EXPECT_EQ(std::memcmp(back.data(), src.data(), B), 0);
  dev.free_extent(de);
  host.free_extent(he);
}

TEST_F(Gpu, PerLayerMovesGatherAndScatterByMemcpyAndByKernel) {
  for (const char *method : {"memcpy", "kernel"}) {
    SCOPED_TRACE(method);
    setenv("CXLT_CUDA_GATHER", method, 1);
    const uint32_t segments = 2 * 8;
    const uint64_t E = 16 * 1024, B = segments * E, slots = 4;
    TierBackend dev("cuda", device_params(B, segments));
    unsetenv("CXLT_CUDA_GATHER");
    TierBackend host("cuda-host", host_params(B));  // registered with DEVICEMAP: the kernel may reach it
    EXPECT_TRUE(contains(dev.describe(), "per-layer")) << dev.describe();
    TierExtent de = dev.alloc_extent(slots * B), he = host.alloc_extent(2 * B);
    auto *arena = static_cast<char *>(de.base), *h = static_cast<char *>(he.base);
    std::vector<unsigned char> block(B);
    pattern(block, 3);
    std::memcpy(h, block.data(), B);
    // Scatter into slot 2 (its handle is base + 2 * B, as the pool computes it).
    ASSERT_EQ(dev.ops().ext_copy_in(dev.state(), arena + 2 * B, h, B, &host.ops()), CXLT_OK) << backend_last_error();
    std::vector<unsigned char> raw(slots * B);
    to_host(raw.data(), arena, raw.size());
    const cuda::KvLayout L = cuda::kv_layout_for_block(B, segments);
    for (uint32_t i = 0; i < segments; ++i)
      ASSERT_EQ(std::memcmp(raw.data() + L.arena_offset(slots, 2, i), block.data() + L.block_offset(i), E), 0)
          << "segment " << i << " is not where the per-layer layout puts it";
    // Gather it back out.
    std::memset(h + B, 0, B);
    ASSERT_EQ(dev.ops().ext_copy_out(dev.state(), h + B, arena + 2 * B, B, &host.ops()), CXLT_OK) << backend_last_error();
    EXPECT_EQ(std::memcmp(h + B, block.data(), B), 0);
    // A partial block is refused by name.
    EXPECT_EQ(dev.ops().ext_copy_out(dev.state(), h + B, arena + 2 * B, B / 2, &host.ops()), CXLT_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(backend_last_error(), "whole blocks")) << backend_last_error();
    dev.free_extent(de);
    host.free_extent(he);
  }
}

TEST_F(Gpu, TheEmbeddedKernelsLoad) {
  cuda::KvKernels k(*api_, ctx_);
  EXPECT_TRUE(k.available()) << k.why();
}

TEST_F(Gpu, RuntimeMovesKeepEveryByteUnderConcurrency) {
  RuntimeConfig cfg;
  cfg.geometry = cxlt_test::small_geometry();  // 32 KiB blocks
  cfg.topology = "this-system";
  cfg.huge_pages = HugePages::none;
  cfg.extent_blocks = 4;
  cfg.migration_threads = 2;
  const uint64_t B = cfg.geometry.bytes();
  TierConfig gpu;
  gpu.name = "gpu";
  gpu.kind = TierKind::gpu;
  gpu.budget_bytes = 16 * B;
  TierConfig host;
  host.name = "host";
  host.numa_nodes = {0};
  host.budget_bytes = 256 * B;
  cfg.tiers = {gpu, host};
  std::unique_ptr<Runtime> rt = Runtime::open(cfg);
  ASSERT_EQ(std::string(rt->tier_info(0).backend), "cuda");
  EXPECT_EQ(rt->copy_method(0, 1), "backend:cuda");
  EXPECT_EQ(rt->copy_method(1, 0), "backend:cuda");

  auto write = [&](const Block &b, const Key &k, uint64_t v) {
    std::vector<unsigned char> buf(B);
    cxlt_test::fill_block(buf.data(), B, k, v);
    if (b.tier == 0) to_device(b.data, buf.data(), B);
    else std::memcpy(b.data, buf.data(), B);
  };
  auto check = [&](const Block &b, const Key &k, uint64_t *v) {
    std::vector<unsigned char> buf(B);
    if (b.tier == 0) to_host(buf.data(), b.data, B);
    else std::memcpy(buf.data(), b.data, B);
    return cxlt_test::check_block(buf.data(), B, k, v);
  };

  const int keys = 64;  // 4x the GPU's room: admissions demote to the host tier as they go
  std::vector<uint64_t> version(keys, 1);
  for (int i = 0; i < keys; ++i) {
    Key k = key_from_sequence(7, static_cast<uint64_t>(i));
    Block b = rt->admit(k, nullptr, true);
    write(b, k, 1);
    rt->unpin(k);
  }
  // Four threads, each with its own keys: move between the tiers, check, rewrite. The
  // background mover and promotions run meanwhile.
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      // Each test thread needs the context current for its own checking copies.
      api_->cuCtxPushCurrent(ctx_);
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int round = 0; round < 40; ++round)
        for (int i = t; i < keys; i += 4) {
          Key k = key_from_sequence(7, static_cast<uint64_t>(i));
          try {
            rt->move(k, static_cast<int>(rng() % 2), true);
          } catch (const Error &e) {
            if (e.code() != CXLT_ERROR_BUSY && e.code() != CXLT_ERROR_OUT_OF_TIER_MEMORY) ++bad;
          }
          Block b = rt->pin(k);
          uint64_t v = 0;
          if (!check(b, k, &v) || v != version[static_cast<size_t>(i)]) ++bad;
          write(b, k, ++version[static_cast<size_t>(i)]);
          rt->unpin(k);
          float a = 0.5f;
          rt->access(&k, &a, 1);
        }
      cuda::CUcontext popped = nullptr;
      api_->cuCtxPopCurrent(&popped);
    });
  for (auto &th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  ASSERT_TRUE(rt->wait_idle(60000));
  EXPECT_EQ(rt->validate(), "");
  cxlt_stats_t s = rt->stats();
  EXPECT_GT(s.pair_blocks[0][1], 0u) << "no GPU -> host move happened";
  EXPECT_GT(s.pair_blocks[1][0], 0u) << "no host -> GPU move happened";
  EXPECT_EQ(s.migration_failures, 0u);
  for (int i = 0; i < keys; ++i) {
    Key k = key_from_sequence(7, static_cast<uint64_t>(i));
    Block b = rt->pin(k);
    uint64_t v = 0;
    EXPECT_TRUE(check(b, k, &v)) << "block " << i;
    EXPECT_EQ(v, version[static_cast<size_t>(i)]) << "block " << i;
    rt->unpin(k);
  }
}

TEST_F(Gpu, TorchAllocatorHandsOutUsableMemory) {
  const char *root = std::getenv("CXLT_BUILD_ROOT");
  if (root == nullptr) GTEST_SKIP() << "CXLT_BUILD_ROOT is not set (run through meson test)";
  void *h = dlopen((std::string(root) + "/tiers/cuda/libcxltier_torch.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto m = reinterpret_cast<void *(*)(ssize_t, int, void *)>(dlsym(h, "cxlt_torch_malloc"));
  auto f = reinterpret_cast<void (*)(void *, ssize_t, int, void *)>(dlsym(h, "cxlt_torch_free"));
  auto s = reinterpret_cast<int (*)(int, uint64_t *, uint64_t *)>(dlsym(h, "cxlt_torch_stats"));
  ASSERT_TRUE(m && f && s);
  std::vector<void *> ptrs;
  for (ssize_t size : {ssize_t{1}, ssize_t{1000}, ssize_t{1} << 20, ssize_t{300} << 20})
    ptrs.push_back(m(size, 0, stream_));
  for (void *p : ptrs) {
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 512, 0u);
  }
  std::vector<unsigned char> want(1000), back(1000);
  pattern(want, 4);
  to_device(ptrs[1], want.data(), want.size());
  to_host(back.data(), ptrs[1], back.size());
  EXPECT_EQ(back, want);
  uint64_t reserved = 0, allocated = 0;
  ASSERT_EQ(s(0, &reserved, &allocated), 0);
  EXPECT_GE(reserved, allocated);
  EXPECT_GE(allocated, (uint64_t{301} << 20));
  for (void *p : ptrs) f(p, 0, 0, stream_);
  ASSERT_EQ(s(0, &reserved, &allocated), 0);
  EXPECT_EQ(allocated, 0u);
  // Freed on stream_ and asked again for stream_: reused at once, from the first segment's start.
  void *again = m(1000, 0, stream_);
  EXPECT_EQ(again, ptrs[0]);
  f(again, 1000, 0, stream_);
  dlclose(h);
}
