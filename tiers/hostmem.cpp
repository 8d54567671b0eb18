// SPDX-License-Identifier: Apache-2.0
// Host-memory extents: mmap with explicit or transparent huge pages, error-reporting first
// touch, and per-page placement queries (see hostmem.hpp).
#include "hostmem.hpp"

#include <cxltier/tools/units.hpp>

#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace cxltier::hostmem {

namespace {

uint64_t read_u64_file(const std::string &path) noexcept {
  try {
    std::ifstream in(path);
    uint64_t v = 0;
    if (in >> v) return v;
  } catch (...) {
  }
  return 0;
}

std::string errno_text(int e) { return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")"; }

}  // namespace

uint64_t free_huge_pages_2m(int node) noexcept {
  if (node < 0) return read_u64_file("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
  return read_u64_file("/sys/devices/system/node/node" + std::to_string(node) +
                       "/hugepages/hugepages-2048kB/free_hugepages");
}

bool thp_enabled() noexcept {
  try {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    if (!std::getline(in, line)) return false;
    // The active choice is in brackets: "always [madvise] never".
    return line.find("[never]") == std::string::npos && line.find('[') != std::string::npos;
  } catch (...) {
    return false;
  }
}

size_t page_size() noexcept {
  static const size_t ps = [] {
    long v = sysconf(_SC_PAGESIZE);
    return v > 0 ? static_cast<size_t>(v) : size_t{4096};
  }();
  return ps;
}

std::string nodes_string(const std::vector<unsigned> &nodes) {
  std::string s;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(nodes[i]);
  }
  return s.empty() ? "(none)" : s;
}

cxlt_result_t map(size_t bytes, HugePageMode mode, const std::vector<unsigned> &nodes,
                  TierExtent *out) noexcept {
  try {
    if (bytes == 0 || out == nullptr) {
      backend_set_error("host memory: an extent of 0 bytes (or no output) was asked for");
      return CXLT_ERROR_INVALID_ARGUMENT;
    }
    if (mode == HugePageMode::hugetlb && bytes % kHugePage2M == 0) {
      uint64_t need = bytes / kHugePage2M, have = 0;
      if (nodes.empty()) {
        have = free_huge_pages_2m(-1);
      } else {
        for (unsigned n : nodes) have += free_huge_pages_2m(static_cast<int>(n));
      }
      if (have >= need) {
        void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
        if (p != MAP_FAILED) {
          *out = TierExtent{p, bytes, CXLT_EXTENT_HOST | CXLT_EXTENT_HUGETLB};
          return CXLT_OK;
        }
        // Reservation failed (another process took the pages): fall through to THP.
      }
    }
    if (mode != HugePageMode::none && thp_enabled()) {
      if (bytes > SIZE_MAX - kHugePage2M) {
        backend_set_error("host memory: extent of " + std::to_string(bytes) + " bytes is too large");
        return CXLT_ERROR_INVALID_ARGUMENT;
      }
      // Over-map by 2 MiB and trim, so the extent starts on a huge-page boundary.
      size_t span = bytes + kHugePage2M;
      void *p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        int e = errno;
        backend_set_error("host memory: mmap of " + format_bytes(span) + " failed: " + errno_text(e));
        return e == ENOMEM ? CXLT_ERROR_OUT_OF_TIER_MEMORY : CXLT_ERROR_BACKEND;
      }
      auto raw = reinterpret_cast<uintptr_t>(p);
      uintptr_t aligned = (raw + kHugePage2M - 1) & ~(uintptr_t{kHugePage2M} - 1);
      size_t head = aligned - raw, tail = span - head - bytes;
      if (head) munmap(p, head);
      if (tail) munmap(reinterpret_cast<void *>(aligned + bytes), tail);
      void *base = reinterpret_cast<void *>(aligned);
      uint32_t flags = CXLT_EXTENT_HOST;
      if (madvise(base, bytes, MADV_HUGEPAGE) == 0) flags |= CXLT_EXTENT_THP;
      *out = TierExtent{base, bytes, flags};
      return CXLT_OK;
    }
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      backend_set_error("host memory: mmap of " + format_bytes(bytes) + " failed: " + errno_text(e));
      return e == ENOMEM ? CXLT_ERROR_OUT_OF_TIER_MEMORY : CXLT_ERROR_BACKEND;
    }
    if (mode == HugePageMode::none) {
      // 4 KiB asked for: keep THP away even where it is "always", so the flags stay honest.
      madvise(p, bytes, MADV_NOHUGEPAGE);
    }
    *out = TierExtent{p, bytes, CXLT_EXTENT_HOST};
    return CXLT_OK;
  } catch (...) {
    backend_set_error("host memory: out of host memory while mapping an extent");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
}

