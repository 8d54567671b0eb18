// SPDX-License-Identifier: Apache-2.0
// The memkind tier backend (optional; memkind is discontinued upstream since 2024 and is never
// the default: 'numa' does the same placement without it). Extents come from a memkind kind
// (regular, hbw, dax_kmem and their _all / _preferred variants), are touched, and, when the
// kind binds (not _preferred) and its nodes are known, verified page by page like 'numa'.
// memkind reads MEMKIND_HBW_NODES / MEMKIND_DAX_KMEM_NODES once, at its first use of a kind:
// set them before the process starts to make those kinds usable on a one-node host.
#include "lib/memory/tier_ops.hpp"
#include "tiers/hostmem.hpp"
#include "tiers/registry.hpp"

#include <cxltier/tools/units.hpp>

#include <memkind.h>
#include <numa.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

namespace cxltier {

namespace {

struct KindEntry {
  const char *name;
  memkind_t *kind;  // memkind's kinds are globals initialised by the library: take their address
  const char *env;  // the environment variable that can stand in for the hardware, or nullptr
  bool preferred;   // may fall back to other nodes by design: placement is not verified
};

const KindEntry kKinds[] = {
    {"regular", &MEMKIND_REGULAR, nullptr, false},
    {"hbw", &MEMKIND_HBW, "MEMKIND_HBW_NODES", false},
    {"hbw_all", &MEMKIND_HBW_ALL, "MEMKIND_HBW_NODES", false},
    {"hbw_preferred", &MEMKIND_HBW_PREFERRED, "MEMKIND_HBW_NODES", true},
    {"dax_kmem", &MEMKIND_DAX_KMEM, "MEMKIND_DAX_KMEM_NODES", false},
    {"dax_kmem_all", &MEMKIND_DAX_KMEM_ALL, "MEMKIND_DAX_KMEM_NODES", false},
    {"dax_kmem_preferred", &MEMKIND_DAX_KMEM_PREFERRED, "MEMKIND_DAX_KMEM_NODES", true},
};

struct MemkindState {
  const KindEntry *entry = nullptr;
  memkind_t kind = nullptr;
  HugePageMode huge = HugePageMode::hugetlb;
  std::vector<unsigned> nodes;  // expected nodes (empty: unknown, not verified)
  bool verify = false;
  std::string who;
  std::string description;
  std::atomic<uint64_t> allocated{0};
};

std::string memkind_message(int err) {
  char buf[MEMKIND_ERROR_MESSAGE_SIZE] = "";
  memkind_error_message(err, buf, sizeof buf);
  return std::string(buf) + " (memkind error " + std::to_string(err) + ")";
}

std::vector<unsigned> nodes_from_env(const char *var) {
  std::vector<unsigned> out;
  const char *v = var ? std::getenv(var) : nullptr;
  if (!v || !*v) return out;
  struct bitmask *m = numa_parse_nodestring(v);
  if (!m) return out;
  for (unsigned n = 0; n < m->size; ++n) {
    if (numa_bitmask_isbitset(m, n)) out.push_back(n);
  }
  numa_bitmask_free(m);
  return out;
}

cxlt_result_t memkind_initialize(const TierBackendParams *params, void **state) {
  try {
    const std::string *given = params->option("memkind_kind");
    const std::string kind_name = given ? *given : std::string("regular");
    const KindEntry *entry = nullptr;
    std::string known;
    for (const KindEntry &k : kKinds) {
      if (kind_name == k.name) entry = &k;
      known += std::string(known.empty() ? "" : ", ") + k.name;
    }
    if (!entry) {
      backend_set_error("memkind backend: unknown kind '" + kind_name + "' (known: " + known + ")");
      return CXLT_ERROR_INVALID_ARGUMENT;
    }
    std::string who = "memkind backend (kind " + std::string(entry->name) +
                      (params->tier_name.empty() ? "" : ", tier '" + params->tier_name + "'") + ")";
    int err = memkind_check_available(*entry->kind);
    if (err != 0) {
      std::string msg = who + ": kind not available on this machine: " + memkind_message(err);
      if (entry->env) {
        msg += std::string("; to use ordinary nodes in its place, set ") + entry->env +
               "=<nodes> in the environment before the process starts (memkind reads it once)";
      }
      backend_set_error(msg);
      return CXLT_ERROR_NOT_SUPPORTED;
    }
    auto *s = new MemkindState;
    s->entry = entry;
    s->kind = *entry->kind;
    s->huge = params->huge_pages;
    s->who = who;
    s->nodes = params->numa_nodes.empty() ? nodes_from_env(entry->env) : params->numa_nodes;
    s->verify = params->verify_placement && !entry->preferred && !s->nodes.empty();
    s->description = "memkind kind " + std::string(entry->name) + " (memkind is discontinued upstream; optional)";
    if (s->verify) {
      s->description += "; every page verified on node(s) " + hostmem::nodes_string(s->nodes);
    } else {
      s->description += entry->preferred ? "; preferred kind: placement may fall back, not verified"
                                         : "; its nodes are memkind's choice, not verified";
    }
    s->description += params->huge_pages == HugePageMode::none ? "; THP not advised" : "; THP advised where enabled";
    *state = s;
    return CXLT_OK;
  } catch (...) {
    backend_set_error("memkind backend: out of host memory at initialize");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
}

void memkind_finalize(void *state) { delete static_cast<MemkindState *>(state); }

cxlt_result_t memkind_alloc_extent(void *state, size_t bytes, TierExtent *out) {
  auto *s = static_cast<MemkindState *>(state);
  try {
    if (bytes == 0 || out == nullptr) {
      backend_set_error(s->who + ": alloc_extent of 0 bytes (or no output)");
      return CXLT_ERROR_INVALID_ARGUMENT;
    }
    void *p = nullptr;
    int err = memkind_posix_memalign(s->kind, &p, hostmem::kHugePage2M, bytes);
    if (err != 0 || p == nullptr) {
      backend_set_error(s->who + ": memkind_posix_memalign of " + format_bytes(bytes) + " failed: " +
                        (err == ENOMEM ? std::string("out of memory") : memkind_message(err)));
      return err == ENOMEM ? CXLT_ERROR_OUT_OF_TIER_MEMORY : CXLT_ERROR_BACKEND;
    }
    TierExtent e{p, bytes, CXLT_EXTENT_HOST};
    // memkind has its own hugetlb kinds (which need a hugetlbfs pool); here only THP is advised.
    if (s->huge != HugePageMode::none && hostmem::thp_enabled() && madvise(p, bytes, MADV_HUGEPAGE) == 0) {
      e.flags |= CXLT_EXTENT_THP;
    }
    cxlt_result_t r = hostmem::populate(p, bytes);
    if (r == CXLT_OK && s->verify) r = hostmem::verify_nodes(p, bytes, s->nodes, s->who);
    if (r != CXLT_OK) {
      memkind_free(s->kind, p);
      return r;
    }
    if (s->verify) e.flags |= CXLT_EXTENT_PLACED;
    s->allocated.fetch_add(bytes, std::memory_order_relaxed);
    *out = e;
    return CXLT_OK;
  } catch (...) {
    backend_set_error(s->who + ": out of host memory in alloc_extent");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
}

cxlt_result_t memkind_free_extent(void *state, const TierExtent *extent) {
  auto *s = static_cast<MemkindState *>(state);
  if (extent == nullptr || extent->base == nullptr) {
    backend_set_error(s->who + ": free_extent of an empty extent");
    return CXLT_ERROR_INVALID_ARGUMENT;
  }
  memkind_free(s->kind, extent->base);
  s->allocated.fetch_sub(extent->bytes, std::memory_order_relaxed);
  return CXLT_OK;
}

cxlt_result_t memkind_capacity(void *state, TierCapacity *out) {
  auto *s = static_cast<MemkindState *>(state);
  TierCapacity c;
  ssize_t cap = memkind_get_capacity(s->kind);
  c.total_bytes = cap > 0 ? static_cast<uint64_t>(cap) : 0;
  c.free_bytes = c.total_bytes;
  if (!s->nodes.empty()) {
    uint64_t f = 0;
    for (unsigned n : s->nodes) {
      long long free_bytes = 0;
      if (numa_node_size64(static_cast<int>(n), &free_bytes) > 0 && free_bytes > 0) f += static_cast<uint64_t>(free_bytes);
    }
    c.free_bytes = std::min(c.total_bytes, f);
  }
  c.allocated_bytes = s->allocated.load(std::memory_order_relaxed);
  *out = c;
  return CXLT_OK;
}

cxlt_result_t memkind_verify(void *state, const void *ptr, size_t bytes) {
  auto *s = static_cast<MemkindState *>(state);
  if (s->nodes.empty()) {
    backend_set_error(s->who + ": which nodes this kind uses is unknown (no numa_nodes given): cannot verify");
    return CXLT_ERROR_NOT_SUPPORTED;
  }
  return hostmem::verify_nodes(ptr, bytes, s->nodes, s->who);
}

cxlt_result_t memkind_describe(void *state, const char **out) {
  *out = static_cast<MemkindState *>(state)->description.c_str();
  return CXLT_OK;
}

const TierOps kMemkindOps = {
    .version = CXLT_TIER_OPS_VERSION,
    .name = "memkind",
    .initialize = memkind_initialize,
    .finalize = memkind_finalize,
    .alloc_extent = memkind_alloc_extent,
    .free_extent = memkind_free_extent,
    .capacity = memkind_capacity,
    .ext_verify_placement = memkind_verify,
    .ext_copy_in = nullptr,  // host memory
    .ext_copy_out = nullptr,
    .ext_describe = memkind_describe,
    .traits = CXLT_TRAIT_HOLDS_BYTES | CXLT_TRAIT_HOST_ADDRESSABLE | CXLT_TRAIT_BINDS_NODES,
    .options = tier_memkind_options,
    .ext_control = nullptr,
};

}  // namespace

const TierOps *tier_memkind_ops() noexcept { return &kMemkindOps; }

}  // namespace cxltier
