// SPDX-License-Identifier: Apache-2.0
// GPU discovery pieces that do not need the driver, built in every configuration: PCI bus ids,
// the NUMA node sysfs reports for a PCI device, the gpu tier description and its place in a
// topology (GPU tiers first), and the note that says why there is none.
#include "lib/topology/gpu.hpp"

#include <cxltier/topology.hpp>
#include <cxltier/tools/units.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <string>

namespace cxltier {

std::string normalize_pci_bus_id(const std::string &bus_id) {
  std::string s;
  for (char c : bus_id) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  // "bb:dd.f" has one colon; "dddd:bb:dd.f" two. The driver gives "0000:3B:00.0" (8-digit
  // domains on some drivers: "00000000:3B:00.0"); sysfs always uses 4 digits.
  size_t colons = static_cast<size_t>(std::count(s.begin(), s.end(), ':'));
  if (colons == 1) return "0000:" + s;
  if (colons == 2) {
    size_t first = s.find(':');
    std::string domain = s.substr(0, first);
    while (domain.size() > 4 && domain.front() == '0') domain.erase(0, 1);
    while (domain.size() < 4) domain.insert(0, "0");
    return domain + s.substr(first);
  }
  return s;
}

int pci_numa_node(const std::string &sysfs_root, const std::string &bus_id, std::string *evidence) {
  const std::string id = normalize_pci_bus_id(bus_id);
  const std::string path = sysfs_root + "/bus/pci/devices/" + id + "/numa_node";
  auto say = [&](const std::string &s) {
    if (evidence) *evidence = s;
  };
  std::ifstream in(path);
  if (!in) {
    say("nearest NUMA node unknown: " + path + " cannot be read");
    return -1;
  }
  long node = -2;
  in >> node;
  if (!in || node < -1 || node > 65535) {
    say("nearest NUMA node unknown: " + path + " does not hold a node number");
    return -1;
  }
  if (node == -1) {
    say("nearest NUMA node unknown: " + path + " says -1 (no NUMA affinity reported by the firmware)");
    return -1;
  }
  say("nearest NUMA node " + std::to_string(node) + " (from " + path + ")");
  return static_cast<int>(node);
}

TierDesc gpu_tier_desc(const GpuDevice &gpu, const GpuDiscovery &from) {
  TierDesc t;
  t.kind = TierKind::gpu;
  t.capacity_bytes = gpu.total_bytes;
  t.cuda_device = gpu.ordinal;
  char cc[32];
  std::snprintf(cc, sizeof cc, "%d.%d", gpu.cc_major, gpu.cc_minor);
  t.evidence.push_back("CUDA device " + std::to_string(gpu.ordinal) + ": " + gpu.name + " (compute capability " +
                       cc + ", " + std::to_string(gpu.multiprocessors) + " multiprocessors, " +
                       std::to_string(gpu.async_engines) + " copy engine" + (gpu.async_engines == 1 ? "" : "s") + ")");
  t.evidence.push_back("device memory " + format_bytes(gpu.total_bytes) +
                       " (cuDeviceTotalMem), not a NUMA node: blocks reach it by DMA through the cuda backend");
  t.evidence.push_back("PCI " + (gpu.pci_bus_id.empty() ? std::string("bus id unknown") : gpu.pci_bus_id));
  t.evidence.push_back(gpu.numa_evidence.empty() ? std::string("nearest NUMA node unknown") : gpu.numa_evidence);
  if (gpu.async_engines < 2)
    t.evidence.push_back("fewer than 2 copy engines: copies to and from the GPU do not overlap");
  if (!gpu.host_register_supported)
    t.evidence.push_back("the driver says host memory cannot be registered (pinned) for this device: copies are staged");
  char drv[48];
  std::snprintf(drv, sizeof drv, "%d.%d", from.driver_version / 1000, (from.driver_version % 1000) / 10);
  t.evidence.push_back("driver API " + std::string(drv) + " (" + from.driver_path + ", loaded at run time)");
  t.evidence.push_back("ranked first: KV blocks are consumed by the GPU (bandwidth and latency are not measured here)");
  return t;
}

std::string gpu_tiers_remark(const GpuDiscovery &gpus) {
  if (!gpus.available || gpus.devices.empty())
    return "No GPU tier: " + (gpus.why.empty() ? std::string("no CUDA device") : gpus.why) + ".";
  std::string s = "GPU tiers: " + std::to_string(gpus.devices.size()) + " CUDA device" +
                  (gpus.devices.size() == 1 ? "" : "s") + " (";
  for (size_t i = 0; i < gpus.devices.size(); ++i) s += (i ? ", " : "") + gpus.devices[i].name;
  return s + ") ranked first.";
}

size_t add_gpu_tiers(Topology &topo, const GpuDiscovery &gpus) {
  const std::string remark = gpu_tiers_remark(gpus);
  topo.note += (topo.note.empty() ? "" : " ") + remark;
  if (!gpus.available || gpus.devices.empty()) return 0;
  std::vector<TierDesc> tiers;
  for (const GpuDevice &g : gpus.devices) tiers.push_back(gpu_tier_desc(g, gpus));
  const size_t added = tiers.size();
  for (TierDesc &t : topo.tiers) tiers.push_back(std::move(t));
  for (size_t i = 0; i < tiers.size(); ++i) tiers[i].rank = static_cast<int>(i);
  topo.tiers = std::move(tiers);
  // GPU memory that hwloc shows as NUMA nodes (Grace-Hopper, POWER9) may be the same HBM the
  // driver reports: say so rather than guess which is which.
  bool numa_gpu = std::any_of(topo.tiers.begin() + static_cast<std::ptrdiff_t>(added), topo.tiers.end(),
                              [](const TierDesc &t) { return t.kind == TierKind::gpu; });
  if (numa_gpu)
    topo.note += " This machine also shows GPU memory as NUMA nodes: that memory and the CUDA device memory may be "
                 "the same HBM; give the two kinds of tier budgets that fit together.";
  return added;
}

size_t append_gpu_tiers(Topology &topo) { return add_gpu_tiers(topo, gpu_discovery()); }

}  // namespace cxltier
