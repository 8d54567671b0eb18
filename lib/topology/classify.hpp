// SPDX-License-Identifier: Apache-2.0
// Turning a loaded hwloc topology into ordered memory tiers: per-node evidence, the kind rules,
// grouping by kind and performance, and the fastest-first order. See docs/topology.md for the
// rules in prose. Internal to lib/topology and its tests.
#pragma once

#include <cxltier/topology.hpp>

#include <hwloc.h>

#include <string>
#include <vector>

namespace cxltier::topo {

// hwloc 2.10 and later annotate NUMA nodes with their own MemoryTier info and newer subtypes
// (CXL-DRAM, ...). The subtypes are plain strings and are always read; the MemoryTier split is
// used only when this build's hwloc has it (a 2.9 build records it as evidence only).
#if HWLOC_API_VERSION >= 0x00020a00
inline constexpr bool kHwlocHasMemoryTiers = true;
#else
inline constexpr bool kHwlocHasMemoryTiers = false;
#endif

// Nodes whose bandwidths (or latencies) differ by at most this ratio minus one count as the
// same performance (hwloc 2.10+ uses the same 10% for its own tiers).
inline constexpr double kSamePerformanceTolerance = 0.10;
// A node of no known kind whose bandwidth exceeds this multiple of local DRAM's is HBM (the
// same 2x hwloc 2.10+ uses to tell HBM from DRAM).
inline constexpr double kHbmBandwidthRatio = 2.0;

struct ClassifyOptions {
  // Never put nodes with different hwloc MemoryTier infos in one tier.
  bool use_hwloc_memory_tiers = kHwlocHasMemoryTiers;
};

// Everything we learnt about one NUMA node; `facts` become the tier's evidence.
struct NodeFacts {
  unsigned os_index = 0;
  uint64_t capacity_bytes = 0;
  TierKind kind = TierKind::unknown;
  std::string kind_reason;               // "kind hbm: NUMA subtype MCDRAM"
  bool has_kind_evidence = false;        // a subtype, DAX or CXL fact decided the kind
  bool memory_only = false;              // no local CPUs of its own (see docs: CPU-less nodes)
  std::optional<double> bandwidth_mib_s; // Bandwidth, else ReadBandwidth
  std::optional<double> latency_ns;      // Latency, else ReadLatency
  std::optional<double> access_distance; // SLIT distance from the nearest node with CPUs
  std::string memory_tier;               // hwloc >= 2.10 MemoryTier info, "" if absent
  std::vector<std::string> facts;
};

// Facts for every NUMA node of `t`, kinds decided, in hwloc's logical order.
std::vector<NodeFacts> collect_node_facts(hwloc_topology_t t);

// Group and order: the tiers of `nodes`, fastest first, rank == index.
std::vector<TierDesc> group_into_tiers(const std::vector<NodeFacts> &nodes, const ClassifyOptions &opts = {});

// Remarks about memory the topology shows but that is no tier (DAX devices not onlined as NUMA
// nodes, CXL memory devices without a CXL node). Empty when there is nothing to say.
std::vector<std::string> unused_memory_remarks(hwloc_topology_t t, const std::vector<TierDesc> &tiers);

// collect + group + remarks, as a Topology (source, origin and versions filled in).
Topology classify_topology(hwloc_topology_t t, TopologySource source, const std::string &origin,
                           const ClassifyOptions &opts = {});

// The declared default: hbm, dram and cxl tiers emulated on `host_nodes`, which hold
// `host_bytes` of memory (0: unknown; when known and smaller than the declared capacities, the
// note says so).
Topology embedded_default_on(const std::vector<unsigned> &host_nodes, uint64_t host_bytes = 0);

// "0-3,7" style list of OS indexes (sorted input).
std::string format_node_list(const std::vector<unsigned> &nodes);

}  // namespace cxltier::topo
