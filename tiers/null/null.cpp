// SPDX-License-Identifier: Apache-2.0
// The null tier backend: no bytes at all. Extents have base nullptr (only their size counts
// against budgets), copies do nothing, so a trace replays through the same runtime code at
// full speed. A block read out of a null tier leaves its destination as it was.
#include "lib/memory/tier_ops.hpp"
#include "tiers/registry.hpp"

#include <atomic>
#include <cstdint>
#include <new>
#include <string>

namespace cxltier {

namespace {

struct NullState {
  uint64_t declared_capacity = 0;
  std::atomic<uint64_t> allocated{0};
  std::string description;
};

cxlt_result_t null_initialize(const TierBackendParams *params, void **state) {
  auto *s = new (std::nothrow) NullState;
  if (!s) {
    backend_set_error("null backend: out of host memory at initialize");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
  try {
    s->declared_capacity = params->capacity_bytes;
    s->description = std::string("null ") + tier_kind_name(params->kind) +
                     " tier: no bytes (extents have no memory; copies do nothing), for trace replay";
  } catch (...) {
    delete s;
    backend_set_error("null backend: out of host memory at initialize");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
  *state = s;
  return CXLT_OK;
}

void null_finalize(void *state) { delete static_cast<NullState *>(state); }

cxlt_result_t null_alloc_extent(void *state, size_t bytes, TierExtent *out) {
  auto *s = static_cast<NullState *>(state);
  if (bytes == 0 || out == nullptr) {
    backend_set_error("null backend: alloc_extent of 0 bytes (or no output)");
    return CXLT_ERROR_INVALID_ARGUMENT;
  }
  s->allocated.fetch_add(bytes, std::memory_order_relaxed);
  *out = TierExtent{nullptr, bytes, 0};
  return CXLT_OK;
}

cxlt_result_t null_free_extent(void *state, const TierExtent *extent) {
  auto *s = static_cast<NullState *>(state);
  if (extent == nullptr || extent->base != nullptr) {
    backend_set_error("null backend: free_extent of an extent it did not hand out (base is not null)");
    return CXLT_ERROR_INVALID_ARGUMENT;
  }
  s->allocated.fetch_sub(extent->bytes, std::memory_order_relaxed);
  return CXLT_OK;
}

cxlt_result_t null_capacity(void *state, TierCapacity *out) {
  auto *s = static_cast<NullState *>(state);
  TierCapacity c;
  c.total_bytes = s->declared_capacity ? s->declared_capacity : UINT64_MAX;
  c.free_bytes = c.total_bytes;
  c.allocated_bytes = s->allocated.load(std::memory_order_relaxed);
  *out = c;
  return CXLT_OK;
}

cxlt_result_t null_copy(void *, void *, const void *, size_t, const TierOps *) { return CXLT_OK; }

cxlt_result_t null_describe(void *state, const char **out) {
  *out = static_cast<NullState *>(state)->description.c_str();
  return CXLT_OK;
}

const TierOps kNullOps = {
    .version = CXLT_TIER_OPS_VERSION,
    .name = "null",
    .initialize = null_initialize,
    .finalize = null_finalize,
    .alloc_extent = null_alloc_extent,
    .free_extent = null_free_extent,
    .capacity = null_capacity,
    .ext_verify_placement = nullptr,  // nothing is placed
    .ext_copy_in = null_copy,  // nothing to write
    .ext_copy_out = null_copy,  // nothing to read; the destination is left as it was
    .ext_describe = null_describe,
    .traits = CXLT_TRAIT_COPIES_ITSELF,
};

}  // namespace

const TierOps *tier_null_ops() noexcept { return &kNullOps; }

}  // namespace cxltier
