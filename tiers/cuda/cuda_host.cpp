// SPDX-License-Identifier: Apache-2.0
// The cuda-host tier backend: a decorator over a host backend (option inner_backend: numa,
// memkind or emulated) that registers (pins) each extent for DMA with the GPU
// in option cuda_device, in chunks of at most 64 GiB on several threads running on the GPU's
// nearest NUMA node, with progress on stderr for long registrations and a time budget
// (host_register.hpp). The runtime wraps every host tier in it when a tier of the runtime is a
// cuda tier (lib/runtime/runtime_open.cpp), so blocks moving to or from the GPU are copied by
// DMA straight from the tier's memory, without the driver's staging buffer.
//
// Registration uses CU_MEMHOSTREGISTER_PORTABLE (pinned for every context, so one
// registration serves every GPU) and DEVICEMAP (the gather/scatter kernel may address it).
// Copies stay with the runtime's kernels (host to host) and the cuda backend (host to GPU):
// this decorator has no copy ops of its own.
//
// Tuning (environment, read at initialize; not configuration keys yet):
//   CXLT_CUDA_REGISTER_CHUNK   largest single registration (size, default 64GiB)
//   CXLT_CUDA_REGISTER_THREADS registering threads per extent (default 4)
//   CXLT_CUDA_REGISTER_BUDGET_S seconds an extent's registration may take (default 600)
#include "tiers/cuda/driver.hpp"
#include "lib/topology/gpu.hpp"
#include "tiers/cuda/host_register.hpp"
#include "tiers/hostmem.hpp"
#include "lib/memory/tier_ops.hpp"
#include "tiers/registry.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace cxltier {

namespace {

struct HostPinState {
  const TierOps *inner = nullptr;
  void *inner_state = nullptr;
  const cuda::DriverApi *api = nullptr;
  cuda::CUdevice dev = 0;
  cuda::CUcontext ctx = nullptr;
  int gpu = 0;
  int gpu_node = -1;
  uint64_t max_chunk = cuda::kDefaultMaxChunkBytes;
  uint64_t align = 0;
  unsigned threads = cuda::kDefaultRegisterThreads;
  double budget_s = cuda::kDefaultRegisterBudgetSeconds;
  std::string who;
  std::string description;

