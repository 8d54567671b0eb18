// SPDX-License-Identifier: Apache-2.0
// Part of libcxltier_nocuda_probe.so (tests/gpu/meson.build), which gpu_symbols only reads with
// nm and never loads. The core's tiers/registry.cpp object, compiled for the CUDA build, names
// the two CUDA backends' tables; a -Dcuda=disabled build compiles it without them. These
// definitions close that link without changing the export list: like the real ones they have
// hidden visibility (the probe is built with -fvisibility=hidden), so nm -D never shows them.
#include "lib/memory/tier_ops.hpp"
#include "tiers/registry.hpp"

namespace cxltier {

const TierOps *tier_cuda_ops() noexcept { return nullptr; }       // never called: never loaded
const TierOps *tier_cuda_host_ops() noexcept { return nullptr; }  // never called: never loaded

}  // namespace cxltier
