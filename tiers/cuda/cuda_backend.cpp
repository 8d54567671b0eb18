// SPDX-License-Identifier: Apache-2.0
// The cuda tier backend: one CUDA device's memory as a tier. Extents are cuMemAlloc'd device
// arenas (CXLT_EXTENT_DEVICE) that the runtime's BlockPool carves into block slots as on any
// backend (the pool never touches the bytes). Copies in and out go through the CopyEngine
// (per-direction streams, one event per block), so the runtime's migration protocol applies
// unchanged: its step 2 calls ext_copy_in / ext_copy_out and the bytes are in place on return.
//
// Per-layer mode (option CXLT_OPTION_KV_SEGMENTS = N > 0: 2 x layers, config tiers.N.layout = "per-layer"):
// each extent of S blocks is laid out as engines keep KV per layer (kv_layout.hpp); the slot
// address the pool computes (base + s * block) is then a handle, not the block's bytes, and
// every copy gathers or scatters the N segments, by
// batched cuMemcpyAsync (default) or by the kernel of kv_copy.cu (CXLT_CUDA_GATHER=kernel).
#include "tiers/cuda/copy_engine.hpp"
#include "tiers/cuda/driver.hpp"
#include "lib/topology/gpu.hpp"
#include "tiers/cuda/kv_kernels.hpp"
#include "tiers/cuda/kv_layout.hpp"
#include "lib/memory/tier_ops.hpp"
#include "tiers/registry.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>

namespace cxltier {

namespace {

using cuda::CUresult;

// Per-layer arenas of every cuda backend in the process, by base address: a copy between two
// cuda tiers is made by one backend but must decode both sides' slot handles.
struct ArenaInfo {
  uint64_t base = 0, bytes = 0, slots = 0;
  cuda::KvLayout layout;
};

class ArenaRegistry {
public:
  void add(const ArenaInfo &a) {
    std::unique_lock lk(mu_);
    arenas_[a.base] = a;
  }
  void remove(uint64_t base) {
    std::unique_lock lk(mu_);
    arenas_.erase(base);
  }
  std::optional<ArenaInfo> find(uint64_t addr) const {
    std::shared_lock lk(mu_);
    auto it = arenas_.upper_bound(addr);
    if (it == arenas_.begin()) return std::nullopt;
    --it;
    if (addr >= it->second.base + it->second.bytes) return std::nullopt;
    return it->second;
  }

private:
  mutable std::shared_mutex mu_;
  std::map<uint64_t, ArenaInfo> arenas_;
};

ArenaRegistry &arenas() {
  static ArenaRegistry r;
  return r;
}

enum class GatherMethod { memcpy, kernel };

struct CudaState {
  const cuda::DriverApi *api = nullptr;
  int ordinal = 0;
  cuda::CUdevice dev = 0;
  cuda::CUcontext ctx = nullptr;
  uint64_t total_bytes = 0;
  std::string who;
  std::string description;
  std::atomic<uint64_t> allocated{0};
  std::unique_ptr<cuda::CopyEngine> engine;
  bool per_layer = false;
  cuda::KvLayout layout;
  uint64_t block_bytes = 0;
  GatherMethod method = GatherMethod::memcpy;
  std::once_flag kernels_once;
  std::unique_ptr<cuda::KvKernels> kernels;  // loaded on first use in kernel mode

