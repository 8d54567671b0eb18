// SPDX-License-Identifier: Apache-2.0
// Which backend a tier opens, decided from the backends' traits (tier_ops.hpp), never from
// their names: the `auto` choice (device memory for a GPU tier, a stand-in for an emulated
// tier, node binding otherwise) and the pinning decorator that host tiers are opened through
// when the runtime also has a device-memory tier (so the device can DMA their blocks).
#pragma once

#include "lib/memory/tier_ops.hpp"

#include <cstdint>
#include <string>

namespace cxltier {

// What a tier asks for.
struct BackendWish {
  std::string backend = "auto";  // the tier's `backend` key: "auto" or a backend's name
  bool device_tier = false;      // the topology's tier is a device's memory (a GPU)
  bool emulated = false;         // the tier stands for memory this machine lacks
  bool paced = false;            // option CXLT_OPTION_PACE > 0: copies into the tier are paced
  bool pin_for_device = false;   // the runtime has a device-memory tier (host tiers get pinned)
};

struct BackendChoice {
  std::string name;              // the backend the tier uses (reported in tier info and stats)
  std::string open_as;           // what TierBackend opens: `name`, or a decorator wrapping it
  bool wrapped = false;          // open_as wraps `name` (option CXLT_OPTION_INNER_BACKEND = name)
  const TierOps *ops = nullptr;  // `name`'s validated table; nullptr when this build lacks it
  uint32_t traits = 0;           // ops->traits, 0 without ops
};

// Throws Error(CXLT_ERROR_CONFIG) when `auto` finds no backend with the traits it needs. A
// named backend this build lacks is not an error here: opening it explains (TierBackend).
BackendChoice choose_backend(const BackendWish &wish);

// The first backend, in registration order, that has every trait in `need` and none in
// `refuse`; nullptr when none has.
const TierOps *first_backend_with(uint32_t need, uint32_t refuse);

}  // namespace cxltier
