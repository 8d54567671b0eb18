// SPDX-License-Identifier: Apache-2.0
// The GPU benchmark in builds without the CUDA tier: parameters are still checked, and the
// result says why nothing was measured (gpu_discovery()'s reason).
#include "gpu_bench.hpp"

namespace cxltier::gpu_bench {

Result run(const Params &params) {
  validate(params);
  Result r;
  r.params = params;
  r.why = gpu_discovery().why;
  return r;
}

}  // namespace cxltier::gpu_bench
