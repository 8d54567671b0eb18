// SPDX-License-Identifier: Apache-2.0
// Builds without the CUDA tier (meson -Dcuda=disabled, or no nvcc when it was configured):
// discovery answers "not available" with the reason, so the C ABI, topology and CLI behave
// as on a machine without a GPU and the exported symbol set stays the same.
#include "lib/topology/gpu.hpp"

namespace cxltier {

bool cuda_tier_built() noexcept { return false; }

GpuDiscovery discover_gpus() {
  GpuDiscovery out;
  out.why = "not available: this build of cxltier has no CUDA tier (meson option cuda was disabled, or nvcc was "
            "not found when it was configured; see docs/gpu.md)";
  return out;
}

const GpuDiscovery &gpu_discovery() {
  static const GpuDiscovery d = discover_gpus();
  return d;
}

}  // namespace cxltier
