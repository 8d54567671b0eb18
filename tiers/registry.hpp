// SPDX-License-Identifier: Apache-2.0
// The built-in backends' raw ops tables, one function per backend folder. Only
// tiers/registry.cpp calls them (it validates each once); each backend defines its own.
#pragma once

#include "lib/memory/tier_ops.hpp"

#include "cxlt_config.h"

namespace cxltier {

const TierOps *tier_numa_ops() noexcept;      // tiers/numa/numa.cpp
const TierOps *tier_emulated_ops() noexcept;  // tiers/emulated/emulated.cpp
const TierOps *tier_null_ops() noexcept;      // tiers/null/null.cpp
const TierOps *tier_faulty_ops() noexcept;    // tiers/faulty/faulty.cpp
#if CXLT_HAVE_MEMKIND
const TierOps *tier_memkind_ops() noexcept;  // tiers/memkind/memkind.cpp
#endif
// The memkind backend's tier keys (tiers/memkind/options.cpp), built whether memkind is or not.
extern const TierOption tier_memkind_options[];
#if CXLT_HAVE_CUDA_BUILD
const TierOps *tier_cuda_ops() noexcept;       // tiers/cuda/cuda_backend.cpp
const TierOps *tier_cuda_host_ops() noexcept;  // tiers/cuda/cuda_host.cpp
#endif

}  // namespace cxltier
