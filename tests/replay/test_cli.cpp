// SPDX-License-Identifier: Apache-2.0
// `cxltier replay` and `cxltier sweep` as a user runs them: exit statuses, tables with units,
// JSON and CSV, progress kept off stdout, malformed lines reported with their numbers, --strict,
// several tiers, and the plot file when gnuplot is installed.
#include "../common/cli.hpp"
#include "../common/temp_dir.hpp"
#include "replay_test_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

using cxlt_test::run_tool;
using nlohmann::json;

namespace {

std::string T(const std::string &f) { return cxlt_test::trace_dir() + f; }

bool have_gnuplot() {
  cxlt_test::ToolResult r = cxlt_test::run_program("/usr/bin/env", {"gnuplot", "--version"});
  return r.status == 0;
}

TEST(ReplayCli, JsonOnStdout) {
  auto r = run_tool({"replay", "--trace", T("dynamo__mooncake_trace_1000.jsonl"), "--policy", "lrfu", "--budget",
                     "32GiB", "--json", "--check-opt"});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["capacity_blocks"], 6553u) << "32 GiB of 5 MiB blocks";
  EXPECT_EQ(j["references"], 19686u);
  EXPECT_EQ(j["unique_blocks"], 12207u);
  EXPECT_EQ(j["attention_source"], "constant-1.0");
  EXPECT_TRUE(j["max_rss_bytes"].is_number_unsigned());
  EXPECT_GE(j["opt_bound"]["hits"].get<uint64_t>(), j["hits"].get<uint64_t>());
}

