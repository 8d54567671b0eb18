// SPDX-License-Identifier: Apache-2.0
// The replay library: every policy stays at or below OPT and is deterministic; persistence
// changes only the policies that read the kept state; the decode clock; several tiers; the
// JSON keys and types; malformed and bad input; the sweep agrees with single replays and does
// not depend on the number of threads; the OPT check catches a violation.
#include "replay_test_util.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/replay.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

using namespace cxltier;
using nlohmann::json;

namespace {

// A replay runs on one thread (a synchronous runtime): under ThreadSanitizer, which finds races
// between threads, the Replay tests skip, and the Sweep tests (worker threads) run. The plain
// build and ASan+UBSan run them all.
#if defined(__SANITIZE_THREAD__)
#define SKIP_ONE_THREAD_UNDER_TSAN() GTEST_SKIP() << "one thread: ThreadSanitizer has nothing to check here"
#else
#define SKIP_ONE_THREAD_UNDER_TSAN() \
  do {                               \
  } while (0)
#endif

const std::string kMooncake = "mooncake__synthetic_trace.jsonl";
const std::string kDynamo1000 = "dynamo__mooncake_trace_1000.jsonl";
const std::string kPi = "dynamo__pi_request_trace.jsonl.gz";

std::string T(const std::string &f) { return cxlt_test::trace_dir() + f; }

replay::Options opts(const std::string &file, const std::string &policy, uint64_t cap) {
  replay::Options o;
  o.trace = T(file);
  o.policy = replay::parse_policy(policy);
  o.capacity_blocks = cap;
  return o;
}

// Every policy (several LRFU parameter pairs, persistence on and off) stays at or below OPT
// at the same capacity on the same stream, and gives the same answer twice.
// Sanitizers make each replay 10-15x slower (185 s for this test under ASan): their builds check
// one capacity per trace, the same policies and code paths (docs/reliability.md).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

TEST(Replay, NoPolicyBeatsOptAndEveryRunIsDeterministic) {
  SKIP_ONE_THREAD_UNDER_TSAN();
  for (const std::string &file : {kMooncake, kDynamo1000, kPi}) {
    const replay::Prepass pp = replay::prepass(T(file), {}, true);
    std::vector<uint64_t> caps{pp.unique_blocks / 20 + 1, pp.unique_blocks / 10 + 1, uint64_t{6553}};
    if (kSanitized) caps = {pp.unique_blocks / 10 + 1};
    for (uint64_t cap : caps) {
      replay::Options oo = opts(file, "opt", cap);
      oo.next_use = &pp;
      const uint64_t opt = replay::run(oo).hits;
      EXPECT_GT(opt, 0u);
      for (const char *pol : {"lru", "fifo", "lfu", "lfu-nopersist", "arc", "lrfu", "lrfu-nopersist"}) {
        std::vector<std::pair<double, double>> params{{0.05, 0.001}};
        if (std::string(pol) == "lrfu") params = {{0.05, 0.001}, {0.5, 0.0}, {0.001, 0.1}, {1.0, 0.01}};
        for (auto [a, b] : params) {
          replay::Options o = opts(file, pol, cap);
          o.lrfu.alpha = a;
          o.lrfu.beta = b;
          replay::Result r1 = replay::run(o), r2 = replay::run(o);
          SCOPED_TRACE(file + " " + pol + " at " + std::to_string(cap) + " alpha " + std::to_string(a));
          EXPECT_LE(r1.hits, opt);
          EXPECT_EQ(r1.hits, r2.hits);
          EXPECT_EQ(r1.readmissions_restored, r2.readmissions_restored);
          EXPECT_EQ(r1.drops, r2.drops);
          EXPECT_EQ(r1.hits + r1.misses, r1.references);
          EXPECT_EQ(r1.references, pp.references);
          EXPECT_EQ(r1.unique_blocks, pp.unique_blocks);
        }
      }
    }
  }
}

// LRU, FIFO and ARC order blocks by what happens while they are resident: the kept state
// changes nothing. LFU and LRFU read it: with persistence on, re-admissions restore it.
TEST(Replay, PersistenceMattersOnlyWhereTheStateIsRead) {
  SKIP_ONE_THREAD_UNDER_TSAN();
  const uint64_t cap = 2196;  // 5 % of the Mooncake trace's unique blocks
  for (const char *pol : {"lru", "fifo", "arc"}) {
    replay::Options on = opts(kMooncake, pol, cap), off = on;
    off.policy.persist = false;
    replay::Result a = replay::run(on), b = replay::run(off);
    EXPECT_EQ(a.hits, b.hits) << pol;
    EXPECT_FALSE(replay::persist_matters(on.policy.kind));
  }
  for (const char *pol : {"lfu", "lrfu"}) {
    replay::Options on = opts(kMooncake, pol, cap), off = on;
    off.policy.persist = false;
    replay::Result a = replay::run(on), b = replay::run(off);
    EXPECT_GT(a.readmissions_restored, 0u) << pol;
    EXPECT_EQ(b.readmissions_restored, 0u) << pol;
    EXPECT_NE(a.hits, b.hits) << pol << ": the kept state changed no decision on this trace";
  }
}

// LRU and FIFO on one tier keep only the resident blocks' states (and one more), so the
// replay counts the unique blocks itself: exactly, for any 64-bit id, the largest included.
TEST(Replay, ResidentStatesOnlyStillCountsEveryUniqueBlock) {
  SKIP_ONE_THREAD_UNDER_TSAN();
  const std::string path = ::testing::TempDir() + "cxlt_replay_ids_" + std::to_string(::getpid()) + ".jsonl";
  {
    std::ofstream f(path);
    f << "{\"timestamp\": 0, \"hash_ids\": [18446744073709551615, 0, 1]}\n"
      << "{\"timestamp\": 1, \"hash_ids\": [18446744073709551615, 2, 0]}\n"
      << "{\"timestamp\": 2, \"hash_ids\": [3, 18446744073709551614, 1]}\n";
  }
  for (const char *pol : {"lru", "fifo"}) {
    replay::Options o;
    o.trace = path;
    o.policy = replay::parse_policy(pol);
    o.capacity_blocks = 3;
    replay::Result r = replay::run(o);
    EXPECT_EQ(r.references, 9u) << pol;
    EXPECT_EQ(r.unique_blocks, 6u) << pol;
    EXPECT_EQ(r.readmissions_restored, 0u) << pol << ": no state outlives its residency";
    // At 3 blocks: LRU hits the second 18446744073709551615 only (2 evicts 0); FIFO hits it
    // and the second 0 (2 evicts the older 18446744073709551615, not 0).
    EXPECT_EQ(r.hits, std::string(pol) == "lru" ? 1u : 2u) << pol;
  }
  std::remove(path.c_str());
}

// Hash traces: one clock step per request, attention 1.0. Attention traces: the clock follows
// the step numbers (a gap advances it by the gap), attention comes from the file.
TEST(Replay, DecodeClockAndAttentionSource) {
  SKIP_ONE_THREAD_UNDER_TSAN();
  replay::Result h = replay::run(opts(kDynamo1000, "lru", 100));
  EXPECT_EQ(h.requests, 1000u);
  EXPECT_EQ(h.steps, 999u);
  EXPECT_FALSE(h.trace_attention);
  EXPECT_STREQ(replay::attention_source(h), "constant-1.0");

  replay::Result a = replay::run(opts("attention_small.jsonl", "lrfu", 2));
  EXPECT_TRUE(a.trace_attention);
  EXPECT_STREQ(replay::attention_source(a), "trace");
  EXPECT_EQ(a.requests, 3u);
  EXPECT_EQ(a.steps, 3u) << "steps 0, 1 and 3: the clock ends at 3";
  EXPECT_EQ(a.references, 7u);
  EXPECT_EQ(a.unique_blocks, 4u);
  // Step 0: 10 11 20 (capacity 2: 20 evicts one); step 1: 10 11 12 20.
  EXPECT_EQ(a.hits + a.misses, 7u);
}

TEST(Replay, SeveralTiers) {
  SKIP_ONE_THREAD_UNDER_TSAN();
  replay::Options o;
  o.trace = T(kMooncake);
  o.policy = replay::parse_policy("lrfu");
  o.tiers = replay::parse_tiers("hbm=5GiB,dram=10GiB,cxl=20GiB");  // 1024 + 2048 + 4096 blocks
  replay::Result r = replay::run(o);
  ASSERT_EQ(r.tiers.size(), 3u);
  EXPECT_EQ(r.tiers[0].capacity_blocks, 1024u);
  EXPECT_EQ(r.tiers[1].capacity_blocks, 2048u);
  EXPECT_EQ(r.tiers[2].capacity_blocks, 4096u);
  EXPECT_EQ(r.capacity_blocks, 7168u);
  EXPECT_EQ(r.tiers[0].hits + r.tiers[1].hits + r.tiers[2].hits, r.hits);
  EXPECT_GT(r.tiers[1].hits, 0u);
  EXPECT_GT(r.drops, 0u);
  EXPECT_GT(r.demotions, 0u);
  EXPECT_GT(r.readmissions_restored, 0u);
  EXPECT_EQ(r.promotion, PromotionRule::score_above_victim);
  ASSERT_TRUE(r.opt_hits.has_value()) << "several tiers: the OPT bound is always reported";
  EXPECT_LE(r.hits, *r.opt_hits);
  EXPECT_TRUE(r.opt_violation.empty());
  // The bound is OPT on one tier of the total.
  replay::Result one = replay::run(opts(kMooncake, "opt", 7168));
  EXPECT_EQ(*r.opt_hits, one.hits);
  // Policy opt with several tiers: replayed as one tier of the total, and said so.
  o.policy = replay::parse_policy("opt");
  replay::Result ro = replay::run(o);
  EXPECT_TRUE(ro.opt_single_tier);
  EXPECT_EQ(ro.hits, one.hits);
  // Promotion never: no promotions.
  o.policy = replay::parse_policy("lru");
  o.promotion = PromotionRule::never;
  replay::Result rn = replay::run(o);
  EXPECT_EQ(rn.promotions, 0u);
  EXPECT_LE(rn.hits, one.hits);
}

TEST(Replay, JsonHasTheIssuesKeysWithTheirTypes) {
  SKIP_ONE_THREAD_UNDER_TSAN();
  replay::Options o = opts(kPi, "lrfu", 64);
  o.opt_bound = true;
  json j = json::parse(replay::to_json(replay::run(o)));
  for (const char *k : {"trace", "format", "policy", "attention_source", "engine"}) EXPECT_TRUE(j[k].is_string()) << k;
  for (const char *k : {"capacity_blocks", "requests", "references", "unique_blocks", "hits", "misses", "drops",
                        "readmissions_restored", "block_bytes", "block_size_tokens", "steps", "malformed_lines"})
    EXPECT_TRUE(j[k].is_number_unsigned()) << k;
  EXPECT_TRUE(j["hit_rate"].is_number_float());
  EXPECT_TRUE(j["params"].is_object());
  EXPECT_EQ(j["params"]["alpha"], 0.05);
  EXPECT_EQ(j["params"]["beta"], 0.001);
  EXPECT_EQ(j["params"]["persist"], true);
  EXPECT_EQ(j["format"], "dynamo");
  EXPECT_EQ(j["policy"], "lrfu");
  EXPECT_EQ(j["attention_source"], "constant-1.0");
  EXPECT_EQ(j["capacity_blocks"], 64u);
  EXPECT_EQ(j["references"], 4163u);
  EXPECT_EQ(j["unique_blocks"], 1183u);
  EXPECT_EQ(j["requests"], 17u);
  EXPECT_DOUBLE_EQ(j["hit_rate"].get<double>(), j["hits"].get<double>() / 4163.0);
  ASSERT_TRUE(j["tiers"].is_array());
  ASSERT_EQ(j["tiers"].size(), 1u);
  for (const char *k : {"name", "kind"}) EXPECT_TRUE(j["tiers"][0][k].is_string()) << k;
  for (const char *k : {"budget_bytes", "capacity_blocks", "hits", "admissions", "blocks_at_end"})
    EXPECT_TRUE(j["tiers"][0][k].is_number_unsigned()) << k;
  EXPECT_EQ(j["tiers"][0]["hits"], j["hits"]);
  ASSERT_TRUE(j["opt_bound"].is_object());
  EXPECT_GE(j["opt_bound"]["hits"].get<uint64_t>(), j["hits"].get<uint64_t>());
  EXPECT_TRUE(j["opt_bound"]["violation"].is_null());
  EXPECT_TRUE(j["malformed"].is_array());
  // A baseline's params carry no LRFU parameters.
  json l = json::parse(replay::to_json(replay::run(opts(kPi, "lfu-nopersist", 64))));
  EXPECT_EQ(l["policy"], "lfu-nopersist");
  EXPECT_FALSE(l["params"].contains("alpha"));
  EXPECT_EQ(l["params"]["persist"], false);
  EXPECT_TRUE(l["opt_bound"].is_null());
}

TEST(Replay, MalformedLinesAreCountedWithTheirLineNumbersOrStopAStrictRun) {
  SKIP_ONE_THREAD_UNDER_TSAN();
  replay::Result r = replay::run(opts("mooncake_malformed.jsonl", "lru", 4));
  EXPECT_EQ(r.malformed_lines, 12u);
  std::vector<uint64_t> lines;
  for (const trace::Issue &i : r.issues) lines.push_back(i.line);
  EXPECT_EQ(lines, (std::vector<uint64_t>{2, 3, 4, 5, 6, 7, 8, 9, 12, 14, 15, 17}));
  EXPECT_EQ(r.requests, 4u);
  EXPECT_EQ(r.references, 9u);  // lines 1, 10, 13, 16: [0 1] [0 2 3] [2^64-1 0] [7 8]
  EXPECT_EQ(r.hits, 2u);        // capacity 4, LRU: 0 hits twice
  json j = json::parse(replay::to_json(r));
  EXPECT_EQ(j["malformed"][0]["line"], 2u);
  EXPECT_TRUE(j["malformed"][0]["reason"].is_string());

  replay::Options strict = opts("mooncake_malformed.jsonl", "lru", 4);
  strict.reader.strict = true;
  try {
    replay::run(strict);
    FAIL() << "a strict replay read past a malformed line";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_CORRUPT);
    EXPECT_NE(std::string(e.what()).find("mooncake_malformed.jsonl:2"), std::string::npos) << e.what();
  }
}

