// SPDX-License-Identifier: Apache-2.0
// The gather/scatter kernels of kv_copy.cu, embedded in the library as a fatbin and loaded into
// a context with cuModuleLoadData. If loading fails (a GPU older than the fatbin's sm_80, a
// driver too old for its PTX), available() is false, why() says so, and callers use batched
// cuMemcpyAsync instead.
#pragma once

#include "tiers/cuda/driver.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace cxltier::cuda {

// The embedded fatbin (bytes, size); size 0 in builds without the CUDA tier's kernels.
const unsigned char *embedded_kv_fatbin(size_t *size) noexcept;

class KvKernels {
public:
  KvKernels(const DriverApi &api, CUcontext ctx);
  ~KvKernels();
  KvKernels(const KvKernels &) = delete;
  KvKernels &operator=(const KvKernels &) = delete;

  bool available() const noexcept { return gather_ != nullptr && scatter_ != nullptr; }
  const std::string &why() const noexcept { return why_; }

  // Enqueue one gather (arena -> contiguous block) or scatter (block -> arena) on `stream`.
  // segment_stride = S*E (the arena's per-segment array), slot_offset = s*E. `block` is a
  // device address: device memory, or the device alias of registered host memory.
  CUresult enqueue_gather(CUstream stream, uint64_t arena, uint64_t segment_stride, uint64_t slot_offset,
                          uint64_t extent_bytes, uint32_t segments, uint64_t block) const noexcept;
  CUresult enqueue_scatter(CUstream stream, uint64_t block, uint64_t segment_stride, uint64_t slot_offset,
                           uint64_t extent_bytes, uint32_t segments, uint64_t arena) const noexcept;

private:
  CUresult launch(CUfunction fn, CUstream stream, uint64_t from, uint64_t segment_stride, uint64_t slot_offset,
                  uint64_t extent_bytes, uint32_t segments, uint64_t to) const noexcept;

  const DriverApi &api_;
  CUcontext ctx_;
  CUmodule module_ = nullptr;
  CUfunction gather_ = nullptr;
  CUfunction scatter_ = nullptr;
  std::string why_;
};

}  // namespace cxltier::cuda
