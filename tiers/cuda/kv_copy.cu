// SPDX-License-Identifier: Apache-2.0
// Gather and scatter kernels for per-layer KV layouts (tiers/cuda/kv_layout.hpp): one launch
// moves a whole block between a per-layer arena (2L segments of E bytes, segment i of block s
// at arena + (i*S + s)*E) and a contiguous block (segment i at block + i*E). Compiled by nvcc
// into a fatbin that the library embeds and loads with cuModuleLoadData: the only file that
// needs the CUDA toolkit, and no host code includes its headers.
//
// The contiguous side may be host memory registered with DEVICEMAP (the kernel then writes
// over PCIe or NVLink-C2C, as LMCache's transfer kernels do) or device memory.
// Grid: x = segment (2L), y = blocks per segment; 256 threads per block, 16-byte loads and
// stores when all three of source, destination and E are 16-byte aligned, else bytes.

namespace {

__device__ __forceinline__ void copy_span(char *__restrict__ dst, const char *__restrict__ src,
                                          unsigned long long bytes) {
  const unsigned long long tid = static_cast<unsigned long long>(blockIdx.y) * blockDim.x + threadIdx.x;
  const unsigned long long step = static_cast<unsigned long long>(gridDim.y) * blockDim.x;
  const bool aligned = ((reinterpret_cast<unsigned long long>(dst) | reinterpret_cast<unsigned long long>(src) |
                         bytes) & 15ull) == 0;
  if (aligned) {
    const uint4 *s = reinterpret_cast<const uint4 *>(src);
    uint4 *d = reinterpret_cast<uint4 *>(dst);
    const unsigned long long n = bytes / 16;
    for (unsigned long long i = tid; i < n; i += step) d[i] = s[i];
  } else {
    for (unsigned long long i = tid; i < bytes; i += step) dst[i] = src[i];
  }
}

}  // namespace

extern "C" __global__ void cxlt_kv_gather(const char *arena, unsigned long long segment_stride,
                                          unsigned long long slot_offset, unsigned long long extent_bytes,
                                          char *block) {
  const unsigned long long seg = blockIdx.x;
  copy_span(block + seg * extent_bytes, arena + seg * segment_stride + slot_offset, extent_bytes);
}

extern "C" __global__ void cxlt_kv_scatter(const char *block, unsigned long long segment_stride,
                                           unsigned long long slot_offset, unsigned long long extent_bytes,
                                           char *arena) {
  const unsigned long long seg = blockIdx.x;
  copy_span(arena + seg * segment_stride + slot_offset, block + seg * extent_bytes, extent_bytes);
}
