// SPDX-License-Identifier: Apache-2.0
// choose_backend(): the tier's backend from the registered backends' traits.
#include "lib/memory/choose.hpp"

#include <cxltier/error.hpp>

namespace cxltier {

const TierOps *first_backend_with(uint32_t need, uint32_t refuse) {
  for (const std::string &n : tier_ops_names()) {
    const TierOps *ops = tier_ops_find(n, nullptr);
    if (ops && (ops->traits & need) == need && (ops->traits & refuse) == 0) return ops;
  }
  return nullptr;
}

BackendChoice choose_backend(const BackendWish &wish) {
  BackendChoice c;
  if (wish.backend == "auto") {
    // Decorators (WRAPS_INNER) are never chosen by themselves.
    const TierOps *ops = nullptr;
    const char *want = "";
    if (wish.device_tier) {
      ops = first_backend_with(CXLT_TRAIT_HOLDS_BYTES | CXLT_TRAIT_DEVICE_MEMORY, CXLT_TRAIT_WRAPS_INNER);
      want = "holds device memory";
    } else if (wish.emulated) {
      ops = first_backend_with(CXLT_TRAIT_HOLDS_BYTES | CXLT_TRAIT_HOST_ADDRESSABLE,
                               CXLT_TRAIT_BINDS_NODES | CXLT_TRAIT_WRAPS_INNER | CXLT_TRAIT_DEVICE_MEMORY);
      want = "stands in for host memory without binding it to nodes";
    } else {
      ops = first_backend_with(CXLT_TRAIT_HOLDS_BYTES | CXLT_TRAIT_HOST_ADDRESSABLE | CXLT_TRAIT_BINDS_NODES,
                               CXLT_TRAIT_WRAPS_INNER | CXLT_TRAIT_DEVICE_MEMORY);
      want = "binds host memory to NUMA nodes";
    }
    if (ops == nullptr) fail(CXLT_ERROR_CONFIG, "backend = auto: no backend in this build ", want);
    c.name = ops->name;
    c.ops = ops;
  } else {
    c.name = wish.backend;
    c.ops = tier_ops_find(wish.backend, nullptr);
  }
  c.traits = c.ops ? c.ops->traits : 0;
  c.open_as = c.name;
  // Host memory that the runtime's kernels copy (not a decorator, no copy path of its own, not
  // paced) is pinned for the device through the decorator that pins for one.
  const uint32_t t = c.traits;
  const bool own_copies = (t & CXLT_TRAIT_COPIES_ITSELF) || ((t & CXLT_TRAIT_PACES) && wish.paced);
  if (wish.pin_for_device && (t & CXLT_TRAIT_HOLDS_BYTES) && (t & CXLT_TRAIT_HOST_ADDRESSABLE) &&
      !(t & (CXLT_TRAIT_WRAPS_INNER | CXLT_TRAIT_DEVICE_MEMORY)) && !own_copies) {
    if (const TierOps *pin = first_backend_with(CXLT_TRAIT_WRAPS_INNER | CXLT_TRAIT_PINS_FOR_DEVICE, 0)) {
      c.open_as = pin->name;
      c.wrapped = true;
    }
  }
  return c;
}

}  // namespace cxltier
