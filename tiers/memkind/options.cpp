// SPDX-License-Identifier: Apache-2.0
// The memkind backend's tier keys. Built whether memkind is or not, so that a configuration
// naming a kind stays valid on every build (opening such a tier explains what is missing).
#include "lib/memory/tier_ops.hpp"
#include "tiers/registry.hpp"

namespace cxltier {

namespace {

// The kinds memkind.cpp knows, in its order.
const char *const kKindNames[] = {"regular",  "hbw",          "hbw_all",           "hbw_preferred",
                                  "dax_kmem", "dax_kmem_all", "dax_kmem_preferred", nullptr};

}  // namespace

const TierOption tier_memkind_options[] = {
    {.key = "memkind_kind",
     .type = TierOptionType::text,
     .default_value = "regular",
     .doc = "memkind backend: regular, hbw, dax_kmem, ...",
     .choices = kKindNames,
     .noun = "memkind kind",
     .min_value = 0.0,
     .check = nullptr},
    {.key = nullptr, .type = TierOptionType::text, .default_value = nullptr, .doc = nullptr, .choices = nullptr,
     .noun = nullptr, .min_value = 0.0, .check = nullptr},
};

}  // namespace cxltier
