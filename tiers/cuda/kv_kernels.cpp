// SPDX-License-Identifier: Apache-2.0
// Loading the embedded gather/scatter fatbin and launching its kernels (see kv_kernels.hpp).
#include "tiers/cuda/kv_kernels.hpp"

#include <algorithm>

extern "C" {
extern const unsigned char cxltier_kv_fatbin[];
extern const size_t cxltier_kv_fatbin_size;
}

namespace cxltier::cuda {

const unsigned char *embedded_kv_fatbin(size_t *size) noexcept {
  *size = cxltier_kv_fatbin_size;
  return cxltier_kv_fatbin;
}

KvKernels::KvKernels(const DriverApi &api, CUcontext ctx) : api_(api), ctx_(ctx) {
  ScopedContext scope(api_, ctx_);
  if (scope.result() != kSuccess) {
    why_ = "cuCtxPushCurrent failed: " + result_string(&api_, scope.result());
    return;
  }
  CUresult r = api_.cuModuleLoadData(&module_, cxltier_kv_fatbin);
  if (r != kSuccess) {
    module_ = nullptr;
    why_ = "the embedded gather/scatter kernels (sm_80, sm_90, compute_90 PTX) could not be loaded: " +
           result_string(&api_, r);
    return;
  }
  if ((r = api_.cuModuleGetFunction(&gather_, module_, "cxlt_kv_gather")) != kSuccess ||
      (r = api_.cuModuleGetFunction(&scatter_, module_, "cxlt_kv_scatter")) != kSuccess) {
    gather_ = scatter_ = nullptr;
    why_ = "the embedded module lacks cxlt_kv_gather/cxlt_kv_scatter: " + result_string(&api_, r);
  }
}

KvKernels::~KvKernels() {
  if (module_) {
    ScopedContext scope(api_, ctx_);
    api_.cuModuleUnload(module_);
  }
}

CUresult KvKernels::launch(CUfunction fn, CUstream stream, uint64_t from, uint64_t segment_stride,
                           uint64_t slot_offset, uint64_t extent_bytes, uint32_t segments, uint64_t to) const noexcept {
  if (fn == nullptr || segments == 0) return kErrorInvalidValue;
  // Enough blocks per segment that each thread moves about eight 16-byte words.
  constexpr unsigned kThreads = 256;
  const uint64_t per_block = uint64_t{kThreads} * 16 * 8;
  const unsigned y = static_cast<unsigned>(std::clamp<uint64_t>((extent_bytes + per_block - 1) / per_block, 1, 1024));
  unsigned long long a = from, b = segment_stride, c = slot_offset, d = extent_bytes, e = to;
  void *params[] = {&a, &b, &c, &d, &e};
  return api_.cuLaunchKernel(fn, segments, y, 1, kThreads, 1, 1, 0, stream, params, nullptr);
}

CUresult KvKernels::enqueue_gather(CUstream stream, uint64_t arena, uint64_t segment_stride, uint64_t slot_offset,
                                   uint64_t extent_bytes, uint32_t segments, uint64_t block) const noexcept {
  return launch(gather_, stream, arena, segment_stride, slot_offset, extent_bytes, segments, block);
}

CUresult KvKernels::enqueue_scatter(CUstream stream, uint64_t block, uint64_t segment_stride, uint64_t slot_offset,
                                    uint64_t extent_bytes, uint32_t segments, uint64_t arena) const noexcept {
  return launch(scatter_, stream, block, segment_stride, slot_offset, extent_bytes, segments, arena);
}

}  // namespace cxltier::cuda
