// SPDX-License-Identifier: Apache-2.0
// Topologies built in code (hwloc synthetic + subtypes, infos, memory attributes, distances,
// CPU-less nodes), exported to XML and loaded back through our loader, then classified: each
// test states one rule of docs/topology.md and checks it.
#include "lib/topology/classify.hpp"
#include "lib/topology/hwloc_load.hpp"
#include "synth.hpp"
#include "test_util.hpp"

#include <cxltier/error.hpp>

using namespace cxltier;
using namespace cxltier::test;

namespace {

constexpr uint64_t GiB = 1ull << 30;

Topology classify_xml(const Synth &s, const topo::ClassifyOptions &opts = {}) {
  topo::HwlocTopology h = topo::load_xml_buffer(s.xml(), "synthetic");
  return topo::classify_topology(h.get(), TopologySource::xml, "synthetic", opts);
}

}  // namespace

TEST(Synthetic, HbmDramCxlAcrossTwoSockets) {
  Synth s("[numa] pack:2 [numa] [numa] core:2 pu:1");
  build_two_socket_hbm_dram_cxl(s, true);
  Topology t = classify_xml(s);
  ASSERT_EQ(t.tiers.size(), 3u) << topology_to_table(t);
  EXPECT_EQ(t.tiers[0].kind, TierKind::hbm);
  EXPECT_EQ(t.tiers[0].numa_nodes, (std::vector<unsigned>{1, 3}));  // one tier for both sockets
  EXPECT_EQ(t.tiers[0].capacity_bytes, 32 * GiB);
  EXPECT_EQ(t.tiers[0].bandwidth_mib_s, 409600.0);
  EXPECT_EQ(t.tiers[0].latency_ns, 130.0);
  EXPECT_TRUE(evidence_mentions(t.tiers[0], "NUMA subtype HBM"));
  EXPECT_EQ(t.tiers[1].kind, TierKind::dram);
  EXPECT_EQ(t.tiers[1].numa_nodes, (std::vector<unsigned>{0, 2}));
  EXPECT_EQ(t.tiers[1].bandwidth_mib_s, 102400.0);
  EXPECT_EQ(t.tiers[2].kind, TierKind::cxl);
  EXPECT_EQ(t.tiers[2].numa_nodes, (std::vector<unsigned>{4}));
  EXPECT_EQ(t.tiers[2].bandwidth_mib_s, 30720.0);
  EXPECT_EQ(t.tiers[2].latency_ns, 280.0);
  EXPECT_TRUE(evidence_mentions(t.tiers[2], "CXL root (ACPI0017) and region0"));
  for (size_t i = 0; i < t.tiers.size(); ++i) {
    EXPECT_EQ(t.tiers[i].rank, static_cast<int>(i));
    EXPECT_FALSE(t.tiers[i].emulated);
    EXPECT_FALSE(t.tiers[i].evidence.empty());
  }
}

TEST(Synthetic, ExportAndReloadKeepTheTiers) {
  Synth s("[numa] pack:2 [numa] [numa] core:2 pu:1");
  build_two_socket_hbm_dram_cxl(s, true);
  Topology live = topo::classify_topology(s.get(), TopologySource::xml, "synthetic");
  Topology reloaded = classify_xml(s);
  EXPECT_EQ(topology_to_json(live), topology_to_json(reloaded));
}

TEST(Synthetic, HbmWithoutSubtypeIsToldByBandwidth) {
  Synth s("[numa] pack:2 [numa] [numa] core:2 pu:1");
  build_two_socket_hbm_dram_cxl(s, false);
  Topology t = classify_xml(s);
  const TierDesc *hbm = tier_with_node(t, 1);
  ASSERT_NE(hbm, nullptr);
  EXPECT_EQ(hbm->kind, TierKind::hbm);
  EXPECT_EQ(hbm->rank, 0);
  EXPECT_TRUE(evidence_mentions(*hbm, "more than 2x that of the CPUs' DRAM"));
  EXPECT_TRUE(evidence_mentions(*hbm, "memory-only"));
}

TEST(Synthetic, MemoryOnlyNodeWithNothingElseIsUnknownNotDram) {
  Synth s("[numa] pack:2 [numa] [numa] core:2 pu:1");
  // Equal bandwidths: no rule can say what the second node of each socket is.
  for (unsigned n : {0u, 1u, 2u, 3u}) s.attr(HWLOC_MEMATTR_ID_BANDWIDTH, n, 50000);
  Topology t = classify_xml(s);
  EXPECT_EQ(tier_with_node(t, 0)->kind, TierKind::dram);
  EXPECT_EQ(tier_with_node(t, 1)->kind, TierKind::unknown);
  EXPECT_EQ(tier_with_node(t, 1)->numa_nodes, (std::vector<unsigned>{1, 3}));
  // The root-attached node (P#4) covers both sockets' CPUs: memory-only too, and it has no
  // bandwidth, so it is not grouped with the nodes that do.
  EXPECT_EQ(tier_with_node(t, 4)->numa_nodes, (std::vector<unsigned>{4}));
  EXPECT_TRUE(evidence_mentions(*tier_with_node(t, 4), "attached above other nodes"));
}