  ~CudaState() {
    engine.reset();
    kernels.reset();
    if (ctx) api->cuDevicePrimaryCtxRelease(dev);
  }
};

std::string cu(const CudaState *s, CUresult r) { return cuda::result_string(s->api, r); }

unsigned env_unsigned(const char *name, unsigned fallback, unsigned lo, unsigned hi, std::string *err) {
  const char *v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char *end = nullptr;
  unsigned long n = std::strtoul(v, &end, 10);
  if (end == v || *end != '\0' || n < lo || n > hi) {
    *err = std::string("environment variable ") + name + "='" + v + "' is not a whole number from " +
           std::to_string(lo) + " to " + std::to_string(hi);
    return fallback;
  }
  return static_cast<unsigned>(n);
}

cxlt_result_t cuda_initialize(const TierBackendParams *params, void **state) {
  try {
    const cuda::DriverLoad &drv = cuda::driver();
    long long device = 0, segments = 0;
    if (!params->option_int(CXLT_OPTION_DEVICE, 0, &device) || !params->option_int(CXLT_OPTION_KV_SEGMENTS, 0, &segments) ||
        device > 1 << 20 || segments < 0 || segments > UINT32_MAX) {
      backend_set_error("cuda backend: options " CXLT_OPTION_DEVICE " and " CXLT_OPTION_KV_SEGMENTS
                        " must be whole numbers (a device ordinal, a segment count)");
      return CXLT_ERROR_INVALID_ARGUMENT;
    }
    const int ordinal = device < 0 ? 0 : static_cast<int>(device);
    const std::string who = "cuda backend (device " + std::to_string(ordinal) +
                            (params->tier_name.empty() ? "" : ", tier '" + params->tier_name + "'") + ")";
    if (!drv.ok) {
      backend_set_error(who + ": not available: " + drv.why);
      return CXLT_ERROR_NOT_SUPPORTED;
    }
    const GpuDiscovery &gpus = gpu_discovery();
    if (!gpus.available) {
      backend_set_error(who + ": " + gpus.why);
      return CXLT_ERROR_NOT_SUPPORTED;
    }
    if (static_cast<size_t>(ordinal) >= gpus.devices.size()) {
      backend_set_error(who + ": no such device (the driver reports " + std::to_string(gpus.devices.size()) +
                        "; CUDA_VISIBLE_DEVICES selects which)");
      return CXLT_ERROR_INVALID_ARGUMENT;
    }
    std::string env_err;
    const unsigned lanes = env_unsigned("CXLT_CUDA_STREAMS", 2, 1, 64, &env_err);
    GatherMethod method = GatherMethod::memcpy;
    if (const char *g = std::getenv("CXLT_CUDA_GATHER"); g && *g) {
      if (std::strcmp(g, "kernel") == 0) method = GatherMethod::kernel;
      else if (std::strcmp(g, "memcpy") != 0)
        env_err = std::string("environment variable CXLT_CUDA_GATHER='") + g + "' is not memcpy or kernel";
    }
    if (!env_err.empty()) {
      backend_set_error(who + ": " + env_err);
      return CXLT_ERROR_INVALID_ARGUMENT;
    }
    auto s = std::make_unique<CudaState>();
    s->api = &drv.api;
    s->ordinal = ordinal;
    s->who = who;
    s->block_bytes = params->block_bytes;
    s->method = method;
    if (segments > 0) {
      s->per_layer = true;
      s->layout = cuda::kv_layout_for_block(params->block_bytes, static_cast<uint32_t>(segments));  // throws INVALID_ARGUMENT
    }
    CUresult r = s->api->cuDeviceGet(&s->dev, ordinal);
    if (r != cuda::kSuccess) {
      backend_set_error(who + ": cuDeviceGet failed: " + cu(s.get(), r));
      return CXLT_ERROR_BACKEND;
    }
    // The primary context is the one the CUDA runtime (and so PyTorch) uses on this device:
    // sharing it means device pointers we hand out are valid in the engine's kernels.
    cuda::CUcontext ctx = nullptr;
    if ((r = s->api->cuDevicePrimaryCtxRetain(&ctx, s->dev)) != cuda::kSuccess) {
      backend_set_error(who + ": cuDevicePrimaryCtxRetain failed: " + cu(s.get(), r));
      return CXLT_ERROR_BACKEND;
    }
    s->ctx = ctx;
    const GpuDevice &g = gpus.devices[static_cast<size_t>(ordinal)];
    s->total_bytes = g.total_bytes;
    s->engine = std::make_unique<cuda::CopyEngine>(*s->api, s->ctx, lanes);  // throws BACKEND
    s->description = "CUDA device " + std::to_string(ordinal) + " (" + g.name + ", PCI " + g.pci_bus_id + ", " +
                     (g.numa_node >= 0 ? "nearest NUMA node " + std::to_string(g.numa_node) : "NUMA node unknown") +
                     "): device memory in cuMemAlloc extents; copies on " + std::to_string(lanes) +
                     " stream(s) per direction, one event per block";
    if (s->per_layer)
      s->description += "; per-layer layout (" + s->layout.describe() + "), moves gather/scatter by " +
                        (method == GatherMethod::kernel ? "kernel" : "batched cuMemcpyAsync");
    *state = s.release();
    return CXLT_OK;
  } catch (const Error &e) {
    backend_set_error(std::string("cuda backend: ") + e.what());
    return e.code();
  } catch (...) {
    backend_set_error("cuda backend: out of host memory at initialize");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
}

void cuda_finalize(void *state) { delete static_cast<CudaState *>(state); }

cxlt_result_t cuda_alloc_extent(void *state, size_t bytes, TierExtent *out) {
  auto *s = static_cast<CudaState *>(state);
  if (bytes == 0 || (s->per_layer && bytes % s->block_bytes != 0)) {
    backend_set_error(s->who + ": extent of " + std::to_string(bytes) + " bytes" +
                      (s->per_layer ? " is not a whole number of " + std::to_string(s->block_bytes) + "-byte blocks" : ""));
    return CXLT_ERROR_INVALID_ARGUMENT;
  }
  cuda::ScopedContext scope(*s->api, s->ctx);
  cuda::CUdeviceptr p = 0;
  CUresult r = scope.result() == cuda::kSuccess ? s->api->cuMemAlloc(&p, bytes) : scope.result();
  if (r != cuda::kSuccess) {
    size_t free_b = 0, total_b = 0;
    std::string room;
    if (s->api->cuMemGetInfo(&free_b, &total_b) == cuda::kSuccess)
      room = "; the device has " + format_bytes(free_b) + " free of " + format_bytes(total_b);
    backend_set_error(s->who + ": cuMemAlloc of " + format_bytes(bytes) + " failed: " + cu(s, r) + room);
    return CXLT_ERROR_BACKEND;
  }
  if (s->per_layer) {
    try {
      arenas().add(ArenaInfo{p, bytes, bytes / s->block_bytes, s->layout});
    } catch (...) {
      s->api->cuMemFree(p);
      backend_set_error(s->who + ": out of host memory recording a per-layer arena");
      return CXLT_ERROR_OUT_OF_HOST_MEMORY;
    }
  }
  s->allocated.fetch_add(bytes, std::memory_order_relaxed);
  out->base = reinterpret_cast<void *>(static_cast<uintptr_t>(p));
  out->bytes = bytes;
  out->flags = CXLT_EXTENT_DEVICE;
  return CXLT_OK;
}

cxlt_result_t cuda_free_extent(void *state, const TierExtent *extent) {
  auto *s = static_cast<CudaState *>(state);
  if (extent == nullptr || extent->base == nullptr) {
    backend_set_error(s->who + ": free_extent of an empty extent");
    return CXLT_ERROR_INVALID_ARGUMENT;
  }
  const auto p = static_cast<cuda::CUdeviceptr>(reinterpret_cast<uintptr_t>(extent->base));
  if (s->per_layer) arenas().remove(p);
  cuda::ScopedContext scope(*s->api, s->ctx);
  CUresult r = s->api->cuMemFree(p);
  if (r != cuda::kSuccess) {
    backend_set_error(s->who + ": cuMemFree failed: " + cu(s, r));
    return CXLT_ERROR_BACKEND;
  }
  s->allocated.fetch_sub(extent->bytes, std::memory_order_relaxed);
  return CXLT_OK;
}

cxlt_result_t cuda_capacity(void *state, TierCapacity *out) {
  auto *s = static_cast<CudaState *>(state);
  TierCapacity c;
  c.total_bytes = s->total_bytes;
  c.free_bytes = s->total_bytes;
  cuda::ScopedContext scope(*s->api, s->ctx);
  size_t free_b = 0, total_b = 0;
  if (scope.result() == cuda::kSuccess && s->api->cuMemGetInfo(&free_b, &total_b) == cuda::kSuccess) c.free_bytes = free_b;
  c.allocated_bytes = s->allocated.load(std::memory_order_relaxed);
  *out = c;
  return CXLT_OK;
}

bool is_cuda_ops(const TierOps *ops) { return ops != nullptr && std::strcmp(ops->name, "cuda") == 0; }

// The kernel path for one gather or scatter between an arena and a contiguous block. Returns
// NOT_SUPPORTED (nothing done) when it cannot be used, so the caller falls back to memcpy.
cxlt_result_t copy_by_kernel(CudaState *s, cuda::Direction dir, const ArenaInfo &arena, uint64_t arena_addr,
                             uint64_t block, bool block_on_device, bool gather, std::string *err) {
  std::call_once(s->kernels_once, [s] {
    try {
      s->kernels = std::make_unique<cuda::KvKernels>(*s->api, s->ctx);
    } catch (...) {
    }
  });
  if (!s->kernels || !s->kernels->available()) return CXLT_ERROR_NOT_SUPPORTED;
  uint64_t block_dev = block;
  if (!block_on_device) {
    // Host memory must be registered with DEVICEMAP (cuda-host does so) for a kernel to reach it.
    cuda::ScopedContext scope(*s->api, s->ctx);
    cuda::CUdeviceptr alias = 0;
    if (s->api->cuMemHostGetDevicePointer(&alias, reinterpret_cast<void *>(block), 0) != cuda::kSuccess)
      return CXLT_ERROR_NOT_SUPPORTED;
    block_dev = alias;
  }
  const cuda::KvLayout &L = arena.layout;
  const uint64_t slot = (arena_addr - arena.base) / L.block_bytes();
  const uint64_t stride = arena.slots * L.extent_bytes, offset = slot * L.extent_bytes;
  cuda::CopyEngine::Ticket t;
  const cuda::KvKernels &k = *s->kernels;
  cxlt_result_t r = s->engine->submit_with(
      dir,
      [&](cuda::CUstream st) {
        return gather ? k.enqueue_gather(st, arena.base, stride, offset, L.extent_bytes, L.segments(), block_dev)
                      : k.enqueue_scatter(st, block_dev, stride, offset, L.extent_bytes, L.segments(), arena.base);
      },
      &t, err);
  if (r != CXLT_OK) return r == CXLT_ERROR_NOT_SUPPORTED ? CXLT_ERROR_BACKEND : r;
  return s->engine->wait(t, err);
}

// Move `bytes` from src to dst; *_dev says which side is device memory. Per-layer arenas on
// either side are decoded from the address.
cxlt_result_t cuda_copy(CudaState *s, uint64_t dst, bool dst_dev, uint64_t src, bool src_dev, size_t bytes) {
  const cuda::Direction dir =
      src_dev ? (dst_dev ? cuda::Direction::d2d : cuda::Direction::d2h) : cuda::Direction::h2d;
  std::string err;
  try {
    std::optional<ArenaInfo> da = dst_dev ? arenas().find(dst) : std::nullopt;
    std::optional<ArenaInfo> sa = src_dev ? arenas().find(src) : std::nullopt;
    std::vector<cuda::CopySeg> segs;
    if (!da && !sa) {
      segs.push_back({dst, src, bytes});
    } else {
      const cuda::KvLayout &L = da ? da->layout : sa->layout;
      if (bytes != L.block_bytes() || (da && sa && da->layout.extent_bytes != sa->layout.extent_bytes)) {
        backend_set_error(s->who + ": a per-layer move must copy whole blocks of the same layout (" +
                          std::to_string(bytes) + " bytes asked, blocks of " + std::to_string(L.block_bytes()) + ")");
        return CXLT_ERROR_INVALID_ARGUMENT;
      }
      const uint64_t B = L.block_bytes();
      if (s->method == GatherMethod::kernel && (da.has_value() != sa.has_value())) {
        const bool gather = sa.has_value();
        cxlt_result_t r = gather ? copy_by_kernel(s, dir, *sa, src, dst, dst_dev, true, &err)
                                 : copy_by_kernel(s, dir, *da, dst, src, src_dev, false, &err);
        if (r != CXLT_ERROR_NOT_SUPPORTED) {
          if (r != CXLT_OK) backend_set_error(s->who + ": " + err);
          return r;
        }
      }
      if (da && sa)
        segs = cuda::plan_arena_to_arena(L, da->base, da->slots, (dst - da->base) / B, sa->base, sa->slots,
                                         (src - sa->base) / B);
      else if (sa)
        segs = cuda::plan_gather(L, sa->base, sa->slots, (src - sa->base) / B, dst);
      else
        segs = cuda::plan_scatter(L, src, da->base, da->slots, (dst - da->base) / B);
    }
    cxlt_result_t r = s->engine->copy(dir, segs.data(), segs.size(), &err);
    if (r != CXLT_OK) backend_set_error(s->who + ": " + err);
    return r;
  } catch (...) {
    backend_set_error(s->who + ": out of host memory planning a copy");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
}

cxlt_result_t cuda_copy_in(void *state, void *dst, const void *src, size_t bytes, const TierOps *src_ops) {
  auto *s = static_cast<CudaState *>(state);
  return cuda_copy(s, reinterpret_cast<uintptr_t>(dst), true, reinterpret_cast<uintptr_t>(src), is_cuda_ops(src_ops),
                   bytes);
}

cxlt_result_t cuda_copy_out(void *state, void *dst, const void *src, size_t bytes, const TierOps *dst_ops) {
  auto *s = static_cast<CudaState *>(state);
  return cuda_copy(s, reinterpret_cast<uintptr_t>(dst), is_cuda_ops(dst_ops), reinterpret_cast<uintptr_t>(src), true,
                   bytes);
}

cxlt_result_t cuda_describe(void *state, const char **out) {
  *out = static_cast<CudaState *>(state)->description.c_str();
  return CXLT_OK;
}

const TierOps kCudaOps = {
    .version = CXLT_TIER_OPS_VERSION,
    .name = "cuda",
    .initialize = cuda_initialize,
    .finalize = cuda_finalize,
    .alloc_extent = cuda_alloc_extent,
    .free_extent = cuda_free_extent,
    .capacity = cuda_capacity,
    .ext_verify_placement = nullptr,  // device memory is on its device by construction
    .ext_copy_in = cuda_copy_in,
    .ext_copy_out = cuda_copy_out,
    .ext_describe = cuda_describe,
    .traits = CXLT_TRAIT_HOLDS_BYTES | CXLT_TRAIT_DEVICE_MEMORY | CXLT_TRAIT_COPIES_ITSELF | CXLT_TRAIT_KV_LAYOUT,
    .options = nullptr,  // its keys are the contract's (device, kv_segments), filled by the runtime
    .ext_control = nullptr,
};

}  // namespace

const TierOps *tier_cuda_ops() noexcept { return &kCudaOps; }

}  // namespace cxltier
