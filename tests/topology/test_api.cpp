// SPDX-License-Identifier: Apache-2.0
// The public topology API on this machine (live hwloc), the embedded default, the spec names,
// and `cxltier topo` output: the JSON schema (docs/topology.md) and the table's units.
#include "lib/topology/hwloc_load.hpp"
#include "test_util.hpp"

#include <cxltier/error.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

using namespace cxltier;
using namespace cxltier::test;
using nlohmann::json;

namespace {

// Sets or unsets an environment variable for one scope, restoring the old value.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

private:
  const char *name_;
  std::optional<std::string> old_;
};

void expect_schema(const json &j) {
  ASSERT_TRUE(j.is_object());
  for (const char *key : {"source", "hwloc_version", "tiers"}) ASSERT_TRUE(j.contains(key)) << key;
  EXPECT_TRUE(j["source"] == "this-system" || j["source"] == "xml" || j["source"] == "emulated") << j["source"];
  EXPECT_TRUE(j["hwloc_version"].is_string());
  ASSERT_TRUE(j["tiers"].is_array());
  ASSERT_FALSE(j["tiers"].empty());
  int rank = 0;
  for (const json &t : j["tiers"]) {
    for (const char *key : {"rank", "kind", "numa_nodes", "capacity_bytes", "bandwidth_mib_s", "latency_ns", "evidence"})
      ASSERT_TRUE(t.contains(key)) << key;
    EXPECT_EQ(t["rank"], rank++);
    EXPECT_TRUE(parse_tier_kind(t["kind"].get<std::string>()).has_value()) << t["kind"];
    EXPECT_TRUE(t["numa_nodes"].is_array());
    EXPECT_TRUE(t["capacity_bytes"].is_number_unsigned());
    EXPECT_TRUE(t["bandwidth_mib_s"].is_number() || t["bandwidth_mib_s"].is_null());
    EXPECT_TRUE(t["latency_ns"].is_number() || t["latency_ns"].is_null());
    ASSERT_TRUE(t["evidence"].is_array());
    EXPECT_FALSE(t["evidence"].empty());
    for (const json &e : t["evidence"]) EXPECT_TRUE(e.is_string());
  }
}

}  // namespace

TEST(TierKinds, NamesRoundTrip) {
  for (TierKind k : {TierKind::hbm, TierKind::gpu, TierKind::dram, TierKind::cxl, TierKind::nvm, TierKind::spm,
                     TierKind::unknown, TierKind::remote}) {
    auto back = parse_tier_kind(tier_kind_name(k));
    ASSERT_TRUE(back.has_value()) << tier_kind_name(k);
    EXPECT_EQ(*back, k);
  }
  EXPECT_EQ(parse_tier_kind("HBM"), TierKind::hbm);
  EXPECT_FALSE(parse_tier_kind("flash").has_value());
  EXPECT_FALSE(parse_tier_kind("").has_value());
  EXPECT_STREQ(topology_source_name(TopologySource::this_system), "this-system");
  EXPECT_STREQ(topology_source_name(TopologySource::xml), "xml");
  EXPECT_STREQ(topology_source_name(TopologySource::emulated), "emulated");
}

TEST(EmbeddedDefault, ThreeDeclaredEmulatedTiers) {
  Topology t = embedded_default_topology();
  EXPECT_EQ(t.source, TopologySource::emulated);
  EXPECT_EQ(t.hwloc_version, topo::hwloc_runtime_version());
  ASSERT_EQ(t.tiers.size(), 3u);
  const struct {
    TierKind kind;
    double bw, lat;
    uint64_t cap;
  } want[] = {{TierKind::hbm, 819200, 120, 4ull << 30}, {TierKind::dram, 262144, 100, 16ull << 30},
              {TierKind::cxl, 34816, 250, 64ull << 30}};
  for (size_t i = 0; i < 3; ++i) {
    const TierDesc &tier = t.tiers[i];
    EXPECT_EQ(tier.rank, static_cast<int>(i));
    EXPECT_EQ(tier.kind, want[i].kind);
    EXPECT_EQ(tier.bandwidth_mib_s, want[i].bw);
    EXPECT_EQ(tier.latency_ns, want[i].lat);
    EXPECT_EQ(tier.capacity_bytes, want[i].cap);
    EXPECT_TRUE(tier.emulated);
    EXPECT_FALSE(tier.numa_nodes.empty());
    EXPECT_EQ(tier.numa_nodes, t.tiers[0].numa_nodes);  // all laid on the same host memory
    EXPECT_TRUE(evidence_mentions(tier, "declared by the embedded default topology"));
  }
  EXPECT_NE(t.note.find("EMULATED"), std::string::npos);
  json j = json::parse(topology_to_json(t));
  expect_schema(j);
  EXPECT_EQ(j["source"], "emulated");
  for (const json &tier : j["tiers"]) EXPECT_EQ(tier["emulated"], true);
  EXPECT_EQ(j["tiers"][0]["bandwidth_mib_s"], 819200);
  EXPECT_EQ(discover_topology("emulated").tiers.size(), 3u);
}