TEST(ReplayCli, TableSaysUnitsAndDirection) {
  auto r = run_tool({"replay", "--trace", T("mooncake__synthetic_trace.jsonl"), "--policy", "lfu-nopersist",
                     "--capacity-blocks", "2196", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("hit rate"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("higher is better"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("constant 1.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("512-token blocks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reset across eviction"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST(ReplayCli, SeveralTiers) {
  auto r = run_tool({"replay", "--trace", T("mooncake__synthetic_trace.jsonl"), "--tiers", "hbm=5GiB,dram=10GiB",
                     "--promotion", "always", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["tiers"].size(), 2u);
  EXPECT_EQ(j["tiers"][1]["name"], "dram");
  EXPECT_EQ(j["promotion"], "always");
  EXPECT_EQ(j["tiers"][0]["hits"].get<uint64_t>() + j["tiers"][1]["hits"].get<uint64_t>(), j["hits"].get<uint64_t>());
  auto t = run_tool({"replay", "--trace", T("mooncake__synthetic_trace.jsonl"), "--tiers", "hbm=5GiB,dram=10GiB"});
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("dram"), std::string::npos);
  EXPECT_NE(t.out.find("re-admissions"), std::string::npos);
  EXPECT_NE(t.out.find("opt bound"), std::string::npos);
}

TEST(ReplayCli, MalformedLinesLenientAndStrict) {
  auto r = run_tool({"replay", "--trace", T("mooncake_malformed.jsonl"), "--policy", "lru", "--capacity-blocks", "4"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("12 lines skipped: 2 3 4 5 6 7 8 9 12 14 15 17"), std::string::npos) << r.out;
  auto s = run_tool(
      {"replay", "--trace", T("mooncake_malformed.jsonl"), "--policy", "lru", "--capacity-blocks", "4", "--strict"});
  EXPECT_EQ(s.status, 2);
  EXPECT_NE(s.err.find("mooncake_malformed.jsonl:2"), std::string::npos) << s.err;
}

TEST(ReplayCli, BadFlagsExitTwoNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::string pi = T("dynamo__pi_request_trace.jsonl.gz");
  for (const Case &c : std::vector<Case>{
           {{"replay", "--trace", pi}, "exactly one of"},
           {{"replay", "--trace", pi, "--capacity-blocks", "4", "--budget", "1GiB"}, "exactly one of"},
           {{"replay", "--trace", pi, "--capacity-blocks", "0"}, "--capacity-blocks"},
           {{"replay", "--trace", pi, "--capacity-blocks", "x"}, "--capacity-blocks"},
           {{"replay", "--trace", pi, "--budget", "1MiB"}, "smaller than one block"},
           {{"replay", "--trace", pi, "--capacity-blocks", "4", "--policy", "mru"}, "mru"},
           {{"replay", "--trace", pi, "--capacity-blocks", "4", "--alpha", "2"}, "alpha"},
           {{"replay", "--trace", pi, "--capacity-blocks", "4", "--format", "csv"}, "csv"},
           {{"replay", "--trace", pi, "--capacity-blocks", "4", "--policy", "lrfu-nopersist", "--persist", "on"},
            "--persist"},
           {{"replay", "--trace", pi, "--tiers", "hbm=1GiB,gpu=2GiB"}, "gpu"},
           {{"replay", "--trace", "/nonexistent.jsonl", "--capacity-blocks", "4"}, "/nonexistent.jsonl"},
           {{"sweep", "--trace", pi}, "capacity"},
           {{"sweep", "--trace", pi, "--capacity-blocks", "10", "--alpha", "0.5,0"}, "alpha"},
           {{"sweep", "--trace", pi, "--capacity-blocks", "10", "--plot", "x.jpg"}, "--plot"},
           {{"sweep", "--trace", pi, "--capacity-blocks", "10", "--json", "--csv"}, "stdout"},
       }) {
    auto r = run_tool(c.args);
    EXPECT_EQ(r.status, 2) << c.args.back() << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << "nothing on stdout when the input is bad";
  }
}

TEST(SweepCli, TablesJsonCsv) {
  const std::string pi = T("dynamo__pi_request_trace.jsonl.gz");
  auto r = run_tool({"sweep", "--trace", pi, "--alpha", "0.5,0.05", "--beta", "0,0.001", "--capacity-blocks", "64,256",
                     "--persist", "on,off", "--jobs", "2", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("opt (Belady bound)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lrfu-nopersist"), std::string::npos);
  EXPECT_NE(r.out.find("higher is better"), std::string::npos);
  EXPECT_NE(r.out.find("alpha\\beta"), std::string::npos);

  const cxlt_test::TempDir tmp("replay-cli");
  const std::string csv = tmp / "s.csv";
  auto j = run_tool({"sweep", "--trace", pi, "--alpha", "0.5,0.05", "--beta", "0,0.001", "--capacity-blocks", "64",
                     "--policies", "lrfu,lru", "--json", "--csv", csv, "--quiet"});
  ASSERT_EQ(j.status, 0) << j.err;
  json doc = json::parse(j.out);
  EXPECT_EQ(doc["runs"].size(), 6u);  // 4 lrfu, lru, opt
  EXPECT_TRUE(doc["violations"].empty());
  std::string text = cxlt_test::read_text(csv);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 7);
  EXPECT_NE(text.find(",opt,on,,,"), std::string::npos) << text;
}

TEST(SweepCli, PlotFileIsWrittenWhenGnuplotExists) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (scripts/common.sh installs gnuplot-nox)";
  const cxlt_test::TempDir tmp("replay-cli");
  for (const char *ext : {".png", ".svg"}) {
    const std::string out = tmp / (std::string("plot") + ext);
    auto r = run_tool({"sweep", "--trace", T("dynamo__pi_request_trace.jsonl.gz"), "--alpha", "0.5,0.05,0.01",
                       "--beta", "0,0.001,0.1", "--capacity-blocks", "64,256", "--plot", out, "--quiet"});
    ASSERT_EQ(r.status, 0) << r.err;
    std::string bytes = cxlt_test::read_text(out);
    ASSERT_GT(bytes.size(), 1000u) << out;
    if (std::string(ext) == ".png") {
      EXPECT_EQ(bytes.substr(1, 3), "PNG");
    } else {
      EXPECT_NE(bytes.find("<svg"), std::string::npos);
    }
    std::string script = cxlt_test::read_text(out + ".gp");
    EXPECT_NE(script.find("with image"), std::string::npos) << "a heat map";
    EXPECT_NE(script.find("linespoints"), std::string::npos) << "capacity curves";
  }
}

}  // namespace
