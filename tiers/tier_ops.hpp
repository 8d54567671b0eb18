// SPDX-License-Identifier: Apache-2.0
// The tier backend contract: one small, versioned operations table per backend (as UMF's
// memory providers and hwloc's components). A backend hands out large extents of memory placed
// on its tier and reports capacity; the runtime's block pools carve extents into block slots.
//
// Rules (checked by tier_ops_validate() when a backend is registered):
//  - `version` comes first and is CXLT_TIER_OPS_VERSION for this layout; later versions only
//    append members (comment each addition with the version that added it).
//  - Mandatory: name, initialize, finalize, alloc_extent, free_extent, capacity.
//  - Optional members are prefixed ext_ and may be nullptr; tier_ops_fill_defaults() replaces
//    nullptr with functions that return CXLT_ERROR_NOT_SUPPORTED.
//  - Every op returns a cxlt_result_t; on failure it sets a message with backend_set_error()
//    (thread-local), which the runtime puts into the Error it throws.
//  - Ops never throw.
#pragma once

#include <cxltier/cxltier.h>
#include <cxltier/topology.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cxltier {

#define CXLT_TIER_OPS_VERSION 1u

// What the runtime asks a backend for. Fields a backend does not use are ignored.
struct TierBackendParams {
  TierKind kind = TierKind::dram;
  std::vector<unsigned> numa_nodes;  // OS indexes the memory must be bound to (numa, memkind)
  uint64_t budget_bytes = 0;         // the tier's budget: the most this tier will ask for
  uint64_t block_bytes = 0;          // slot size the pool will carve
  bool huge_pages = true;            // try huge pages (hugetlbfs, then THP), fall back to 4 KiB
  bool verify_placement = true;      // numa/memkind: check every page's node after first touch
  double pace_mib_s = 0;             // emulated: pace copies into this tier to this bandwidth (0: off)
  std::string memkind_kind;          // memkind: "regular", "hbw", "dax_kmem" (and *_all, *_preferred)
  int cuda_device = -1;              // cuda: device ordinal
};

struct TierExtent {
  void *base = nullptr;  // nullptr only for the null backend
  size_t bytes = 0;
  uint32_t flags = 0;    // CXLT_EXTENT_* below
};
#define CXLT_EXTENT_HUGETLB 1u  // backed by explicit huge pages
#define CXLT_EXTENT_THP 2u      // transparent huge pages advised
#define CXLT_EXTENT_HOST 4u     // CPU-addressable host memory (memcpy works)
#define CXLT_EXTENT_DEVICE 8u   // device memory (only ext_copy can move it)

struct cxlt_tier_ops {
  uint32_t version;  // CXLT_TIER_OPS_VERSION
  const char *name;  // "numa", "memkind", "emulated", "null", "cuda", ...

  // Mandatory.
  cxlt_result_t (*initialize)(const TierBackendParams *params, void **state);
  void (*finalize)(void *state);
  // Allocate at least `bytes` placed on the tier. `bytes` is a multiple of the block size.
  cxlt_result_t (*alloc_extent)(void *state, size_t bytes, TierExtent *out);
  cxlt_result_t (*free_extent)(void *state, const TierExtent *extent);
  // Bytes this backend can supply at most (for a budget check at open), and what it holds now.
  uint64_t (*capacity)(void *state);

  // Optional (nullptr: not supported).
  // Check that every page of [ptr, ptr+bytes) is on the tier's nodes; on failure the message
  // says which page is where.
  cxlt_result_t (*ext_verify_placement)(void *state, const void *ptr, size_t bytes);
  // Copy `bytes` into this tier (dst is in this tier, src in `src_ops`' tier). Backends whose
  // memory is not plain host memory, or that pace copies, provide it; otherwise the runtime
  // uses its own copy kernels.
  cxlt_result_t (*ext_copy_in)(void *state, void *dst, const void *src, size_t bytes,
                               const cxlt_tier_ops *src_ops);
  // A short description of what the backend chose (huge pages or not, nodes, kind).
  const char *(*ext_describe)(void *state);
};

// Thread-local message for the last failing op of this thread.
void backend_set_error(const std::string &message) noexcept;
const std::string &backend_last_error() noexcept;

// Registration (tiers/registry.cpp). Returns nullptr for an unknown name or a backend this
// build lacks; `why` then says which.
const cxlt_tier_ops *tier_ops_find(const std::string &name, std::string *why);
std::vector<std::string> tier_ops_names();
// Validate mandatory ops and the version; fill optional ones with NOT_SUPPORTED defaults.
// Throws Error(CXLT_ERROR_BACKEND) naming the backend and the missing op.
cxlt_tier_ops tier_ops_validate(const cxlt_tier_ops &ops);

}  // namespace cxltier
