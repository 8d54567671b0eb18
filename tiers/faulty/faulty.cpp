// SPDX-License-Identifier: Apache-2.0
// The faulty tier backend (a decorator) and its FaultControl. See faulty.hpp. Injection is
// consulted only where the runtime calls this backend: alloc_extent always; copies when the
// runtime's copy rule (tier_ops.hpp) reaches this backend's ext_copy_in / ext_copy_out, which
// it always does when this tier is the destination.
#include "faulty.hpp"

#include "lib/memory/tier_ops.hpp"
#include "tiers/registry.hpp"

#include <cstring>
#include <memory>
#include <new>
#include <string>

namespace cxltier {

// --- FaultControl ------------------------------------------------------------------------------

void FaultControl::arm(const FaultPlan &plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  plan_ = plan;
  alloc_calls_ = 0;
  copy_calls_ = 0;
}

FaultPlan FaultControl::plan() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plan_;
}

FaultCounts FaultControl::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

void FaultControl::reset_counts() {
  std::lock_guard<std::mutex> lock(mutex_);
  counts_ = {};
}

bool FaultControl::next_alloc_fails() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t k = alloc_calls_++;
  bool fails = plan_.alloc_successes >= 0 && k >= plan_.alloc_successes &&
               (plan_.alloc_failures < 0 || k < plan_.alloc_successes + plan_.alloc_failures);
  (fails ? counts_.allocs_failed : counts_.allocs_passed)++;
  return fails;
}

bool FaultControl::next_copy_fails() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t k = copy_calls_++;
  bool fails = false;
  if (plan_.copy_failure_probability >= 1) {
    fails = true;
  } else if (plan_.copy_failure_probability > 0) {
    // splitmix64 of (seed, k): the k-th copy's fate depends on nothing else.
    uint64_t z = plan_.seed + (k + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    fails = static_cast<double>(z >> 11) * 0x1.0p-53 < plan_.copy_failure_probability;
  }
  (fails ? counts_.copies_failed : counts_.copies_passed)++;
  return fails;
}

// --- The decorator backend ---------------------------------------------------------------------

