/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libcxltier_torch.so: entry points for PyTorch's pluggable CUDA allocator
 *   torch.cuda.memory.CUDAPluggableAllocator("libcxltier_torch.so", "cxlt_torch_malloc", "cxlt_torch_free")
 * (examples/torch_allocator.py). Device memory comes from large segments (cuMemAlloc through
 * the dlopen'ed driver, at least 256 MiB each) carved best-fit; a freed range is reused on its
 * own stream at once and on other streams once an event recorded at free time has completed.
 * Built only with the CUDA tier (what has run where: docs/gpu.md, "Status").
 */
#ifndef CXLTIER_TORCH_ALLOCATOR_H
#define CXLTIER_TORCH_ALLOCATOR_H

#include <stdint.h>
#include <sys/types.h>

#if defined(__GNUC__)
#define CXLT_TORCH_API __attribute__((visibility("default")))
#else
#define CXLT_TORCH_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Allocate `size` bytes on CUDA device `device` for use on `stream` (a cudaStream_t). NULL on failure. */
CXLT_TORCH_API void *cxlt_torch_malloc(ssize_t size, int device, void *stream);
/** Free what cxlt_torch_malloc returned; `stream` is the one it was allocated for. */
CXLT_TORCH_API void cxlt_torch_free(void *ptr, ssize_t size, int device, void *stream);
/** Bytes reserved from the driver and bytes handed out on `device`. 0 on success, -1 for a bad device. */
CXLT_TORCH_API int cxlt_torch_stats(int device, uint64_t *reserved_bytes, uint64_t *allocated_bytes);

#ifdef __cplusplus
}
#endif

#endif /* CXLTIER_TORCH_ALLOCATOR_H */