cxlt_result_t unmap(const TierExtent &extent) noexcept {
  if (extent.base == nullptr) return CXLT_OK;
  if (munmap(extent.base, extent.bytes) != 0) {
    int e = errno;
    std::ostringstream os;
    os << "host memory: munmap of " << extent.bytes << " bytes at " << extent.base << " failed: " << errno_text(e);
    backend_set_error(os.str());
    return CXLT_ERROR_BACKEND;
  }
  return CXLT_OK;
}

cxlt_result_t free_counted(const TierExtent *extent, std::atomic<uint64_t> &allocated, const std::string &who) noexcept {
  if (extent == nullptr || extent->base == nullptr) {
    backend_set_error(who + ": free_extent of an empty extent");
    return CXLT_ERROR_INVALID_ARGUMENT;
  }
  cxlt_result_t r = unmap(*extent);
  if (r == CXLT_OK) allocated.fetch_sub(extent->bytes, std::memory_order_relaxed);
  return r;
}

cxlt_result_t populate(void *base, size_t bytes) noexcept {
  if (bytes == 0) return CXLT_OK;
  if (madvise(base, bytes, MADV_POPULATE_WRITE) == 0) return CXLT_OK;
  int e = errno;
  if (e == EINVAL) {
    // Kernel older than 5.14: touch one byte per page (a failure here is a signal, not an error).
    volatile char *p = static_cast<volatile char *>(base);
    for (size_t off = 0; off < bytes; off += page_size()) p[off] = 0;
    return CXLT_OK;
  }
  try {
    backend_set_error("host memory: first touch of " + format_bytes(bytes) +
                      " failed (the tier's nodes or huge pages ran out?): " + errno_text(e));
  } catch (...) {
  }
  return e == ENOMEM || e == EFAULT ? CXLT_ERROR_OUT_OF_TIER_MEMORY : CXLT_ERROR_BACKEND;
}

cxlt_result_t verify_nodes(const void *ptr, size_t bytes, const std::vector<unsigned> &nodes,
                           const std::string &who) noexcept {
  try {
    constexpr size_t kChunk = 512;
    const size_t ps = page_size();
    const auto start = reinterpret_cast<uintptr_t>(ptr) & ~(uintptr_t{ps} - 1);
    const auto end = reinterpret_cast<uintptr_t>(ptr) + bytes;
    const size_t pages = (end - start + ps - 1) / ps;
    void *addrs[kChunk];
    int status[kChunk];
    for (size_t first = 0; first < pages; first += kChunk) {
      size_t n = std::min(kChunk, pages - first);
      for (size_t i = 0; i < n; ++i) addrs[i] = reinterpret_cast<void *>(start + (first + i) * ps);
      if (move_pages(0, n, addrs, nullptr, status, 0) != 0) {
        int e = errno;
        backend_set_error(who + ": cannot query page placement with move_pages: " + errno_text(e));
        return CXLT_ERROR_BACKEND;
      }
      for (size_t i = 0; i < n; ++i) {
        int st = status[i];
        bool ok = false;
        for (unsigned node : nodes) ok = ok || (st >= 0 && static_cast<unsigned>(st) == node);
        if (ok) continue;
        std::ostringstream os;
        os << who << ": page " << (first + i) << " of " << pages << " (address " << addrs[i] << ") ";
        if (st >= 0) {
          os << "is on NUMA node " << st << ", not on the tier's node(s) " << nodes_string(nodes);
        } else {
          os << "has no node: " << (st == -ENOENT ? "not present (never touched)" : std::strerror(-st))
             << "; expected node(s) " << nodes_string(nodes);
        }
        backend_set_error(os.str());
        return CXLT_ERROR_BACKEND;
      }
    }
    return CXLT_OK;
  } catch (...) {
    backend_set_error(who + ": out of host memory while verifying placement");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
}

}  // namespace cxltier::hostmem