TEST(Replay, BadInputIsRefusedNamingWhatIsWrong) {
  SKIP_ONE_THREAD_UNDER_TSAN();
  auto expect = [](const std::function<void()> &f, cxlt_result_t code, const std::string &needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const Error &e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect([] { replay::run(opts("no-such-file.jsonl", "lru", 4)); }, CXLT_ERROR_IO, "no-such-file.jsonl");
  expect([] { replay::run(opts("garbage.bin", "lru", 4)); }, CXLT_ERROR_CORRUPT, "garbage.bin");
  expect([] { replay::run(opts(kPi, "lru", 0)); }, CXLT_ERROR_INVALID_ARGUMENT, "no capacity");
  expect(
      [] {
        replay::Options o = opts(kPi, "lru", 4);
        o.tiers = replay::parse_tiers("hbm=1GiB");
        replay::run(o);
      },
      CXLT_ERROR_INVALID_ARGUMENT, "not both");
  expect(
      [] {
        replay::Options o = opts(kPi, "lrfu", 4);
        o.lrfu.alpha = 0;
        replay::run(o);
      },
      CXLT_ERROR_INVALID_ARGUMENT, "alpha");
  expect(
      [] {
        replay::Options o = opts(kPi, "lru", 0);
        o.tiers = replay::parse_tiers("hbm=1MiB");
        replay::run(o);
      },
      CXLT_ERROR_INVALID_ARGUMENT, "smaller than one block");
  expect([] { replay::parse_policy("lfru"); }, CXLT_ERROR_INVALID_ARGUMENT, "lfru");
  expect([] { replay::parse_policy("lru-nopersist"); }, CXLT_ERROR_INVALID_ARGUMENT, "lru-nopersist");
  expect([] { replay::parse_tiers("hbm=1GiB,hbm=2GiB"); }, CXLT_ERROR_INVALID_ARGUMENT, "twice");
  expect([] { replay::parse_tiers("nvm=1GiB"); }, CXLT_ERROR_INVALID_ARGUMENT, "nvm");
  expect([] { replay::parse_tiers("hbm"); }, CXLT_ERROR_INVALID_ARGUMENT, "KIND=SIZE");
  expect([] { replay::parse_tiers("hbm=lots"); }, CXLT_ERROR_INVALID_ARGUMENT, "lots");
  // An empty trace with its format given: nothing to replay, nothing hit.
  replay::Options e = opts("empty.jsonl", "lru", 4);
  e.reader.format = trace::Format::mooncake;
  replay::Result r = replay::run(e);
  EXPECT_EQ(r.references, 0u);
  EXPECT_EQ(r.hit_rate, 0.0);
}

TEST(Replay, BlockBytesAndBudgets) {
  SKIP_ONE_THREAD_UNDER_TSAN();
  EXPECT_EQ(replay::kCanonicalBlockBytes, 5242880u);
  replay::Options o = opts(kPi, "lru", 10);
  o.block_bytes = 4096;
  replay::Result r = replay::run(o);
  EXPECT_EQ(r.block_bytes, 4096u);
  EXPECT_EQ(r.tiers[0].budget_bytes, 40960u);
  EXPECT_EQ(r.hits, replay::run(opts(kPi, "lru", 10)).hits) << "the block size only converts budgets";
  o.block_bytes = 3 * 5 * 7 * 4096;  // odd factors
  EXPECT_EQ(replay::run(o).tiers[0].capacity_blocks, 10u);
}

TEST(Sweep, AgreesWithSingleReplaysAndDoesNotDependOnThreads) {
  replay::SweepOptions s;
  s.trace = T(kPi);
  s.alphas = {0.5, 0.05};
  s.betas = {0.0, 0.01};
  s.capacities = {64};
  s.capacity_fractions = {0.1};
  s.persist = {true, false};
  s.jobs = 1;
  replay::SweepResult one = replay::sweep(s);
  s.jobs = 3;
  replay::SweepResult many = replay::sweep(s);
  EXPECT_EQ(one.capacities, (std::vector<uint64_t>{64, 118}));
  // Per capacity: 2 x 2 x 2 LRFU, lru, fifo, lfu x 2, arc, opt = 14.
  ASSERT_EQ(one.rows.size(), 28u);
  ASSERT_EQ(many.rows.size(), one.rows.size());
  EXPECT_EQ(many.jobs, 3u);
  for (size_t i = 0; i < one.rows.size(); ++i) {
    EXPECT_EQ(one.rows[i].hits, many.rows[i].hits) << i;
    EXPECT_EQ(replay::policy_label(one.rows[i].policy), replay::policy_label(many.rows[i].policy));
  }
  EXPECT_TRUE(one.violations.empty());
  std::set<std::string> labels;
  for (const replay::SweepRow &row : one.rows) {
    labels.insert(replay::policy_label(row.policy));
    replay::Options o = opts(kPi, replay::policy_label(row.policy), row.capacity_blocks);
    if (row.policy.kind == PolicyKind::lrfu) {
      o.lrfu.alpha = row.alpha;
      o.lrfu.beta = row.beta;
    } else {
      EXPECT_TRUE(std::isnan(row.alpha));
    }
    EXPECT_EQ(replay::run(o).hits, row.hits) << replay::policy_label(row.policy) << " at " << row.capacity_blocks;
  }
  EXPECT_EQ(labels, (std::set<std::string>{"lrfu", "lrfu-nopersist", "lru", "fifo", "lfu", "lfu-nopersist", "arc", "opt"}));
  json j = json::parse(replay::sweep_json(one));
  EXPECT_EQ(j["runs"].size(), 28u);
  EXPECT_EQ(j["unique_blocks"], 1183u);
  EXPECT_EQ(j["attention_source"], "constant-1.0");
  EXPECT_TRUE(j["by_capacity"][0]["best"].contains("opt"));
  std::string csv = replay::sweep_csv(one);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 29);
  EXPECT_EQ(csv.rfind("trace,attention_source,capacity_blocks,policy,persist,alpha,beta,hits,references,hit_rate\n", 0), 0u);
}