TEST(Synthetic, CpuLessNodesUseTheirBestInitiator) {
  // Restricting to socket 0's CPUs leaves socket 1's nodes without CPUs (empty cpusets).
  Synth s("pack:2 [numa] [numa] core:2 pu:1");
  s.restrict_cpus("0-1");
  ASSERT_TRUE(hwloc_bitmap_iszero(s.node(2)->cpuset));
  s.attr(HWLOC_MEMATTR_ID_BANDWIDTH, 0, 100000)
      .attr(HWLOC_MEMATTR_ID_BANDWIDTH, 1, 100000)
      .attr(HWLOC_MEMATTR_ID_BANDWIDTH, 2, 20000, "0-1")
      .info(2, "DAXType", "SPM")
      .info(2, "DAXParent", "LNXSYSTM:00/LNXSYBUS:00/ACPI0017:00/root0/decoder0.0/region3/dax_region3")
      .subtype(1, "DRAM");
  Topology t = classify_xml(s);
  const TierDesc *cxl = tier_with_node(t, 2);
  ASSERT_NE(cxl, nullptr);
  EXPECT_EQ(cxl->kind, TierKind::cxl);
  EXPECT_EQ(cxl->bandwidth_mib_s, 20000.0);
  EXPECT_TRUE(evidence_mentions(*cxl, "from its best initiator, the whole machine's CPUs")) << topology_to_table(t);
  EXPECT_TRUE(evidence_mentions(*cxl, "CPU-less"));
  // Node 3: CPU-less, nothing known at all.
  const TierDesc *other = tier_with_node(t, 3);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->kind, TierKind::unknown);
  EXPECT_FALSE(other->bandwidth_mib_s.has_value());
  // Nodes 0 (no subtype, has CPUs) and 1 (subtype DRAM, shares node 0's CPUs): both DRAM, same
  // bandwidth, one tier.
  EXPECT_EQ(tier_with_node(t, 0)->numa_nodes, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(tier_with_node(t, 0)->kind, TierKind::dram);
  EXPECT_EQ(t.tiers.back().kind, TierKind::unknown);
}

TEST(Synthetic, MissingAttributesFallBackAndOrderByKind) {
  Synth s("pack:2 [numa] [numa] core:2 pu:1");
  s.subtype(1, "NVM").subtype(3, "NVM").subtype(0, "DRAM").subtype(2, "DRAM");
  Topology t = classify_xml(s);
  ASSERT_EQ(t.tiers.size(), 2u);
  EXPECT_EQ(t.tiers[0].kind, TierKind::dram);
  EXPECT_EQ(t.tiers[1].kind, TierKind::nvm);
  for (const TierDesc &tier : t.tiers) {
    EXPECT_FALSE(tier.bandwidth_mib_s.has_value());
    EXPECT_FALSE(tier.latency_ns.has_value());
    EXPECT_TRUE(evidence_mentions(tier, "no Bandwidth or ReadBandwidth memory attribute"));
    EXPECT_TRUE(evidence_mentions(tier, "ranked by kind"));
  }
  std::string json = topology_to_json(t);
  EXPECT_NE(json.find("\"bandwidth_mib_s\": null"), std::string::npos) << json;
  EXPECT_NE(json.find("\"latency_ns\": null"), std::string::npos) << json;
}

TEST(Synthetic, ReadBandwidthAndReadLatencyAreFallbacks) {
  Synth s("pack:2 [numa] core:2 pu:1");
  s.attr(HWLOC_MEMATTR_ID_READ_BANDWIDTH, 0, 80000).attr(HWLOC_MEMATTR_ID_READ_BANDWIDTH, 1, 80000);
  s.attr(HWLOC_MEMATTR_ID_READ_LATENCY, 0, 90).attr(HWLOC_MEMATTR_ID_READ_LATENCY, 1, 92);
  Topology t = classify_xml(s);
  ASSERT_EQ(t.tiers.size(), 1u);
  EXPECT_EQ(t.tiers[0].bandwidth_mib_s, 80000.0);
  EXPECT_EQ(t.tiers[0].latency_ns, 92.0);  // the tier promises its slowest node's latency
  EXPECT_TRUE(evidence_mentions(t.tiers[0], "ReadBandwidth 80000 MiB/s"));
  // Bandwidth wins over ReadBandwidth when both exist.
  s.attr(HWLOC_MEMATTR_ID_BANDWIDTH, 0, 70000).attr(HWLOC_MEMATTR_ID_BANDWIDTH, 1, 70000);
  EXPECT_EQ(classify_xml(s).tiers[0].bandwidth_mib_s, 70000.0);
}

