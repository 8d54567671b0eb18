// SPDX-License-Identifier: Apache-2.0
// `cxltier bench` through the real binary with tiny settings (4 blocks of 64 KiB: the rates are
// meaningless, only the shape is checked): every required JSON key, a row for every ordered
// pair of the embedded default's tiers, the move_pages figures null with the reason on a
// one-node machine and numbers on a multi-node one, the CSV and plot outputs, a sweep, and
// exit status 2 for bad flags. Nothing here judges a rate.
#include "../common/cli.hpp"
#include "../common/files.hpp"
#include "../common/temp_dir.hpp"

#include <cxltier/topology.hpp>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>
#include <numa.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

using cxlt_test::run_tool;
using nlohmann::json;

namespace {

const std::vector<std::string> kTiny = {"bench", "--topology", "emulated", "--block-bytes", "64KiB", "--blocks", "4"};

std::vector<std::string> tiny(std::vector<std::string> more) {
  std::vector<std::string> a = kTiny;
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

size_t memory_nodes() {
  if (numa_available() < 0) return 1;
  size_t n = 0;
  for (int i = 0; i <= numa_max_node(); ++i)
    if (numa_node_size64(i, nullptr) > 0) ++n;
  return n;
}

void expect_positive_number(const json &j, const char *key) {
  ASSERT_TRUE(j.contains(key)) << key;
  ASSERT_TRUE(j[key].is_number()) << key << " = " << j[key].dump();
  EXPECT_GT(j[key].get<double>(), 0) << key;
}

}  // namespace

TEST(BenchCli, JsonHasEveryKeyAndEveryOrderedPair) {
  auto r = run_tool(tiny({"--json"}));
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(r.out);
  for (const char *k : {"machine", "memcpy_gbps", "memcpy_1thread_gbps", "move_pages_4k_gbps", "move_pages_huge_gbps", "pairs"})
    ASSERT_TRUE(j.contains(k)) << k;
  ASSERT_TRUE(j["machine"].is_object());
  EXPECT_FALSE(j["machine"]["date_utc"].get<std::string>().empty());
  expect_positive_number(j, "memcpy_gbps");
  expect_positive_number(j, "memcpy_1thread_gbps");
  EXPECT_EQ(j["parameters"]["block_bytes"].get<uint64_t>(), 65536u);
  EXPECT_EQ(j["parameters"]["blocks"].get<uint64_t>(), 4u);
  EXPECT_GE(j["parameters"]["runs"].get<unsigned>(), 5u);
  // The baseline's threads are scheduled like the runtime's migration threads unless --pin.
  EXPECT_FALSE(j["parameters"]["pinned"].get<bool>());

  // Every ordered pair of the embedded default's tiers, once each.
  const cxltier::Topology topo = cxltier::embedded_default_topology();
  std::set<std::pair<std::string, std::string>> want, seen;
  for (const auto &a : topo.tiers)
    for (const auto &b : topo.tiers)
      if (a.rank != b.rank) want.insert({cxltier::tier_kind_name(a.kind), cxltier::tier_kind_name(b.kind)});
  ASSERT_TRUE(j["pairs"].is_array());
  EXPECT_EQ(j["pairs"].size(), topo.tiers.size() * (topo.tiers.size() - 1));
  const double memcpy_gbps = j["memcpy_gbps"].get<double>();
  for (const json &p : j["pairs"]) {
    for (const char *k : {"from", "to", "method", "gbps", "ratio_to_memcpy", "block_latency_us_median", "block_latency_us_p99"})
      ASSERT_TRUE(p.contains(k)) << k << " in " << p.dump();
    EXPECT_TRUE(seen.insert({p["from"].get<std::string>(), p["to"].get<std::string>()}).second) << p.dump();
    EXPECT_FALSE(p["method"].get<std::string>().empty());
    expect_positive_number(p, "gbps");
    EXPECT_NEAR(p["ratio_to_memcpy"].get<double>(), p["gbps"].get<double>() / memcpy_gbps, 1e-9);
    EXPECT_GT(p["block_latency_us_median"].get<double>(), 0);
    EXPECT_GE(p["block_latency_us_p99"].get<double>(), p["block_latency_us_median"].get<double>());
    EXPECT_EQ(p["gbps_runs"].size(), j["parameters"]["runs"].get<size_t>());
  }
  EXPECT_EQ(seen, want);
  EXPECT_EQ(j["integrity"]["errors"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["integrity"]["blocks_checked"].get<uint64_t>(), 4u);

  if (memory_nodes() < 2) {
    EXPECT_TRUE(j["move_pages_4k_gbps"].is_null());
    EXPECT_TRUE(j["move_pages_huge_gbps"].is_null());
    EXPECT_EQ(j["move_pages_4k_reason"].get<std::string>(), "not applicable: one NUMA node");
    EXPECT_EQ(j["move_pages_huge_reason"].get<std::string>(), "not applicable: one NUMA node");
    EXPECT_TRUE(j["goals"]["migration_vs_move_pages_4k"]["met"].is_null());
  } else {
    expect_positive_number(j, "move_pages_4k_gbps");
    if (!j["move_pages_huge_gbps"].is_null()) {
      expect_positive_number(j, "move_pages_huge_gbps");
    } else {
      EXPECT_FALSE(j["move_pages_huge_reason"].get<std::string>().empty());
    }
  }
}

TEST(BenchCli, TableSaysWhyMovePagesIsMissing) {
  auto r = run_tool(tiny({"--quiet"}));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char *s : {"memcpy, 1 thread", "hbm -> dram", "cxl -> hbm", "goal", "integrity: 4 blocks checked"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  if (memory_nodes() < 2) {
    EXPECT_NE(r.out.find("not applicable: one NUMA node"), std::string::npos) << r.out;
  }
  EXPECT_TRUE(r.err.empty()) << "--quiet: " << r.err;
}

TEST(BenchCli, ProgressGoesToStderr) {
  auto r = run_tool(tiny({"--json"}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("run 6/6"), std::string::npos) << r.err;
  EXPECT_TRUE(json::accept(r.out)) << "stdout must be the JSON alone";
}

TEST(BenchCli, SweepCsvAndPlot) {
  const cxlt_test::TempDir tmp("bench-test");
  const std::string csv = tmp / "sweep.csv", plot = tmp / "sweep.svg";
  auto r = run_tool({"bench", "--topology", "emulated", "--block-bytes", "64KiB,128KiB", "--blocks", "4", "--batch",
                     "2", "--json", "--quiet", "--csv", csv, "--plot", plot});
  const bool gnuplot = access("/usr/bin/gnuplot", X_OK) == 0;
  if (!gnuplot) {
    EXPECT_EQ(r.status, 2) << "without gnuplot, --plot must say so: " << r.err;
    EXPECT_NE(r.err.find("gnuplot"), std::string::npos) << r.err;
  } else {
    ASSERT_EQ(r.status, 0) << r.err;
    json j = json::parse(r.out);
    ASSERT_EQ(j["sweep"].size(), 2u);
    EXPECT_EQ(j["sweep"][0]["parameters"]["block_bytes"].get<uint64_t>(), 65536u);
    EXPECT_EQ(j["sweep"][1]["parameters"]["block_bytes"].get<uint64_t>(), 131072u);
    EXPECT_EQ(j["sweep"][1]["parameters"]["batch"].get<uint64_t>(), 2u);
    EXPECT_EQ(j["memcpy_gbps"], j["sweep"][0]["memcpy_gbps"]);
    // Header + (4 fixed rows + 6 pairs) per point.
    std::string text = cxlt_test::read_file(csv);
    size_t lines = 0;
    for (char c : text) lines += c == '\n';
    EXPECT_EQ(lines, 1u + 2u * 10u) << text;
    EXPECT_EQ(text.rfind("block_bytes,blocks,batch,threads,row,", 0), 0u);
    struct stat st {};
    ASSERT_EQ(stat(plot.c_str(), &st), 0) << "no plot written";
    EXPECT_GT(st.st_size, 1000);
    EXPECT_NE(cxlt_test::read_file(plot).find("<svg"), std::string::npos);
    // Both block sizes are points of the plotted lines (x in KiB).
    const std::string dat = cxlt_test::read_file(plot + ".dat");
    EXPECT_NE(dat.find("\n64 "), std::string::npos) << dat;
    EXPECT_NE(dat.find("\n128 "), std::string::npos) << dat;
  }
}

// One block size: a bar per measured row and the multithreaded memcpy as a line, drawn without
// a gnuplot warning (a line chart over one x value had an empty x range).
TEST(BenchCli, OneBlockSizePlotsBarsWithTheMemcpyBaseline) {
  if (access("/usr/bin/gnuplot", X_OK) != 0) GTEST_SKIP() << "gnuplot is not installed (scripts/test installs it)";
  const cxlt_test::TempDir tmp("bench-test");
  const std::string plot = tmp / "one.svg";
  auto r = run_tool({"bench", "--topology", "emulated", "--block-bytes", "64KiB", "--blocks", "4", "--batch", "2",
                     "--quiet", "--plot", plot});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("arning"), std::string::npos) << "gnuplot's warnings reach the user: " << r.err;
  EXPECT_NE(cxlt_test::read_file(plot).find("<svg"), std::string::npos);
  const std::string gp = cxlt_test::read_file(plot + ".gp");
  EXPECT_NE(gp.find("with boxes"), std::string::npos) << gp;
  EXPECT_NE(gp.find("title 'baseline: memcpy"), std::string::npos) << gp;
  EXPECT_EQ(gp.find("logscale"), std::string::npos) << "one block size has no size axis: " << gp;
  const std::string dat = cxlt_test::read_file(plot + ".dat");
  EXPECT_NE(dat.find("# memcpy, 1 thread"), std::string::npos) << dat;
  EXPECT_NE(dat.find("# baseline memcpy"), std::string::npos) << dat;
}

TEST(BenchCli, BadFlagsExitTwoNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    const char *needle;
  } cases[] = {
      {tiny({"--blocks", "0"}), "--blocks"},
      {tiny({"--batch", "0"}), "--batch"},
      {tiny({"--threads", "0"}), "--threads"},
      {tiny({"--threads", "two"}), "--threads"},
      {tiny({"--runs", "3"}), "--runs"},
      {tiny({"--sweep", "colour"}), "--sweep"},
      {{"bench", "--block-bytes", "12 parsecs"}, "--block-bytes"},
      {{"bench", "--block-bytes", "1KiB"}, "--block-bytes"},
      {{"bench", "--topology", "/nonexistent/topo.xml"}, "/nonexistent/topo.xml"},
      {{"bench", "--config", "/nonexistent/cxltier.toml"}, "/nonexistent/cxltier.toml"},
      {{"bench", "--frobnicate"}, "--frobnicate"},
  };
  for (const auto &c : cases) {
    auto r = run_tool(c.args);
    EXPECT_EQ(r.status, 2) << c.args.back() << "\n" << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
  }
}
