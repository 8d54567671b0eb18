// SPDX-License-Identifier: Apache-2.0
// GPU discovery for the rest of the library (topology, runtime, C ABI, CLI), the same
// declarations in every build. Declared here in the core, defined by tiers/cuda: with the CUDA
// tier built (meson option `cuda`) gpu_discover.cpp asks the dlopen'ed driver; without it
// gpu_off.cpp answers "not available: this build has no CUDA tier"; gpu_common.cpp holds what
// needs no driver. Internal; the public face is append_gpu_tiers() in <cxltier/topology.hpp>
// and cxlt_gpu_count / cxlt_gpu_info in <cxltier/cxltier.h>.
#pragma once

#include <cxltier/topology.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cxltier {

struct GpuDevice {
  int ordinal = 0;                 // CUDA device ordinal (after CUDA_VISIBLE_DEVICES)
  std::string name;                // "NVIDIA H200"
  std::string pci_bus_id;          // "0000:3b:00.0" (lower case, as sysfs spells it)
  uint64_t total_bytes = 0;        // device memory, bytes
  int numa_node = -1;              // nearest host NUMA node, -1 unknown
  std::string numa_evidence;       // where numa_node came from, or why it is unknown
  int cc_major = 0, cc_minor = 0;  // compute capability
  int multiprocessors = 0;
  int async_engines = 0;           // copy engines: >= 2 lets H2D and D2H run at once
  bool unified_addressing = false;
  bool can_map_host_memory = false;
  bool host_register_supported = true;  // false only when the driver says so
};

struct GpuDiscovery {
  bool available = false;  // a driver was loaded and reports at least one device
  std::string why;         // when !available: one line saying why ("not available: ...")
  std::string driver_path; // the library loaded ("libcuda.so.1")
  int driver_version = 0;  // e.g. 12040 for CUDA 12.4
  std::vector<GpuDevice> devices;
};

// True in builds with the CUDA tier (meson found nvcc and option `cuda` was not disabled).
bool cuda_tier_built() noexcept;

// Ask the driver now (no caching). Never throws.
GpuDiscovery discover_gpus();
// The same, asked once per process (thread-safe) and kept: what topology and the C ABI use.
const GpuDiscovery &gpu_discovery();

// "0000:3B:00.0" -> "0000:3b:00.0"; a bus id without a domain ("3b:00.0") gets "0000:".
std::string normalize_pci_bus_id(const std::string &bus_id);

// The NUMA node the kernel reports for a PCI device: <sysfs_root>/bus/pci/devices/<bus id>/numa_node
// (sysfs_root is "/sys" on a live machine; tests pass a directory of their own). Returns -1
// when the file is missing or says -1 (a machine without NUMA, or firmware that did not say),
// with *evidence (may be nullptr) saying which.
int pci_numa_node(const std::string &sysfs_root, const std::string &bus_id, std::string *evidence);

// The tier that one GPU's memory forms: kind gpu, no NUMA nodes (device memory is not a NUMA
// node), its capacity, the evidence (name, PCI bus id, nearest NUMA node, driver), cuda_device.
TierDesc gpu_tier_desc(const GpuDevice &gpu, const GpuDiscovery &from);

// Add `gpus`' tiers in front of topo's tiers (GPU memory is where KV blocks are consumed, so
// it ranks first) and re-rank; with no devices, append a sentence to topo.note saying why.
// Returns the number of tiers added. append_gpu_tiers(Topology&) is this with gpu_discovery().
size_t add_gpu_tiers(Topology &topo, const GpuDiscovery &gpus);

// One sentence for notes: "GPU tiers: 1 CUDA device (NVIDIA H200)." or "No GPU tier: <why>."
std::string gpu_tiers_remark(const GpuDiscovery &gpus);

}  // namespace cxltier