TEST(Sweep, BadGridsAreRefused) {
  replay::SweepOptions s;
  s.trace = T(kPi);
  s.capacities = {};
  EXPECT_THROW(replay::sweep(s), Error);
  s.capacities = {10};
  s.alphas = {0.0};
  EXPECT_THROW(replay::sweep(s), Error);
  s.alphas = {0.05};
  s.betas = {-1};
  EXPECT_THROW(replay::sweep(s), Error);
  s.betas = {0.0};
  s.capacity_fractions = {1.5};
  EXPECT_THROW(replay::sweep(s), Error);
}

// The check itself: a row above OPT at its capacity is reported, naming it and the numbers.
TEST(Sweep, OptCheckReportsAViolation) {
  std::vector<replay::SweepRow> rows(3);
  rows[0].policy = {PolicyKind::opt, true};
  rows[0].capacity_blocks = 100;
  rows[0].hits = 50;
  rows[1].policy = {PolicyKind::lru, true};
  rows[1].capacity_blocks = 100;
  rows[1].hits = 50;
  rows[2].policy = {PolicyKind::lrfu, false};
  rows[2].alpha = 0.05;
  rows[2].beta = 0.001;
  rows[2].capacity_blocks = 100;
  rows[2].hits = 51;
  std::vector<std::string> v = replay::opt_violations(rows);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].find("lrfu-nopersist (alpha 0.05, beta 0.001) at 100 blocks: 51 hits > opt's 50"), std::string::npos)
      << v[0];
  rows[2].hits = 50;
  EXPECT_TRUE(replay::opt_violations(rows).empty());
}

}  // namespace