TEST(ThisSystem, EveryNodeInExactlyOneTier) {
  Topology t = discover_this_system();
  EXPECT_EQ(t.source, TopologySource::this_system);
  ASSERT_GE(t.numa_node_count, 1u);
  ASSERT_FALSE(t.tiers.empty());
  std::set<unsigned> seen;
  size_t total = 0;
  for (size_t i = 0; i < t.tiers.size(); ++i) {
    EXPECT_EQ(t.tiers[i].rank, static_cast<int>(i));
    EXPECT_FALSE(t.tiers[i].emulated);
    EXPECT_GT(t.tiers[i].capacity_bytes, 0u);
    for (unsigned n : t.tiers[i].numa_nodes) seen.insert(n);
    total += t.tiers[i].numa_nodes.size();
  }
  EXPECT_EQ(total, t.numa_node_count);
  EXPECT_EQ(seen.size(), total);
  expect_schema(json::parse(topology_to_json(t)));
}

TEST(ThisSystem, KeepsGpuNumaNodesWithoutOverridingTheUser) {
  {
    ScopedEnv unset("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES", nullptr);
    discover_this_system();
    const char *v = std::getenv("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES");
    ASSERT_NE(v, nullptr);
    EXPECT_STREQ(v, "1");
  }
  {
    ScopedEnv user("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES", "0");
    discover_this_system();
    EXPECT_STREQ(std::getenv("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES"), "0");
  }
}

TEST(ThisSystem, RefusesATopologyTheEnvironmentSubstituted) {
  const std::string file = (topology_data_dir() / "memorysidecaches.xml").string();
  ScopedEnv xmlfile("HWLOC_XMLFILE", file.c_str());
  try {
    Topology t = discover_this_system();
    FAIL() << "HWLOC_XMLFILE was reported as this system (" << t.numa_node_count << " nodes)";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_TOPOLOGY);
    EXPECT_NE(std::string(e.what()).find("HWLOC_XMLFILE"), std::string::npos) << e.what();
  }
  // An explicit file is read on our own handle, whatever the environment says.
  EXPECT_EQ(load_topology_xml((topology_data_dir() / "64intel64-fakeKNL-SNC4-hybrid.xml").string()).tiers.size(), 2u);
}

TEST(Auto, PicksThisSystemOnlyWithTwoTiers) {
  Topology live = discover_this_system();
  Topology a = discover_topology("auto");
  EXPECT_EQ(topology_to_json(a), topology_to_json(discover_topology("")));
  EXPECT_NE(a.note.find("auto:"), std::string::npos) << a.note;
  // CUDA GPU tiers (docs/gpu.md) do not count towards the choice and stay in front.
  const size_t gpus = static_cast<size_t>(
      std::count_if(live.tiers.begin(), live.tiers.end(), [](const TierDesc &t) { return t.cuda_device >= 0; }));
  if (live.tiers.size() - gpus >= 2) {
    EXPECT_EQ(a.source, TopologySource::this_system);
  } else {
    EXPECT_EQ(a.source, TopologySource::emulated);
    ASSERT_EQ(a.tiers.size(), 3u + gpus);
    // Laid on the machine's own node(s).
    EXPECT_EQ(a.tiers[gpus].numa_nodes, live.tiers[gpus].numa_nodes);
    EXPECT_NE(a.note.find("embedded default"), std::string::npos) << a.note;
  }
}

TEST(Cli, JsonForTheKnlFileShowsHbmBeforeDram) {
  if (!std::getenv("CXLT_TOOL")) GTEST_SKIP() << "CXLT_TOOL is not set (run through meson test)";
  const std::string file = (topology_data_dir() / "64intel64-fakeKNL-SNC4-hybrid.xml").string();
  ToolRun r = run_tool({"topo", "--topology", file, "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  json j = json::parse(r.out);
  expect_schema(j);
  EXPECT_EQ(j["source"], "xml");
  EXPECT_EQ(j["hwloc_version"], topo::hwloc_runtime_version());
  ASSERT_EQ(j["tiers"].size(), 2u);
  EXPECT_EQ(j["tiers"][0]["kind"], "hbm");
  EXPECT_EQ(j["tiers"][0]["numa_nodes"], json::parse("[4,5,6,7]"));
  EXPECT_EQ(j["tiers"][1]["kind"], "dram");
  EXPECT_EQ(j["tiers"][0]["latency_ns"], nullptr);
  EXPECT_EQ(j["tiers"][0]["bandwidth_mib_s"], 90000);
}

TEST(Cli, TableHasUnitsInEveryColumnAndSaysEmulated) {
  if (!std::getenv("CXLT_TOOL")) GTEST_SKIP() << "CXLT_TOOL is not set (run through meson test)";
  ToolRun r = run_tool({"topo", "--topology", "emulated"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char *needle : {"capacity (GiB)", "bandwidth (MiB/s, higher is better)", "latency (ns, lower is better)",
                             "EMULATED", "declared by the embedded default topology", "819200", "34816"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  ToolRun j = run_tool({"topo", "--topology", "emulated", "--json"});
  ASSERT_EQ(j.status, 0) << j.err;
  json parsed = json::parse(j.out);
  expect_schema(parsed);
  EXPECT_EQ(parsed["source"], "emulated");
  EXPECT_NE(parsed["note"].get<std::string>().find("EMULATED"), std::string::npos);
}

TEST(Cli, DefaultIsAutoAndWorksOnThisMachine) {
  if (!std::getenv("CXLT_TOOL")) GTEST_SKIP() << "CXLT_TOOL is not set (run through meson test)";
  ToolRun r = run_tool({"topo", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(r.out);
  expect_schema(j);
  EXPECT_EQ(j["source"], topology_source_name(discover_topology("auto").source));
  ToolRun table = run_tool({"topo"});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("rank"), std::string::npos);
}