TEST(Synthetic, LatencyOrdersWhenNoBandwidthIsKnown) {
  Synth s("pack:1 [numa] [numa] [numa] core:2 pu:1");
  s.subtype(0, "DRAM").subtype(1, "SPM").subtype(2, "SPM");
  s.attr(HWLOC_MEMATTR_ID_LATENCY, 0, 300).attr(HWLOC_MEMATTR_ID_LATENCY, 1, 100).attr(HWLOC_MEMATTR_ID_LATENCY, 2, 200);
  Topology t = classify_xml(s);
  ASSERT_EQ(t.tiers.size(), 3u);
  EXPECT_EQ(t.tiers[0].numa_nodes, (std::vector<unsigned>{1}));
  EXPECT_EQ(t.tiers[1].numa_nodes, (std::vector<unsigned>{2}));
  EXPECT_EQ(t.tiers[2].numa_nodes, (std::vector<unsigned>{0}));
  EXPECT_TRUE(evidence_mentions(t.tiers[0], "ranked by latency"));
  EXPECT_EQ(t.tiers[0].kind, TierKind::spm);
}

TEST(Synthetic, SameKindSplitsOnlyBeyondTenPercent) {
  Synth s("pack:4 [numa] core:1 pu:1");
  s.attr(HWLOC_MEMATTR_ID_BANDWIDTH, 0, 100000)
      .attr(HWLOC_MEMATTR_ID_BANDWIDTH, 1, 95000)   // within 10%: same tier
      .attr(HWLOC_MEMATTR_ID_BANDWIDTH, 2, 60000)   // a slower socket: its own tier
      .attr(HWLOC_MEMATTR_ID_BANDWIDTH, 3, 61000);
  Topology t = classify_xml(s);
  ASSERT_EQ(t.tiers.size(), 2u);
  EXPECT_EQ(t.tiers[0].numa_nodes, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(t.tiers[0].bandwidth_mib_s, 95000.0);  // the lowest of the tier
  EXPECT_EQ(t.tiers[1].numa_nodes, (std::vector<unsigned>{2, 3}));
  EXPECT_EQ(t.tiers[0].kind, TierKind::dram);
  EXPECT_EQ(t.tiers[1].kind, TierKind::dram);
}

TEST(Synthetic, DaxAndSubtypeRules) {
  Synth s("pack:1 [numa] [numa] [numa] [numa] [numa] [numa] core:1 pu:1");
  s.info(1, "DAXType", "NVM")
      .info(1, "DAXParent", "LNXSYSTM:00/LNXSYBUS:00/ACPI0012:00/ndbus0/region0/dax0.1")
      .subtype(2, "GPUMemory")
      .subtype(3, "CXL-DRAM")
      .subtype(4, "MCDRAM")
      .info(5, "DAXType", "SPM")
      .info(5, "DAXParent", "hmem.0");
  Topology t = classify_xml(s);
  EXPECT_EQ(tier_with_node(t, 0)->kind, TierKind::dram);
  EXPECT_EQ(tier_with_node(t, 1)->kind, TierKind::nvm);
  EXPECT_EQ(tier_with_node(t, 2)->kind, TierKind::gpu);
  EXPECT_EQ(tier_with_node(t, 3)->kind, TierKind::cxl);
  EXPECT_EQ(tier_with_node(t, 4)->kind, TierKind::hbm);
  EXPECT_EQ(tier_with_node(t, 5)->kind, TierKind::spm);
  // Nothing measured: gpu, hbm, dram, cxl, spm, nvm.
  std::vector<TierKind> order;
  for (const TierDesc &tier : t.tiers) order.push_back(tier.kind);
  EXPECT_EQ(order, (std::vector<TierKind>{TierKind::gpu, TierKind::hbm, TierKind::dram, TierKind::cxl, TierKind::spm,
                                          TierKind::nvm}));
}

TEST(Synthetic, CxlDaxPathBeatsHwloc29sNvmLabels) {
  // hwloc 2.9 labels any DAX memory that is not HMAT soft-reserved NVM (DAXType, then subtype);
  // the path tells volatile CXL memory from CXL persistent memory (as a QEMU cxl-type3 device
  // with a pmem backend shows it: through the nvdimm-bridge).
  Synth s("pack:1 [numa] [numa] [numa] core:2 pu:1");
  s.subtype(1, "NVM")
      .info(1, "DAXType", "NVM")
      .info(1, "DAXParent", "LNXSYSTM:00/LNXSYBUS:00/ACPI0017:00/root0/decoder0.0/region2/dax_region2")
      .subtype(2, "NVM")
      .info(2, "DAXType", "NVM")
      .info(2, "DAXParent", "ACPI0017:00/root0/nvdimm-bridge0/ndbus0/region0");
  Topology t = classify_xml(s);
  const TierDesc *volatile_cxl = tier_with_node(t, 1);
  const TierDesc *cxl_pmem = tier_with_node(t, 2);
  ASSERT_TRUE(volatile_cxl && cxl_pmem);
  EXPECT_EQ(volatile_cxl->kind, TierKind::cxl);
  EXPECT_TRUE(evidence_mentions(*volatile_cxl, "region2"));
  EXPECT_EQ(cxl_pmem->kind, TierKind::nvm);
  EXPECT_TRUE(evidence_mentions(*cxl_pmem, "CXL-attached persistent memory"));
}

TEST(Synthetic, UnknownSubtypeIsReportedAndIgnored) {
  Synth s("pack:1 [numa] core:1 pu:1");
  s.subtype(0, "Quantum");
  Topology t = classify_xml(s);
  ASSERT_EQ(t.tiers.size(), 1u);
  EXPECT_EQ(t.tiers[0].kind, TierKind::dram);
  EXPECT_TRUE(evidence_mentions(t.tiers[0], "\"Quantum\" is not one the rules know"));
}

TEST(Synthetic, DistancesSeparateNodesWhenNothingIsMeasured) {
  Synth s("pack:1 [numa] [numa] [numa] core:2 pu:1");
  s.distances({0, 1, 2}, {10, 14, 30, 14, 10, 30, 30, 30, 10});
  Topology t = classify_xml(s);
  ASSERT_EQ(t.tiers.size(), 3u) << topology_to_table(t);
  EXPECT_EQ(t.tiers[0].numa_nodes, (std::vector<unsigned>{0}));
  EXPECT_EQ(t.tiers[1].numa_nodes, (std::vector<unsigned>{1}));  // nearer than node 2
  EXPECT_EQ(t.tiers[2].numa_nodes, (std::vector<unsigned>{2}));
  EXPECT_TRUE(evidence_mentions(t.tiers[1], "NUMA distance 14"));
}

TEST(Synthetic, MemoryTierInfoSplitsOnlyWhenEnabled) {
  Synth s("pack:2 [numa] core:1 pu:1");
  s.attr(HWLOC_MEMATTR_ID_BANDWIDTH, 0, 1000).attr(HWLOC_MEMATTR_ID_BANDWIDTH, 1, 1000);
  s.info(0, "MemoryTier", "0").info(1, "MemoryTier", "1");
  topo::ClassifyOptions off, on;
  off.use_hwloc_memory_tiers = false;
  on.use_hwloc_memory_tiers = true;
  EXPECT_EQ(classify_xml(s, off).tiers.size(), 1u);
  Topology split = classify_xml(s, on);
  ASSERT_EQ(split.tiers.size(), 2u);
  EXPECT_TRUE(evidence_mentions(split.tiers[0], "hwloc MemoryTier info"));
}

TEST(Synthetic, OrderIsTotalWithMixedEvidence) {
  // hbm without bandwidth, dram with, nvm with a higher one (a nonsense machine): the order
  // must still be a valid ranking, bandwidth-known tiers by bandwidth among themselves.
  Synth s("pack:1 [numa] [numa] [numa] core:1 pu:1");
  s.subtype(0, "DRAM").subtype(1, "HBM").subtype(2, "NVM");
  s.attr(HWLOC_MEMATTR_ID_BANDWIDTH, 0, 1000).attr(HWLOC_MEMATTR_ID_BANDWIDTH, 2, 5000);
  Topology t = classify_xml(s);
  ASSERT_EQ(t.tiers.size(), 3u);
  EXPECT_EQ(t.tiers[0].kind, TierKind::hbm);  // by kind, no bandwidth to compare
  EXPECT_EQ(t.tiers[1].kind, TierKind::nvm);  // the bandwidth-known tiers, fastest first
  EXPECT_EQ(t.tiers[2].kind, TierKind::dram);
}

TEST(Synthetic, TheSameMachineGivesTheSameTiersWhateverTheNodeOrder) {
  // Socket order must not matter: swap which socket gets the faster HBM figures.
  auto build = [](bool swap) {
    auto s = std::make_unique<Synth>("[numa] pack:2 [numa] [numa] core:2 pu:1");
    build_two_socket_hbm_dram_cxl(*s, true);
    if (swap) s->attr(HWLOC_MEMATTR_ID_BANDWIDTH, 1, 400000).attr(HWLOC_MEMATTR_ID_BANDWIDTH, 3, 409600);
    return partition_of(classify_xml(*s));
  };
  EXPECT_EQ(build(false), build(true));
}
