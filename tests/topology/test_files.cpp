// SPDX-License-Identifier: Apache-2.0
// Every hwloc XML file under tests/data/topologies against its golden tier map (regenerate with
// CXLT_UPDATE_GOLDEN=1), and hwloc 2.14's own grouping (MemoryTier infos) against ours.
#include "lib/topology/classify.hpp"
#include "lib/topology/hwloc_load.hpp"
#include "test_util.hpp"

#include <cxltier/error.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

using namespace cxltier;
using namespace cxltier::test;
using nlohmann::ordered_json;

namespace {

std::vector<fs::path> topology_files() {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(topology_data_dir(), ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file() && it->path().extension() == ".xml") out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

fs::path golden_of(const fs::path &xml) {
  fs::path g = xml;
  g.replace_extension(".tiers.json");
  return g;
}

std::string relative_name(const fs::path &xml) { return fs::relative(xml, topology_data_dir()).generic_string(); }

void replace_all(std::string &s, const std::string &from, const std::string &to) {
  if (from.empty()) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// Strings that depend on where the tree is or which hwloc runs are replaced by placeholders.
void normalise(ordered_json &j, const std::string &path) {
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    replace_all(s, path, "@FILE@");
    replace_all(s, topo::hwloc_runtime_version(), "@HWLOC@");
    j = s;
  } else if (j.is_structured()) {
    for (auto &v : j) normalise(v, path);
  }
}

// What the library makes of a file, in the golden form.
ordered_json tier_map_of(const fs::path &xml) {
  ordered_json j;
  try {
    Topology t = load_topology_xml(xml.string());
    j = ordered_json::parse(topology_to_json(t));
    j.erase("hwloc_version");
    j.erase("origin");
  } catch (const Error &e) {
    j["error_code"] = static_cast<int>(e.code());
    j["error"] = e.what();
  }
  normalise(j, xml.string());
  return j;
}

std::string test_name(const ::testing::TestParamInfo<fs::path> &p) {
  std::string n = relative_name(p.param);
  for (char &c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

}  // namespace

class GoldenTierMap : public ::testing::TestWithParam<fs::path> {};

TEST_P(GoldenTierMap, MatchesGolden) {
  const fs::path xml = GetParam();
  ordered_json got = tier_map_of(xml);
  const fs::path golden = golden_of(xml);
  const char *update = std::getenv("CXLT_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(golden) << got.dump(2) << "\n";
    SUCCEED() << "golden written: " << golden;
    return;
  }
  ASSERT_TRUE(fs::exists(golden)) << "no golden tier map for " << relative_name(xml)
                                  << ": run the test with CXLT_UPDATE_GOLDEN=1 and review the diff";
  ordered_json want = ordered_json::parse(read_file(golden));
  EXPECT_EQ(got, want) << "tier map of " << relative_name(xml) << " changed.\n--- golden\n"
                       << want.dump(2) << "\n--- now\n"
                       << got.dump(2);
}

INSTANTIATE_TEST_SUITE_P(EveryTopologyFile, GoldenTierMap, ::testing::ValuesIn(topology_files()), test_name);

TEST(GoldenTierMaps, EveryGoldenHasItsTopologyFile) {
  size_t goldens = 0;
  for (const auto &e : fs::recursive_directory_iterator(topology_data_dir())) {
    std::string name = e.path().filename().string();
    if (name.size() < 11 || name.compare(name.size() - 11, 11, ".tiers.json") != 0) continue;
    ++goldens;
    fs::path xml = e.path().parent_path() / (name.substr(0, name.size() - 11) + ".xml");
    EXPECT_TRUE(fs::exists(xml)) << "stale golden " << e.path();
  }
  EXPECT_EQ(goldens, topology_files().size());
}

// --- hwloc 2.14's grouping of the same machine -----------------------------------------------

namespace {

// NUMA nodes grouped by the MemoryTier info hwloc >= 2.10 wrote; empty if a node lacks it.
Partition memory_tier_partition(const fs::path &xml) {
  topo::HwlocTopology h = topo::load_xml_file(xml.string());
  std::map<std::string, std::set<unsigned>> by_tier;
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(h.get(), HWLOC_OBJ_NUMANODE, n));) {
    const char *tier = hwloc_obj_get_info_by_name(n, "MemoryTier");
    if (!tier) return {};
    by_tier[tier].insert(n->os_index);
  }
  Partition p;
  for (auto &[tier, nodes] : by_tier) p.insert(nodes);
  return p;
}

}  // namespace

class Hwloc214Pair : public ::testing::TestWithParam<const char *> {};

// The acceptance check of the topology classifier: our grouping of the file hwloc 2.9 exported equals hwloc
// 2.14's grouping of the same machine. Orders may differ (hwloc ranks from the CPUs' side).
TEST_P(Hwloc214Pair, OurGroupingOfThe290FileEqualsHwloc214s) {
  const fs::path dir = topology_data_dir() / "derived";
  const fs::path f290 = dir / (std::string(GetParam()) + ".hwloc290.xml");
  const fs::path f214 = dir / (std::string(GetParam()) + ".hwloc214.xml");
  Partition reference = memory_tier_partition(f214);
  ASSERT_FALSE(reference.empty()) << f214 << " has no MemoryTier info on every node";
  ASSERT_TRUE(memory_tier_partition(f290).empty()) << "the 2.9 file should not carry hwloc's tiers";
  Partition ours = partition_of(load_topology_xml(f290.string()));
  EXPECT_EQ(ours, reference) << "ours " << to_string(ours) << " vs hwloc 2.14 " << to_string(reference);
  // The 2.14 file read by this hwloc, whose MemoryTier infos are evidence only here.
  Partition ours214 = partition_of(load_topology_xml(f214.string()));
  EXPECT_EQ(ours214, reference) << "ours " << to_string(ours214) << " vs hwloc 2.14 " << to_string(reference);
}

INSTANTIATE_TEST_SUITE_P(Derived, Hwloc214Pair, ::testing::Values("fakeheteromemtiers", "nvidiagpunumanodes.kept"));

TEST(HwlocMemoryTiers, EveryFileThatCarriesThemIsGroupedTheSameWay) {
  size_t checked = 0;
  for (const fs::path &xml : topology_files()) {
    Partition reference;
    try {
      reference = memory_tier_partition(xml);
    } catch (const Error &) {
      continue;  // unreadable files are the error tests' business
    }
    if (reference.empty()) continue;
    ++checked;
    Partition ours = partition_of(load_topology_xml(xml.string()));
    EXPECT_EQ(ours, reference) << relative_name(xml) << ": ours " << to_string(ours) << " vs MemoryTier "
                               << to_string(reference);
  }
  EXPECT_GE(checked, 4u);  // both 2.14 files, the KNL SNC4 file and the 4n2t memattrs file
}

TEST(HwlocMemoryTiers, UsedAsASplitWhenEnabled) {
  // With the hwloc >= 2.10 rule switched on, the 2.14 file's own tiers are honoured too.
  topo::HwlocTopology h = topo::load_xml_file((topology_data_dir() / "derived/fakeheteromemtiers.hwloc214.xml").string());
  topo::ClassifyOptions opts;
  opts.use_hwloc_memory_tiers = true;
  Topology t = topo::classify_topology(h.get(), TopologySource::xml, "x", opts);
  EXPECT_EQ(partition_of(t), memory_tier_partition(topology_data_dir() / "derived/fakeheteromemtiers.hwloc214.xml"));
}

// --- Named expectations, stated by hand (the goldens hold the rest) --------------------------

TEST(KnownFiles, KnlSnc4McdramIsOneHbmTierBeforeDram) {
  Topology t = load_topology_xml((topology_data_dir() / "64intel64-fakeKNL-SNC4-hybrid.xml").string());
  ASSERT_EQ(t.tiers.size(), 2u);
  EXPECT_EQ(t.tiers[0].kind, TierKind::hbm);
  EXPECT_EQ(t.tiers[0].numa_nodes, (std::vector<unsigned>{4, 5, 6, 7}));
  EXPECT_EQ(t.tiers[1].kind, TierKind::dram);
  EXPECT_EQ(t.tiers[1].numa_nodes, (std::vector<unsigned>{0, 1, 2, 3}));
  EXPECT_EQ(t.tiers[0].bandwidth_mib_s, 90000.0);
  EXPECT_EQ(t.tiers[1].bandwidth_mib_s, 22500.0);
  EXPECT_EQ(t.tiers[0].capacity_bytes, 4 * 2147483648ull);
  EXPECT_TRUE(evidence_mentions(t.tiers[0], "MCDRAM"));
  EXPECT_EQ(t.source, TopologySource::xml);
}

TEST(KnownFiles, Power9GpuMemoryNodesAreOneGpuTier) {
  Topology t = load_topology_xml((topology_data_dir() / "derived/nvidiagpunumanodes.kept.hwloc290.xml").string());
  ASSERT_EQ(t.tiers.size(), 2u);
  EXPECT_EQ(t.tiers[0].kind, TierKind::gpu);  // the GPU consumes KV blocks: it ranks first
  EXPECT_EQ(t.tiers[0].numa_nodes, (std::vector<unsigned>{250, 251, 252, 253, 254, 255}));
  EXPECT_EQ(t.tiers[1].kind, TierKind::dram);
  EXPECT_EQ(t.tiers[1].numa_nodes, (std::vector<unsigned>{0, 8}));
  EXPECT_FALSE(t.tiers[0].bandwidth_mib_s.has_value());
}

TEST(KnownFiles, HeteroMemQemuGuestHasHbmDramNvm) {
  Topology t = load_topology_xml((topology_data_dir() / "derived/fakeheteromemtiers.hwloc290.xml").string());
  ASSERT_EQ(t.tiers.size(), 3u);
  EXPECT_EQ(t.tiers[0].kind, TierKind::hbm);
  EXPECT_EQ(t.tiers[1].kind, TierKind::dram);
  EXPECT_EQ(t.tiers[2].kind, TierKind::nvm);
  EXPECT_EQ(t.tiers[2].numa_nodes, (std::vector<unsigned>{6, 8, 9}));
  // The three DAX devices that are not onlined are reported, not made into tiers.
  EXPECT_NE(t.note.find("dax0.0"), std::string::npos) << t.note;
}

TEST(KnownFiles, CxlDevicesWithoutACxlNodeAreReported) {
  Topology t = load_topology_xml((topology_data_dir() / "cxlmem+dax.v2.xml").string());
  ASSERT_EQ(t.tiers.size(), 1u);
  EXPECT_EQ(t.tiers[0].kind, TierKind::dram);
  EXPECT_NE(t.note.find("CXL memory devices are present"), std::string::npos) << t.note;
  EXPECT_NE(t.note.find("mem1 (volatile 256 MiB, persistent 256 MiB)"), std::string::npos) << t.note;
}

TEST(KnownFiles, OwnFixtures) {
  Topology a = load_topology_xml((topology_data_dir() / "fixtures/2s-hbm-dram-cxl.xml").string());
  ASSERT_EQ(a.tiers.size(), 3u);
  EXPECT_EQ(a.tiers[0].kind, TierKind::hbm);
  EXPECT_EQ(a.tiers[0].numa_nodes, (std::vector<unsigned>{1, 3}));
  EXPECT_TRUE(evidence_mentions(a.tiers[0], "more than 2x"));
  EXPECT_EQ(a.tiers[1].kind, TierKind::dram);
  EXPECT_EQ(a.tiers[2].kind, TierKind::cxl);
  EXPECT_EQ(a.tiers[2].numa_nodes, (std::vector<unsigned>{4}));
  EXPECT_TRUE(evidence_mentions(a.tiers[2], "ACPI0017"));

  Topology b = load_topology_xml((topology_data_dir() / "fixtures/cxl-system-ram-nodax.xml").string());
  ASSERT_EQ(b.tiers.size(), 2u);
  EXPECT_EQ(b.tiers[0].kind, TierKind::dram);
  EXPECT_EQ(b.tiers[1].kind, TierKind::unknown);
  EXPECT_TRUE(evidence_mentions(b.tiers[1], "memory-only"));
  EXPECT_TRUE(evidence_mentions(b.tiers[1], "NUMA distance 20"));
}
