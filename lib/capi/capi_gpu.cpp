// SPDX-License-Identifier: Apache-2.0
// C ABI: cxlt_gpu_count and cxlt_gpu_info, the same in every build (discovery answers "not
// available" when the build has no CUDA tier or the machine no driver).
#include "lib/capi/guard.hpp"
#include "lib/topology/gpu.hpp"

#include <cxltier/cxltier.h>
#include <cxltier/error.hpp>

#include <cstring>

using namespace cxltier;

namespace {

const GpuDiscovery &require_gpus() {
  const GpuDiscovery &d = gpu_discovery();
  if (!d.available || d.devices.empty()) fail(CXLT_ERROR_NOT_SUPPORTED, "no CUDA GPU: ", d.why);
  return d;
}

void copy_text(char *dst, size_t cap, const std::string &src) {
  size_t n = std::min(cap - 1, src.size());
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

}  // namespace

extern "C" {

cxlt_result_t cxlt_gpu_count(int *out) noexcept {
  return capi::capi_call([&] {
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_gpu_count: out is NULL");
    *out = static_cast<int>(require_gpus().devices.size());
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_gpu_info(int device, cxlt_gpu_info_t *out) noexcept {
  return capi::capi_call([&] {
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_gpu_info: out is NULL");
    const GpuDiscovery &d = require_gpus();
    if (device < 0 || static_cast<size_t>(device) >= d.devices.size())
      fail(CXLT_ERROR_INVALID_ARGUMENT, "cxlt_gpu_info: device ", device, " does not exist (devices 0 to ",
           d.devices.size() - 1, ")");
    const GpuDevice &g = d.devices[static_cast<size_t>(device)];
    cxlt_gpu_info_t info{};
    info.device = g.ordinal;
    copy_text(info.name, sizeof info.name, g.name);
    copy_text(info.pci_bus_id, sizeof info.pci_bus_id, g.pci_bus_id);
    info.numa_node = g.numa_node;
    info.total_bytes = g.total_bytes;
    info.compute_major = g.cc_major;
    info.compute_minor = g.cc_minor;
    info.copy_engines = g.async_engines;
    *out = info;
    return CXLT_OK;
  });
}

}  // extern "C"
