// SPDX-License-Identifier: Apache-2.0
// GPU discovery through the dlopen'ed driver (builds with the CUDA tier): count, name, memory,
// PCI bus id, copy engines, and the nearest host NUMA node (the driver's HOST_NUMA_ID attribute
// where it has one, else the node sysfs reports for the PCI device).
#include "lib/topology/gpu.hpp"
#include "tiers/cuda/driver.hpp"

namespace cxltier {

bool cuda_tier_built() noexcept { return true; }

GpuDiscovery discover_gpus() {
  GpuDiscovery out;
  const cuda::DriverLoad &drv = cuda::driver();
  out.driver_path = drv.path;
  out.driver_version = drv.driver_version;
  if (!drv.ok) {
    out.why = "not available: " + drv.why;
    return out;
  }
  const cuda::DriverApi &api = drv.api;
  int count = 0;
  cuda::CUresult r = api.cuDeviceGetCount(&count);
  if (r != cuda::kSuccess) {
    out.why = "not available: cuDeviceGetCount failed: " + cuda::result_string(&api, r);
    return out;
  }
  if (count <= 0) {
    out.why = "not available: the CUDA driver reports no device (check CUDA_VISIBLE_DEVICES)";
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cuda::CUdevice dev = 0;
    if ((r = api.cuDeviceGet(&dev, i)) != cuda::kSuccess) {
      out.why = "not available: cuDeviceGet(" + std::to_string(i) + ") failed: " + cuda::result_string(&api, r);
      out.devices.clear();
      return out;
    }
    GpuDevice g;
    g.ordinal = i;
    char name[256] = {};
    if (api.cuDeviceGetName(name, sizeof name - 1, dev) == cuda::kSuccess) g.name = name;
    if (g.name.empty()) g.name = "CUDA device " + std::to_string(i);
    size_t total = 0;
    if (api.cuDeviceTotalMem(&total, dev) == cuda::kSuccess) g.total_bytes = total;
    char bus[64] = {};
    if (api.cuDeviceGetPCIBusId(bus, sizeof bus - 1, dev) == cuda::kSuccess) g.pci_bus_id = normalize_pci_bus_id(bus);
    auto attr = [&](int a, int fallback) {
      int v = 0;
      return api.cuDeviceGetAttribute(&v, a, dev) == cuda::kSuccess ? v : fallback;
    };
    g.cc_major = attr(cuda::kAttrComputeCapabilityMajor, 0);
    g.cc_minor = attr(cuda::kAttrComputeCapabilityMinor, 0);
    g.multiprocessors = attr(cuda::kAttrMultiprocessorCount, 0);
    g.async_engines = attr(cuda::kAttrAsyncEngineCount, 0);
    g.unified_addressing = attr(cuda::kAttrUnifiedAddressing, 0) != 0;
    g.can_map_host_memory = attr(cuda::kAttrCanMapHostMemory, 0) != 0;
    g.host_register_supported = attr(cuda::kAttrHostRegisterSupported, 1) != 0;
    // The driver's own answer first (CUDA 12.2+): it knows NVLink-C2C machines, where sysfs
    // may not; -1 or an error means it does not know.
    int host_numa = attr(cuda::kAttrHostNumaId, -1);
    if (host_numa >= 0) {
      g.numa_node = host_numa;
      g.numa_evidence = "nearest NUMA node " + std::to_string(host_numa) + " (driver attribute HOST_NUMA_ID)";
    } else if (!g.pci_bus_id.empty()) {
      g.numa_node = pci_numa_node("/sys", g.pci_bus_id, &g.numa_evidence);
    } else {
      g.numa_evidence = "nearest NUMA node unknown: the driver gave no PCI bus id";
    }
    out.devices.push_back(std::move(g));
  }
  out.available = true;
  return out;
}

const GpuDiscovery &gpu_discovery() {
  static const GpuDiscovery d = discover_gpus();
  return d;
}

}  // namespace cxltier
