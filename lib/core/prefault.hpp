// SPDX-License-Identifier: Apache-2.0
// Populating a range of the runtime's own anonymous memory in one system call
// (MADV_POPULATE_WRITE, Linux 5.14) before it is written, instead of one page fault per 4 KiB
// page. On the virtual machines this project measures on, a page fault costs a trap into the
// hypervisor's guest kernel that is several times the cost of clearing the page: the 40-copy
// LRFU replay, which writes about 270 MB of per-state arrays once, spent 0.5 s of system time
// in faults, 0.15 s with its arrays populated ahead (bench/README.md, section 4). Advice only:
// where the kernel does not know the call, the pages fault on first touch as before.
#pragma once

#include <cstddef>
#include <cstdint>

#include <sys/mman.h>
#include <unistd.h>

namespace cxltier {

// The system's base page size (4 KiB on x86-64; 16 or 64 KiB on some arm64 and ppc64 kernels).
inline size_t base_page_bytes() noexcept {
  static const size_t bytes = [] {
    const long b = sysconf(_SC_PAGESIZE);
    return b > 0 ? static_cast<size_t>(b) : size_t{4096};
  }();
  return bytes;
}

// Populate the whole pages inside [p, p + bytes) for writing; the partial pages at either end
// are left to fault. Errors (an old kernel, memory that is not anonymous) are ignored.
inline void prefault_pages(void *p, size_t bytes) noexcept {
#ifdef MADV_POPULATE_WRITE
  const uintptr_t page = base_page_bytes();
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(page - 1);
  if (hi > lo) (void)madvise(reinterpret_cast<void *>(lo), hi - lo, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace cxltier
