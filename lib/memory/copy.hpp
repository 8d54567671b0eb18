// SPDX-License-Identifier: Apache-2.0
// Copy kernels for moving blocks between host-memory tiers: libc memcpy, and non-temporal
// (streaming) stores that write around the cache, so that migrating a 5 MiB block does not
// evict the engine's hot data. One call copies one block on one thread; the migration engine
// parallelises across blocks, not within one.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace cxltier {

enum class CopyKernel : unsigned char {
  memcpy,     // libc memcpy (glibc picks its own; for large sizes it may stream too)
  nt,         // the best non-temporal kernel this CPU has (avx2, else sse2, else scalar)
  nt_avx2,    // 32-byte streaming stores (vmovntdq), unrolled x4
  nt_sse2,    // 16-byte streaming stores (movntdq), unrolled x4
  nt_scalar,  // 8-byte streaming stores (movnti): any x86-64
};

using CopyFn = void (*)(void *dst, const void *src, size_t bytes) noexcept;

// "memcpy", "nt", "nt-avx2", "nt-sse2", "nt-scalar".
const char *copy_kernel_name(CopyKernel k) noexcept;
std::optional<CopyKernel> parse_copy_kernel(std::string_view name) noexcept;
// True if this CPU (and build) can run `k`. memcpy and nt always can (nt degrades).
bool copy_kernel_available(CopyKernel k) noexcept;
// `k` itself, or for `nt` the concrete kernel it dispatches to on this CPU.
CopyKernel resolve_copy_kernel(CopyKernel k) noexcept;
// Every kernel this CPU can run, concrete ones only (memcpy first).
std::vector<CopyKernel> available_copy_kernels();

// The function for `k` (resolved once per process with __builtin_cpu_supports), or nullptr if
// this CPU lacks it. Non-overlapping buffers; any size and alignment (heads and tails use
// ordinary stores). Non-temporal kernels end with sfence: when they return, the bytes are
// globally visible, so a following release store that switches a block in is safe.
CopyFn copy_kernel_fn(CopyKernel k) noexcept;

// Copy with `k`; an unavailable kernel falls back to memcpy.
void copy_block(CopyKernel k, void *dst, const void *src, size_t bytes) noexcept;

}  // namespace cxltier