  ~HostPinState() {
    if (inner && inner_state) inner->finalize(inner_state);
    if (ctx) api->cuDevicePrimaryCtxRelease(dev);
  }
};

// Environment overrides, parsed with the project's unit parsers (messages name the variable).
void read_tuning(HostPinState &s) {
  if (const char *v = std::getenv("CXLT_CUDA_REGISTER_CHUNK"); v && *v) {
    s.max_chunk = parse_size(v, "environment variable CXLT_CUDA_REGISTER_CHUNK");
    if (s.max_chunk == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "environment variable CXLT_CUDA_REGISTER_CHUNK must be positive");
  }
  if (const char *v = std::getenv("CXLT_CUDA_REGISTER_THREADS"); v && *v) {
    uint64_t n = parse_u64(v, "environment variable CXLT_CUDA_REGISTER_THREADS");
    if (n < 1 || n > 256) fail(CXLT_ERROR_INVALID_ARGUMENT, "environment variable CXLT_CUDA_REGISTER_THREADS=", v, " is not 1 to 256");
    s.threads = static_cast<unsigned>(n);
  }
  if (const char *v = std::getenv("CXLT_CUDA_REGISTER_BUDGET_S"); v && *v) {
    s.budget_s = parse_double(v, "environment variable CXLT_CUDA_REGISTER_BUDGET_S");
    if (!(s.budget_s > 0)) fail(CXLT_ERROR_INVALID_ARGUMENT, "environment variable CXLT_CUDA_REGISTER_BUDGET_S=", v, " must be positive");
  }
}

cxlt_result_t host_initialize(const TierBackendParams *params, void **state) {
  try {
    long long device = 0;
    if (!params->option_int(CXLT_OPTION_DEVICE, 0, &device) || device > 1 << 20) {
      backend_set_error("cuda-host backend: option " CXLT_OPTION_DEVICE " must be a device ordinal");
      return CXLT_ERROR_INVALID_ARGUMENT;
    }
    const int gpu = device < 0 ? 0 : static_cast<int>(device);
    const std::string *inner_opt = params->option(CXLT_OPTION_INNER_BACKEND);
    const std::string inner_name = inner_opt && !inner_opt->empty() ? *inner_opt : std::string("emulated");
    auto s = std::make_unique<HostPinState>();
    s->gpu = gpu;
    s->who = "cuda-host backend over '" + inner_name + "'" +
             (params->tier_name.empty() ? "" : " (tier '" + params->tier_name + "')");
    if (inner_name != "numa" && inner_name != "memkind" && inner_name != "emulated") {
      backend_set_error(s->who + ": inner_backend must be a host-memory backend (numa, memkind, emulated)");
      return CXLT_ERROR_INVALID_ARGUMENT;
    }
    const cuda::DriverLoad &drv = cuda::driver();
    if (!drv.ok) {
      backend_set_error(s->who + ": not available: " + drv.why);
      return CXLT_ERROR_NOT_SUPPORTED;
    }
    const GpuDiscovery &gpus = gpu_discovery();
    if (!gpus.available || static_cast<size_t>(gpu) >= gpus.devices.size()) {
      backend_set_error(s->who + ": no CUDA device " + std::to_string(gpu) + (gpus.why.empty() ? "" : ": " + gpus.why));
      return CXLT_ERROR_NOT_SUPPORTED;
    }
    read_tuning(*s);
    s->align = cuda::register_alignment(hostmem::page_size(), params->block_bytes ? params->block_bytes : 1);
    s->api = &drv.api;
    s->gpu_node = gpus.devices[static_cast<size_t>(gpu)].numa_node;
    cuda::CUresult r = s->api->cuDeviceGet(&s->dev, gpu);
    if (r == cuda::kSuccess) r = s->api->cuDevicePrimaryCtxRetain(&s->ctx, s->dev);
    if (r != cuda::kSuccess) {
      s->ctx = nullptr;
      backend_set_error(s->who + ": retaining the primary context of device " + std::to_string(gpu) +
                        " failed: " + cuda::result_string(s->api, r));
      return CXLT_ERROR_BACKEND;
    }
    std::string why;
    const TierOps *inner = tier_ops_find(inner_name, &why);
    if (!inner) {
      backend_set_error(s->who + ": " + why);
      return CXLT_ERROR_NOT_SUPPORTED;
    }
    void *inner_state = nullptr;
    cxlt_result_t ir = inner->initialize(params, &inner_state);
    if (ir != CXLT_OK) {
      backend_set_error(s->who + ": " + backend_last_error());
      return ir;
    }
    s->inner = inner;
    s->inner_state = inner_state;
    const char *inner_desc = nullptr;
    if (inner->ext_describe(inner_state, &inner_desc) != CXLT_OK || !inner_desc) inner_desc = inner_name.c_str();
    s->description = std::string(inner_desc) + "; registered for DMA with CUDA device " + std::to_string(gpu) +
                     " in chunks of at most " + format_bytes(s->max_chunk) + " on " + std::to_string(s->threads) +
                     " thread(s)" + (s->gpu_node >= 0 ? " on NUMA node " + std::to_string(s->gpu_node) : "");
    if (s->gpu_node >= 0 && !params->numa_nodes.empty() &&
        std::find(params->numa_nodes.begin(), params->numa_nodes.end(), static_cast<unsigned>(s->gpu_node)) ==
            params->numa_nodes.end() &&
        params->kind == TierKind::dram)
      s->description += "; WARNING: the GPU's nearest node " + std::to_string(s->gpu_node) +
                        " is not among this tier's nodes (" + hostmem::nodes_string(params->numa_nodes) +
                        "): its copies cross the socket link";
    *state = s.release();
    return CXLT_OK;
  } catch (const Error &e) {
    backend_set_error(std::string("cuda-host backend: ") + e.what());
    return e.code();
  } catch (...) {
    backend_set_error("cuda-host backend: out of host memory at initialize");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
}

void host_finalize(void *state) { delete static_cast<HostPinState *>(state); }

cxlt_result_t host_alloc_extent(void *state, size_t bytes, TierExtent *out) {
  auto *s = static_cast<HostPinState *>(state);
  TierExtent e;
  cxlt_result_t r = s->inner->alloc_extent(s->inner_state, bytes, &e);
  if (r != CXLT_OK) return r;
  try {
    std::vector<cuda::RegisterChunk> plan = cuda::plan_register_chunks(e.bytes, s->max_chunk, s->align);
    cuda::RegisterOptions opts;
    opts.threads = s->threads;
    opts.time_budget_s = s->budget_s;
    opts.numa_node = s->gpu_node;
    // Progress on stderr, at most once a second, only for registrations that take a while:
    // a node stalled for minutes with no word is what users of other systems reported.
    double last_print = 1.0;
    opts.progress = [&](const cuda::RegisterProgress &p) {
      if (p.elapsed_s < last_print || p.done_chunks == p.total_chunks) return;
      last_print = p.elapsed_s + 1.0;
      std::fprintf(stderr, "cxltier: %s: registering for DMA: %s of %s (%zu of %zu chunks), %.1f s\n",
                   s->who.c_str(), format_bytes(p.done_bytes).c_str(), format_bytes(p.total_bytes).c_str(),
                   p.done_chunks, p.total_chunks, p.elapsed_s);
    };
    const cuda::DriverApi &api = *s->api;
    cuda::CUcontext ctx = s->ctx;
    cuda::RegisterResult res = cuda::register_in_chunks(
        e.base, plan, opts,
        [&api, ctx](void *p, size_t n, std::string *msg) -> cxlt_result_t {
          cuda::ScopedContext scope(api, ctx);
          cuda::CUresult cr = scope.result() == cuda::kSuccess
                                  ? api.cuMemHostRegister(p, n, cuda::kMemHostRegisterPortable |
                                                                    cuda::kMemHostRegisterDeviceMap)
                                  : scope.result();
          if (cr == cuda::kSuccess) return CXLT_OK;
          *msg = "cuMemHostRegister failed: " + cuda::result_string(&api, cr);
          return CXLT_ERROR_BACKEND;
        },
        [&api, ctx](void *p, size_t) {
          cuda::ScopedContext scope(api, ctx);
          api.cuMemHostUnregister(p);
        });
    if (res.result != CXLT_OK) {
      s->inner->free_extent(s->inner_state, &e);
      backend_set_error(s->who + ": " + res.message);
      return res.result;
    }
  } catch (const Error &err) {
    s->inner->free_extent(s->inner_state, &e);
    backend_set_error(s->who + ": " + err.what());
    return err.code();
  } catch (...) {
    s->inner->free_extent(s->inner_state, &e);
    backend_set_error(s->who + ": out of host memory registering an extent");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
  *out = e;
  return CXLT_OK;
}

cxlt_result_t host_free_extent(void *state, const TierExtent *extent) {
  auto *s = static_cast<HostPinState *>(state);
  if (extent == nullptr || extent->base == nullptr) {
    backend_set_error(s->who + ": free_extent of an empty extent");
    return CXLT_ERROR_INVALID_ARGUMENT;
  }
  try {
    // The same plan as at allocation (it depends only on the size): unregister each chunk.
    std::vector<cuda::RegisterChunk> plan = cuda::plan_register_chunks(extent->bytes, s->max_chunk, s->align);
    const cuda::DriverApi &api = *s->api;
    cuda::CUcontext ctx = s->ctx;
    cuda::unregister_chunks(extent->base, plan, s->threads, [&api, ctx](void *p, size_t) {
      cuda::ScopedContext scope(api, ctx);
      api.cuMemHostUnregister(p);
    });
  } catch (...) {
    // An extent we registered always has a valid plan; nothing to undo otherwise.
  }
  return s->inner->free_extent(s->inner_state, extent);
}

cxlt_result_t host_capacity(void *state, TierCapacity *out) {
  auto *s = static_cast<HostPinState *>(state);
  return s->inner->capacity(s->inner_state, out);
}

cxlt_result_t host_verify(void *state, const void *ptr, size_t bytes) {
  auto *s = static_cast<HostPinState *>(state);
  return s->inner->ext_verify_placement(s->inner_state, ptr, bytes);
}

cxlt_result_t host_describe(void *state, const char **out) {
  *out = static_cast<HostPinState *>(state)->description.c_str();
  return CXLT_OK;
}

const TierOps kCudaHostOps = {
    .version = CXLT_TIER_OPS_VERSION,
    .name = "cuda-host",
    .initialize = host_initialize,
    .finalize = host_finalize,
    .alloc_extent = host_alloc_extent,
    .free_extent = host_free_extent,
    .capacity = host_capacity,
    .ext_verify_placement = host_verify,
    .ext_copy_in = nullptr,  // host memory; the runtime's kernels or the cuda backend copy it
    .ext_copy_out = nullptr,
    .ext_describe = host_describe,
    .traits = CXLT_TRAIT_HOLDS_BYTES | CXLT_TRAIT_HOST_ADDRESSABLE | CXLT_TRAIT_WRAPS_INNER | CXLT_TRAIT_PINS_FOR_DEVICE,
    .options = nullptr,  // its keys are the contract's (inner_backend, device), filled by the runtime
    .ext_control = nullptr,
};

}  // namespace

const TierOps *tier_cuda_host_ops() noexcept { return &kCudaHostOps; }

}  // namespace cxltier
