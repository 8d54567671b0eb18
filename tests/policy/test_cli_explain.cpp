// SPDX-License-Identifier: Apache-2.0
// `cxltier explain` and `cxltier params` through the real binary.
#include "../common/cli.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

using cxlt_test::run_tool;

TEST(ExplainCli, WorkedExampleTable) {
  auto r = run_tool({"explain", "--alpha", "0.05", "--beta", "0.001", "--attention", "0.45,0.12,0.30,0.08,0.35",
                     "--score", "0.059", "--steps-since-access", "50"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("0.058308140625"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.059"), std::string::npos);
  EXPECT_NE(r.out.find("rounds to three decimals at every step"), std::string::npos);
  EXPECT_NE(r.out.find("13.5 decode steps"), std::string::npos);
  EXPECT_NE(r.out.find("recency_decay 0.048771, priority 0.045893"), std::string::npos) << r.out;
}

TEST(ExplainCli, WorkedExampleJson) {
  auto r = run_tool({"explain", "--attention", "0.45,0.12,0.30,0.08,0.35", "--score", "0.02", "--steps-since-access",
                     "2000", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char *k : {"alpha", "beta", "half_life_steps", "scores", "priority"}) EXPECT_TRUE(j.contains(k)) << k;
  ASSERT_EQ(j["scores"].size(), 5u);
  EXPECT_EQ(j["scores"][4].get<double>(), 0.058308140625);
  EXPECT_NE(r.out.find("0.058308140625"), std::string::npos);
  EXPECT_NEAR(j["priority"]["recency_decay"].get<double>(), 0.864665, 5e-7);
  EXPECT_NEAR(j["priority"]["priority"].get<double>(), 0.847371, 5e-7);
  EXPECT_EQ(j["priority"]["steps_since_access"].get<uint64_t>(), 2000u);
}

TEST(ExplainCli, BadInputExitsTwoWithTheReason) {
  struct Case { std::vector<std::string> args; const char *needle; } cases[] = {
      {{"explain", "--alpha", "0"}, "alpha"},
      {{"explain", "--alpha", "1.5"}, "alpha"},
      {{"explain", "--beta", "-0.1"}, "beta"},
      {{"explain", "--attention", "0.1,x"}, "--attention"},
      {{"explain", "--attention", "0.1,1.2"}, "--attention"},
      {{"explain", "--mode", "sometimes"}, "--mode"},
      {{"explain", "--steps-since-access", "-3"}, "--steps-since-access"},
  };
  for (const auto &c : cases) {
    auto r = run_tool(c.args);
    EXPECT_EQ(r.status, 2) << c.args.back();
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
  }
  auto w = run_tool({"explain", "--alpha", "0.2", "--attention", "1"});
  EXPECT_EQ(w.status, 0);
  EXPECT_NE(w.err.find("withdrawn"), std::string::npos) << "alpha = 0.2 must be flagged";
}

TEST(ParamsCli, ListsEveryParameterWithItsStatus) {
  auto r = run_tool({"params", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  bool alpha = false, beta = false, withdrawn = false, block = false;
  for (const auto &p : j) {
    std::string name = p["name"], status = p["status"];
    if (name == "policy.alpha") alpha = status == "simulated (provisional)";
    if (name == "policy.beta") beta = status == "uncalibrated";
    if (status == "withdrawn") withdrawn = true;
    if (name == "geometry.tokens_per_block") block = true;
  }
  EXPECT_TRUE(alpha);
  EXPECT_TRUE(beta);
  EXPECT_TRUE(withdrawn);
  EXPECT_TRUE(block);
}
