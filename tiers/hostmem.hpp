// SPDX-License-Identifier: Apache-2.0
// Host-memory extents shared by the numa and emulated backends (and the faulty decorator's
// tearing): anonymous mappings with explicit huge pages, transparent huge pages or 4 KiB
// pages, first touch that reports failure instead of raising SIGBUS, and page placement queries.
#pragma once

#include "lib/memory/tier_ops.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cxltier::hostmem {

inline constexpr size_t kHugePage2M = size_t{2} << 20;

// 2 MiB hugetlb pages free now: system-wide (node < 0) or on one node.
uint64_t free_huge_pages_2m(int node = -1) noexcept;
// True if transparent huge pages are not "never" (so MADV_HUGEPAGE takes effect).
bool thp_enabled() noexcept;
size_t page_size() noexcept;

// Map `bytes` of private anonymous memory, nothing touched. `mode` as in HugePageMode; with
// `nodes` non-empty, explicit huge pages are tried only when those nodes together have enough
// free. THP extents are aligned to 2 MiB (so the kernel can use huge pages from the start).
// Sets out->flags to HOST plus HUGETLB or THP as chosen.
cxlt_result_t map(size_t bytes, HugePageMode mode, const std::vector<unsigned> &nodes,
                  TierExtent *out) noexcept;
cxlt_result_t unmap(const TierExtent &extent) noexcept;
// A backend's free_extent for extents from map(): refuses an empty extent (naming `who`), unmaps,
// and on success takes the extent's bytes off `allocated`.
cxlt_result_t free_counted(const TierExtent *extent, std::atomic<uint64_t> &allocated, const std::string &who) noexcept;

// Touch every page for writing. Uses MADV_POPULATE_WRITE (Linux 5.14+), which fails with an
// error where a plain write would get SIGBUS (hugetlb pages gone, a bound node out of memory);
// falls back to writing one byte per page on older kernels.
cxlt_result_t populate(void *base, size_t bytes) noexcept;

// Query the node of every 4 KiB page of [ptr, ptr+bytes) with move_pages(nodes = NULL).
// Succeeds if each is on one of `nodes`; otherwise the message names the first bad page
// (index, address) and the node it is on (or why the kernel could not say).
cxlt_result_t verify_nodes(const void *ptr, size_t bytes, const std::vector<unsigned> &nodes,
                           const std::string &who) noexcept;

// "0", "0,2", "1-3" style list for messages.
std::string nodes_string(const std::vector<unsigned> &nodes);

}  // namespace cxltier::hostmem