namespace {

struct FaultyState {
  const TierOps *inner = nullptr;
  void *inner_state = nullptr;
  std::shared_ptr<FaultControl> control;
  bool inner_is_host = false;  // the inner backend's extents are CPU-addressable memory
  std::string who;
  std::string description;
};

cxlt_result_t faulty_initialize(const TierBackendParams *params, void **state) {
  try {
    // Empty: the emulated backend, so that `backend = "faulty"` alone runs on host memory.
    const std::string *inner_opt = params->option(CXLT_OPTION_INNER_BACKEND);
    const std::string inner_name = inner_opt && !inner_opt->empty() ? *inner_opt : std::string("emulated");
    if (inner_name == "faulty") {
      backend_set_error("faulty backend: inner_backend '" + inner_name +
                        "' must name another backend (numa, emulated, null, ...)");
      return CXLT_ERROR_INVALID_ARGUMENT;
    }
    std::string why;
    const TierOps *inner = tier_ops_find(inner_name, &why);
    if (!inner) {
      backend_set_error("faulty backend: " + why);
      return CXLT_ERROR_NOT_SUPPORTED;
    }
    auto s = std::make_unique<FaultyState>();
    s->inner = inner;
    s->control = std::make_shared<FaultControl>();  // armed with nothing: passes through
    s->inner_is_host = inner_name == "numa" || inner_name == "memkind" || inner_name == "emulated";
    s->who = "faulty backend over '" + inner_name + "'";
    cxlt_result_t r = inner->initialize(params, &s->inner_state);
    if (r != CXLT_OK) {
      backend_set_error(s->who + ": " + backend_last_error());
      return r;
    }
    const char *inner_desc = nullptr;
    if (inner->ext_describe(s->inner_state, &inner_desc) != CXLT_OK || !inner_desc) inner_desc = inner_name.c_str();
    s->description = std::string("faulty decorator (injects allocation and copy failures as its FaultControl "
                                 "says) over: ") + inner_desc;
    *state = s.release();
    return CXLT_OK;
  } catch (...) {
    backend_set_error("faulty backend: out of host memory at initialize");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
}

void faulty_finalize(void *state) {
  auto *s = static_cast<FaultyState *>(state);
  s->inner->finalize(s->inner_state);
  delete s;
}

cxlt_result_t faulty_alloc_extent(void *state, size_t bytes, TierExtent *out) {
  auto *s = static_cast<FaultyState *>(state);
  if (s->control && s->control->next_alloc_fails()) {
    backend_set_error(s->who + ": injected alloc_extent failure (" + std::to_string(bytes) + " bytes)");
    return CXLT_ERROR_BACKEND;
  }
  return s->inner->alloc_extent(s->inner_state, bytes, out);
}

cxlt_result_t faulty_free_extent(void *state, const TierExtent *extent) {
  auto *s = static_cast<FaultyState *>(state);
  return s->inner->free_extent(s->inner_state, extent);
}

cxlt_result_t faulty_capacity(void *state, TierCapacity *out) {
  auto *s = static_cast<FaultyState *>(state);
  return s->inner->capacity(s->inner_state, out);
}

cxlt_result_t faulty_verify(void *state, const void *ptr, size_t bytes) {
  auto *s = static_cast<FaultyState *>(state);
  return s->inner->ext_verify_placement(s->inner_state, ptr, bytes);
}

cxlt_result_t faulty_copy_in(void *state, void *dst, const void *src, size_t bytes, const TierOps *src_ops) {
  auto *s = static_cast<FaultyState *>(state);
  if (s->control && s->control->next_copy_fails()) {
    bool src_host = src_ops == nullptr || (std::strcmp(src_ops->name, "null") != 0 &&
                                           std::strcmp(src_ops->name, "cuda") != 0);
    if (s->control->plan().tear_failed_copies && s->inner_is_host && src_host && dst && src) {
      std::memcpy(dst, src, bytes / 2);
    }
    backend_set_error(s->who + ": injected copy failure (copy into this tier, " + std::to_string(bytes) + " bytes)");
    return CXLT_ERROR_BACKEND;
  }
  return s->inner->ext_copy_in(s->inner_state, dst, src, bytes, src_ops);
}

cxlt_result_t faulty_copy_out(void *state, void *dst, const void *src, size_t bytes, const TierOps *dst_ops) {
  auto *s = static_cast<FaultyState *>(state);
  if (s->control && s->control->next_copy_fails()) {
    backend_set_error(s->who + ": injected copy failure (copy out of this tier, " + std::to_string(bytes) + " bytes)");
    return CXLT_ERROR_BACKEND;
  }
  return s->inner->ext_copy_out(s->inner_state, dst, src, bytes, dst_ops);
}

cxlt_result_t faulty_control(void *state, std::shared_ptr<void> *out) {
  *out = static_cast<FaultyState *>(state)->control;
  return CXLT_OK;
}

cxlt_result_t faulty_describe(void *state, const char **out) {
  *out = static_cast<FaultyState *>(state)->description.c_str();
  return CXLT_OK;
}

const TierOps kFaultyOps = {
    .version = CXLT_TIER_OPS_VERSION,
    .name = "faulty",
    .initialize = faulty_initialize,
    .finalize = faulty_finalize,
    .alloc_extent = faulty_alloc_extent,
    .free_extent = faulty_free_extent,
    .capacity = faulty_capacity,
    .ext_verify_placement = faulty_verify,
    .ext_copy_in = faulty_copy_in,
    .ext_copy_out = faulty_copy_out,
    .ext_describe = faulty_describe,
    .traits = CXLT_TRAIT_HOLDS_BYTES | CXLT_TRAIT_HOST_ADDRESSABLE | CXLT_TRAIT_WRAPS_INNER | CXLT_TRAIT_COPIES_ITSELF |
               CXLT_TRAIT_INJECTS_FAULTS,
    .options = nullptr,  // its key is the contract's inner_backend, filled by the runtime
    .ext_control = faulty_control,
};

}  // namespace

const TierOps *tier_faulty_ops() noexcept { return &kFaultyOps; }

std::shared_ptr<FaultControl> fault_control(const TierBackend &backend) {
  if (backend.ops().ext_control != faulty_control) return nullptr;
  return std::static_pointer_cast<FaultControl>(backend.control());
}

}  // namespace cxltier
