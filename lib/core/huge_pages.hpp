// SPDX-License-Identifier: Apache-2.0
// Asking for transparent huge pages for the runtime's own arrays that are read at random (a
// state per block): with 4 KiB pages nearly every such read would also miss the TLB. Advice
// only: where the system gives no huge pages on request (THP "never", or no madvise), nothing
// changes. Tier memory has its own advice, in its backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include <sys/mman.h>

namespace cxltier {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Advise MADV_HUGEPAGE over the 2 MiB-aligned part of [p, p + bytes), when there is one.
inline void advise_huge_pages(void *p, size_t bytes) noexcept {
#ifdef MADV_HUGEPAGE
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(uintptr_t{kHugePageBytes} - 1);
  if (hi > lo) (void)madvise(reinterpret_cast<void *>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace cxltier
