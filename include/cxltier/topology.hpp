// SPDX-License-Identifier: Apache-2.0
// Tier discovery: which memory tiers this machine (or an hwloc XML file, or the embedded
// default) has, what each can hold and how fast it is, ordered fastest first.
#pragma once

#include <cxltier/cxltier.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cxltier {

enum class TierKind : int {
  hbm = CXLT_TIER_HBM,
  gpu = CXLT_TIER_GPU,
  dram = CXLT_TIER_DRAM,
  cxl = CXLT_TIER_CXL,
  nvm = CXLT_TIER_NVM,
  spm = CXLT_TIER_SPM,
  unknown = CXLT_TIER_UNKNOWN,
  remote = CXLT_TIER_REMOTE,
};

// "hbm", "gpu", "dram", "cxl", "nvm", "spm", "unknown", "remote".
CXLT_API const char *tier_kind_name(TierKind kind) noexcept;
// The inverse, case-insensitive; nullopt for an unknown name.
CXLT_API std::optional<TierKind> parse_tier_kind(std::string_view name) noexcept;

// One tier: NUMA nodes of the same kind and performance, whatever socket they sit on.
struct TierDesc {
  int rank = 0;                          // 0 is the fastest
  TierKind kind = TierKind::unknown;
  std::vector<unsigned> numa_nodes;      // OS indexes, ascending
  uint64_t capacity_bytes = 0;           // sum over the nodes
  std::optional<double> bandwidth_mib_s; // MiB/s from the CPUs' point of view; higher is better
  std::optional<double> latency_ns;      // ns; lower is better
  std::vector<std::string> evidence;     // what the classification used, one fact per string
  bool emulated = false;                 // laid on host memory standing in for this kind
  int cuda_device = -1;                  // gpu tiers found through the CUDA driver: the device
                                         // ordinal (their memory is no NUMA node); -1 otherwise
};

enum class TopologySource { this_system, xml, emulated };
CXLT_API const char *topology_source_name(TopologySource s) noexcept;  // "this-system", "xml", "emulated"

struct Topology {
  TopologySource source = TopologySource::emulated;
  std::string hwloc_version;            // runtime hwloc version, e.g. "2.9.0"
  std::string origin;                   // XML path, "this machine", or "embedded default"
  std::string note;                     // why this source was chosen, when it was not asked for
  unsigned numa_node_count = 0;         // NUMA nodes the source has
  std::vector<TierDesc> tiers;          // ordered fastest first, rank == index
};

// What a user may ask for (the --topology flag, the `topology` config key):
//   "auto" or ""      : this machine if it has two or more tiers, else the embedded default
//                       (the note says so);
//   "this-system"     : this machine, whatever it has;
//   "emulated"        : the embedded default (hbm, dram, cxl on host memory);
//   anything else     : an hwloc XML file.
// Throws Error(CXLT_ERROR_TOPOLOGY) naming the file and the reason for a missing, unreadable,
// malformed or unsupported file; never returns an empty topology.
CXLT_API Topology discover_topology(std::string_view spec);
// True for the specs above that name no file ("", "auto", "this-system", "emulated").
CXLT_API bool is_topology_keyword(std::string_view spec) noexcept;
CXLT_API Topology discover_this_system();
CXLT_API Topology load_topology_xml(const std::string &path);
CXLT_API Topology embedded_default_topology();

// Put a tier of kind gpu in front of topo's tiers for each CUDA device the driver reports
// (tiers/cuda, docs/gpu.md) and re-rank; discover_this_system() does this. Without a driver, or
// in a build without the CUDA tier, the tiers are unchanged and topo.note says why. Returns
// the number of tiers added.
CXLT_API size_t append_gpu_tiers(Topology &topo);

// Printing a Topology (`cxltier topo`): cxltier/tools/topology_text.hpp.

}  // namespace cxltier
