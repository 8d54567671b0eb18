// SPDX-License-Identifier: Apache-2.0
// The numa tier backend: anonymous mappings bound with mbind(MPOL_BIND, MPOL_MF_STRICT) to the
// tier's NUMA nodes, touched, then verified page by page with move_pages in query mode.
// It never uses numa_alloc_onnode, which silently falls back to another node when the asked
// one is full or missing; a node this machine lacks is refused at initialize.
#include "lib/memory/tier_ops.hpp"
#include "tiers/hostmem.hpp"
#include "tiers/registry.hpp"

#include <cxltier/tools/units.hpp>

#include <numa.h>
#include <numaif.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace cxltier {

namespace {

struct NumaState {
  std::vector<unsigned> nodes;
  struct bitmask *mask = nullptr;
  HugePageMode huge = HugePageMode::hugetlb;
  bool verify = true;
  std::string who;          // "numa backend (tier 'dram', node(s) 0)" for messages
  std::string description;  // ext_describe
  std::atomic<uint64_t> allocated{0};

  ~NumaState() {
    if (mask) numa_bitmask_free(mask);
  }
};

cxlt_result_t numa_initialize(const TierBackendParams *params, void **state) {
  try {
    if (numa_available() < 0) {
      backend_set_error("numa backend: libnuma reports that this kernel has no NUMA support");
      return CXLT_ERROR_NOT_SUPPORTED;
    }
    std::string tier = params->tier_name.empty() ? "" : "tier '" + params->tier_name + "', ";
    if (params->numa_nodes.empty()) {
      backend_set_error("numa backend (" + tier + "no nodes): a numa tier needs at least one NUMA node");
      return CXLT_ERROR_INVALID_ARGUMENT;
    }
    std::vector<unsigned> nodes = params->numa_nodes;
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    const int max_node = numa_max_node();
    struct bitmask *allowed = numa_get_mems_allowed();
    for (unsigned n : nodes) {
      std::string err;
      long long free_bytes = 0;
      if (static_cast<long long>(n) > max_node) {
        err = "NUMA node " + std::to_string(n) + " does not exist on this machine (its highest node is " +
              std::to_string(max_node) + "); refusing to fall back to another node";
      } else if (numa_node_size64(static_cast<int>(n), &free_bytes) <= 0) {
        err = "NUMA node " + std::to_string(n) + " has no memory on this machine (a CPU-only or offline node)";
      } else if (allowed && !numa_bitmask_isbitset(allowed, n)) {
        err = "NUMA node " + std::to_string(n) + " is not in this process's allowed memory nodes (cpuset mems)";
      }
      if (!err.empty()) {
        if (allowed) numa_bitmask_free(allowed);
        backend_set_error("numa backend (" + tier + "node(s) " + hostmem::nodes_string(nodes) + "): " + err);
        return CXLT_ERROR_BACKEND;
      }
    }
    if (allowed) numa_bitmask_free(allowed);

    auto *s = new NumaState;
    s->nodes = nodes;
    s->huge = params->huge_pages;
    s->verify = params->verify_placement;
    s->mask = numa_allocate_nodemask();
    for (unsigned n : nodes) numa_bitmask_setbit(s->mask, n);
    s->who = "numa backend (" + tier + "node(s) " + hostmem::nodes_string(nodes) + ")";
    const char *pages = params->huge_pages == HugePageMode::hugetlb ? "2 MiB hugetlb pages if free on those nodes, else THP, else 4 KiB"
                        : params->huge_pages == HugePageMode::thp   ? "THP, else 4 KiB"
                                                                    : "4 KiB pages";
    s->description = "numa: MPOL_BIND (strict) to node(s) " + hostmem::nodes_string(nodes) + "; " + pages +
                     (s->verify ? "; every page's node verified with move_pages after first touch"
                                : "; placement not verified");
    *state = s;
    return CXLT_OK;
  } catch (const std::bad_alloc &) {
    backend_set_error("numa backend: out of host memory at initialize");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  } catch (...) {
    backend_set_error("numa backend: unexpected failure at initialize");
    return CXLT_ERROR_UNKNOWN;
  }
}

void numa_finalize(void *state) { delete static_cast<NumaState *>(state); }

// Map, bind, touch and verify one extent with one huge-page mode.
cxlt_result_t numa_try_alloc(NumaState *s, size_t bytes, HugePageMode mode, TierExtent *out) {
  TierExtent e;
  cxlt_result_t r = hostmem::map(bytes, mode, s->nodes, &e);
  if (r != CXLT_OK) return r;
  // The policy goes on before any page exists, so first touch allocates on the tier's nodes;
  // MPOL_MF_STRICT makes mbind fail if some page already were elsewhere.
  if (mbind(e.base, e.bytes, MPOL_BIND, s->mask->maskp, s->mask->size + 1, MPOL_MF_STRICT) != 0) {
    int err = errno;
    hostmem::unmap(e);
    backend_set_error(s->who + ": mbind(MPOL_BIND) of " + format_bytes(bytes) + " failed: " + std::strerror(err));
    return CXLT_ERROR_BACKEND;
  }
  r = hostmem::populate(e.base, e.bytes);
  if (r != CXLT_OK) {
    hostmem::unmap(e);
    backend_set_error(s->who + ": " + backend_last_error());
    return r;
  }
  if (s->verify) {
    r = hostmem::verify_nodes(e.base, e.bytes, s->nodes, s->who);
    if (r != CXLT_OK) {
      hostmem::unmap(e);
      return r;
    }
    e.flags |= CXLT_EXTENT_PLACED;
  }
  *out = e;
  return CXLT_OK;
}

cxlt_result_t numa_alloc_extent(void *state, size_t bytes, TierExtent *out) {
  auto *s = static_cast<NumaState *>(state);
  try {
    if (bytes == 0 || out == nullptr) {
      backend_set_error(s->who + ": alloc_extent of 0 bytes (or no output)");
      return CXLT_ERROR_INVALID_ARGUMENT;
    }
    cxlt_result_t r = numa_try_alloc(s, bytes, s->huge, out);
    if (r != CXLT_OK && s->huge == HugePageMode::hugetlb) {
      // Explicit huge pages were free somewhere but not on our nodes at fault time (or were
      // taken meanwhile): the same extent with THP.
      r = numa_try_alloc(s, bytes, HugePageMode::thp, out);
    }
    if (r == CXLT_OK) s->allocated.fetch_add(bytes, std::memory_order_relaxed);
    return r;
  } catch (...) {
    backend_set_error(s->who + ": out of host memory in alloc_extent");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
}

cxlt_result_t numa_free_extent(void *state, const TierExtent *extent) {
  auto *s = static_cast<NumaState *>(state);
  return hostmem::free_counted(extent, s->allocated, s->who);
}

cxlt_result_t numa_capacity(void *state, TierCapacity *out) {
  auto *s = static_cast<NumaState *>(state);
  TierCapacity c;
  for (unsigned n : s->nodes) {
    long long free_bytes = 0;
    long long size = numa_node_size64(static_cast<int>(n), &free_bytes);
    if (size > 0) c.total_bytes += static_cast<uint64_t>(size);
    if (free_bytes > 0) c.free_bytes += static_cast<uint64_t>(free_bytes);
  }
  c.allocated_bytes = s->allocated.load(std::memory_order_relaxed);
  *out = c;
  return CXLT_OK;
}

cxlt_result_t numa_verify(void *state, const void *ptr, size_t bytes) {
  auto *s = static_cast<NumaState *>(state);
  return hostmem::verify_nodes(ptr, bytes, s->nodes, s->who);
}

cxlt_result_t numa_describe(void *state, const char **out) {
  *out = static_cast<NumaState *>(state)->description.c_str();
  return CXLT_OK;
}

const TierOps kNumaOps = {
    .version = CXLT_TIER_OPS_VERSION,
    .name = "numa",
    .initialize = numa_initialize,
    .finalize = numa_finalize,
    .alloc_extent = numa_alloc_extent,
    .free_extent = numa_free_extent,
    .capacity = numa_capacity,
    .ext_verify_placement = numa_verify,
    .ext_copy_in = nullptr,  // plain host memory, the runtime's kernels (or move_pages) copy it
    .ext_copy_out = nullptr,
    .ext_describe = numa_describe,
    .traits = CXLT_TRAIT_HOLDS_BYTES | CXLT_TRAIT_HOST_ADDRESSABLE | CXLT_TRAIT_BINDS_NODES,
};

}  // namespace

const TierOps *tier_numa_ops() noexcept { return &kNumaOps; }

}  // namespace cxltier
