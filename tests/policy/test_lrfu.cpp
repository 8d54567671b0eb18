// SPDX-License-Identifier: Apache-2.0
// LRFU formulas against the spec's worked example, and the exact eviction index against its
// brute-force auditor on randomized workloads (>= 1,000,000 decisions, zero disagreements).
#include "lib/policy/lrfu_index.hpp"

#include <cxltier/error.hpp>
#include <cxltier/policy.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace cxltier;

namespace {

// Exact decimal arithmetic for the worked example: scores scaled by 10^k as integers.
// score = 0.05*a + 0.95*s with a given in hundredths: s_{n} * 10^(2+2n) is an integer.
std::string exact_scores_text() {
  // Work in units of 1e-12 (12 decimals suffice for five steps with these inputs).
  const long long att[5] = {45, 12, 30, 8, 35};  // hundredths
  long double s = 0;  // only used to print; the exact path below is integer
  (void)s;
  // s_n = sum_k 0.05 * a_k * 0.95^(n-k); compute with integers in units of 1e-14.
  long long v = 0;  // units of 1e-14
  std::string out;
  for (long long a : att) {
    // 0.05 * a/100 = a * 5e-4 = a * 5e10 units; 0.95 * v = v * 95 / 100 (exact: v multiple of 100)
    v = a * 50000000000LL + v / 100 * 95;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%lld.%014lld ", v / 100000000000000LL, v % 100000000000000LL);
    out += buf;
  }
  return out;
}

}  // namespace

TEST(Lrfu, WorkedExampleExact) {
  // The spec's exact values (its table rounds to three decimals at every step: 0.023, 0.028,
  // 0.042, 0.044, 0.059).
  EXPECT_EQ(exact_scores_text(),
            "0.02250000000000 0.02737500000000 0.04100625000000 0.04295593750000 0.05830814062500 ");
  const double expected[5] = {0.0225, 0.027375, 0.04100625, 0.0429559375, 0.058308140625};
  const double att[5] = {0.45, 0.12, 0.30, 0.08, 0.35};
  double s = 0.0;
  for (int i = 0; i < 5; ++i) {
    s = lrfu_update(s, att[i], 0.05);
    EXPECT_DOUBLE_EQ(s, expected[i]) << "step " << i + 1;
    EXPECT_NEAR(s, expected[i], 1e-16) << "step " << i + 1;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", s);
  EXPECT_STREQ(buf, "0.058308140625");
  // The rounded table of the source document, reproduced by rounding before every update.
  double r = 0.0;
  const double rounded[5] = {0.023, 0.028, 0.042, 0.044, 0.059};
  for (int i = 0; i < 5; ++i) {
    r = std::round(lrfu_update(r, att[i], 0.05) * 1000.0) / 1000.0;
    EXPECT_DOUBLE_EQ(r, rounded[i]);
  }
}

TEST(Lrfu, BlocksAAndB) {
  LrfuParams p;  // alpha 0.05, beta 0.001
  EXPECT_NEAR(lrfu_recency_decay(50, 0.001), 0.048771, 5e-7);
  EXPECT_NEAR(lrfu_priority(0.059, 50, p), 0.045893, 5e-7);
  EXPECT_NEAR(lrfu_recency_decay(2000, 0.001), 0.864665, 5e-7);
  EXPECT_NEAR(lrfu_priority(0.02, 2000, p), 0.847371, 5e-7);
  EXPECT_GT(lrfu_priority(0.02, 2000, p), lrfu_priority(0.059, 50, p));  // B is evicted, A kept
  EXPECT_NEAR(lrfu_half_life(0.05), 13.513, 1e-3);
}

TEST(Lrfu, ParametersValidated) {
  for (double a : {0.0, -0.1, 1.0000001, std::nan("")}) {
    LrfuParams p;
    p.alpha = a;
    EXPECT_THROW(p.validate(), Error) << a;
  }
  for (double b : {-1e-9, std::nan(""), static_cast<double>(INFINITY)}) {
    LrfuParams p;
    p.beta = b;
    EXPECT_THROW(p.validate(), Error) << b;
  }
  LrfuParams ok;
  ok.alpha = 1.0;
  ok.beta = 0.0;
  EXPECT_NO_THROW(ok.validate());
}

TEST(Lrfu, UntouchedStepsPerMode) {
  LrfuParams touch, decay;
  decay.mode = ScoreMode::decay;
  // touch: the score does not move while idle; decay: (1-alpha)^idle.
  EXPECT_DOUBLE_EQ(lrfu_effective_score(0.5, 10, touch), 0.5);
  EXPECT_NEAR(lrfu_effective_score(0.5, 10, decay), 0.5 * std::pow(0.95, 10), 1e-15);
  // decay mode equals applying the per-step formula with attention 0 on every idle step.
  double s = 0.5;
  for (int i = 0; i < 10; ++i) s = lrfu_update(s, 0.0, 0.05);
  EXPECT_NEAR(lrfu_effective_score(0.5, 10, decay), s, 1e-15);
  // An access after 10 idle steps in decay mode equals the per-step formula on every step.
  double d = 0.5;
  for (int i = 0; i < 9; ++i) d = lrfu_update(d, 0.0, 0.05);
  d = lrfu_update(d, 0.7, 0.05);
  EXPECT_NEAR(lrfu_access(0.5, 10, 0.7, decay), d, 1e-15);
  EXPECT_DOUBLE_EQ(lrfu_access(0.5, 10, 0.7, touch), lrfu_update(0.5, 0.7, 0.05));
  EXPECT_DOUBLE_EQ(lrfu_access(0.5, 0, 0.7, decay), lrfu_update(0.5, 0.7, 0.05));
  // beta = 0 leaves (1 - score) alone.
  LrfuParams b0;
  b0.beta = 0.0;
  EXPECT_DOUBLE_EQ(lrfu_priority(0.25, 12345, b0), 0.75);
}

// The index's exact bounds rest on this: recency never decreases with idle steps, to the last
// bit, and is exactly 1.0 from beta * d = kRecencySaturation on.
TEST(Lrfu, RecencyIsMonotoneAndSaturatesAtExactlyOne) {
  for (double beta : {1e-4, 0.001, 0.01, 0.1, 1.0, 5.0}) {
    double prev = 0.0;
    const auto last = static_cast<uint64_t>(2.0 * kRecencySaturation / beta);
    for (uint64_t d = 0; d <= last; ++d) {
      const double r = lrfu_recency_decay(d, beta);
      ASSERT_GE(r, prev) << "beta " << beta << " d " << d;
      ASSERT_LE(r, 1.0);
      if (beta * static_cast<double>(d) >= kRecencySaturation) {
        ASSERT_EQ(r, 1.0) << "beta " << beta << " d " << d;
      }
      prev = r;
    }
  }
  EXPECT_EQ(lrfu_recency_decay(UINT64_MAX, 1e-9), 1.0);
}

TEST(Lrfu, BatchedUpdateMatchesScalar) {
  std::vector<double> a(1000), b(1000);
  std::vector<float> att(1000);
  std::mt19937_64 rng(1);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = b[i] = (rng() % 1000) / 1000.0;
    att[i] = static_cast<float>((rng() % 1000) / 1000.0);
  }
  lrfu_update_batch(a.data(), att.data(), a.size(), 0.05);
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(a[i], lrfu_update(b[i], att[i], 0.05));
}

// --- The auditor --------------------------------------------------------------------------
namespace {

struct Scenario {
  const char *name;
  double alpha;
  double beta;
  ScoreMode mode;
  int attention_kind;  // 0 random, 1 always 1.0, 2 mostly 0, 3 two levels
  unsigned buckets;
  size_t max_blocks;
  double touch_fraction;  // blocks touched per step
  bool pins;
  // Of the admissions, the share that stays in the step before it (a replayed request's misses
  // are evicted for at one step, and the searches reuse the bounds they computed at it).
  double same_step = 0.2;
  // Each step touches every resident once, in random order, before the fraction above (an
  // engine's decode step over the blocks of its running batch): nearly every block is pending
  // at each search.
  bool every_resident = false;
  // The index's upkeep (a rebuild in pieces, as a runtime's mover makes it) between
  // accesses, admissions, evictions and decisions, often left part-way when one of them comes.
  bool upkeep = false;
};

struct Sim {
  const Scenario &sc;
  std::mt19937_64 rng;
  LrfuIndex index;
  std::vector<PolicyState> st;
  std::vector<Key> keys;
  std::vector<uint8_t> resident, pinned;
  std::vector<uint32_t> residents;
  uint64_t now = 1;
  uint64_t decisions = 0;

  // working_set: how many distinct blocks the workload references (default: 4x the capacity).
  Sim(const Scenario &s, uint64_t seed, size_t working_set = 0)
      : sc(s), rng(seed), index(LrfuParams{s.alpha, s.beta, s.mode}, s.buckets, false) {
    size_t ids = working_set ? working_set : s.max_blocks * 4;
    index.reserve_ids(ids);
    st.resize(ids);
    keys.resize(ids);
    resident.assign(ids, 0);
    pinned.assign(ids, 0);
    for (size_t i = 0; i < ids; ++i) keys[i] = Key{rng() % 4, rng()};  // small hi: key ties on hi
    if (s.upkeep) index.set_upkeep_min_live(0);
  }
  // A few pieces of upkeep, small ones, now and then.
  void maybe_upkeep() {
    if (!sc.upkeep || rng() % 4 != 0) return;
    for (unsigned k = 1 + static_cast<unsigned>(rng() % 3); k-- > 0;)
      if (!index.upkeep(1 + rng() % 48)) break;
  }
  float attention() {
    switch (sc.attention_kind) {
      case 1: return 1.0f;
      case 2: return (rng() % 10 == 0) ? static_cast<float>((rng() % 100) / 100.0) : 0.0f;
      case 3: return (rng() % 2) ? 0.5f : 0.25f;
      default: return static_cast<float>((rng() % 100001) / 100000.0);
    }
  }
  void access(uint32_t id) {
    PolicyState &s = st[id];
    s.score = lrfu_access(s.score, now - s.last_access, attention(), index_params());
    s.last_access = now;
    ++s.accesses;
    index.access(id, s);
    maybe_upkeep();
  }
  LrfuParams index_params() const { return LrfuParams{sc.alpha, sc.beta, sc.mode}; }
  void admit(uint32_t id) {
    resident[id] = 1;
    residents.push_back(id);
    st[id].last_access = now;  // admission counts as a reference for recency
    maybe_upkeep();
    index.insert(id, keys[id], st[id]);
  }
  void remove_at(size_t pos) {
    uint32_t id = residents[pos];
    residents[pos] = residents.back();
    residents.pop_back();
    resident[id] = 0;
    pinned[id] = 0;
    index.erase(id, EraseReason::evicted);
  }
  static bool not_pinned(const void *ctx, NodeId id) noexcept {
    return !static_cast<const Sim *>(ctx)->pinned[id];
  }
  // One decision: both must agree. Returns false on a disagreement.
  bool decide() {
    maybe_upkeep();
    Eligible el{sc.pins ? &Sim::not_pinned : nullptr, this};
    NodeId fast = index.victim(now, el);
    NodeId slow = index.victim_bruteforce(now, el);
    ++decisions;
    if (fast != slow) {
      ADD_FAILURE() << sc.name << ": index chose " << fast << ", brute force " << slow << " at step " << now
                    << " with " << residents.size() << " residents";
      return false;
    }
    // With upkeep, the structure after a search (which completed any part-way rebuild) now and
    // then: the brute force reads the index's own live list, so a block lost from it and from
    // the heaps would not show in a decision.
    if (sc.upkeep && decisions % 64 == 0) {
      if (index.size() != residents.size()) {
        ADD_FAILURE() << sc.name << ": the index holds " << index.size() << " blocks, the test " << residents.size();
        return false;
      }
      const std::string v = index.validate();
      if (!v.empty()) {
        ADD_FAILURE() << sc.name << ": " << v;
        return false;
      }
    }
    return true;
  }
  bool run(uint64_t target_decisions) {
    while (decisions < target_decisions) {
      // Admit until full; evict by decision when full.
      uint32_t id = static_cast<uint32_t>(rng() % st.size());
      if (!resident[id]) {
        if (residents.size() >= sc.max_blocks) {
          if (!decide()) return false;
          Eligible el{sc.pins ? &Sim::not_pinned : nullptr, this};
          NodeId v = index.victim(now, el);
          if (v != kNoNode) {
            for (size_t i = 0; i < residents.size(); ++i)
              if (residents[i] == v) { remove_at(i); break; }
          } else {
            continue;
          }
        }
        admit(id);
      }
      // A decode step: touch a fraction of residents (same step for all of them).
      if (sc.every_resident) {
        std::vector<uint32_t> order = residents;
        std::shuffle(order.begin(), order.end(), rng);
        for (uint32_t r : order) access(r);
      }
      size_t touches = static_cast<size_t>(sc.touch_fraction * static_cast<double>(residents.size())) + (rng() % 2);
      for (size_t k = 0; k < touches && !residents.empty(); ++k) access(residents[rng() % residents.size()]);
      if (sc.pins) {
        for (int k = 0; k < 3 && !residents.empty(); ++k) {
          uint32_t p = residents[rng() % residents.size()];
          pinned[p] = !pinned[p];
        }
      }
      if (rng() % 7 == 0 && !residents.empty()) remove_at(rng() % residents.size());  // releases
      if (!decide()) return false;
      // Time moves by 0 (several admissions in one step), 1, or a jump.
      // The rest: one step on in 7 of 8, else a jump.
      const double r = static_cast<double>(rng() % 1000) / 1000.0;
      now += r < sc.same_step ? 0 : (r < sc.same_step + 0.875 * (1.0 - sc.same_step) ? 1 : 1 + rng() % 5000);
    }
    std::string v = index.validate();
    EXPECT_EQ(v, "") << sc.name;
    return v.empty();
  }
};

// Decisions the auditor compares: at least a million in a normal build. Sanitizers make each
// one 10-30x slower (about 30 s becomes 10 minutes), so their builds check a tenth: the same
// scenarios, the same code paths, fewer repetitions (docs/reliability.md).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr uint64_t kAuditDecisions = 100000;
#else
constexpr uint64_t kAuditDecisions = 1000000;
#endif

}  // namespace

TEST(LrfuIndex, AuditorAgreesOnMillionsOfDecisions) {
  const Scenario scenarios[] = {
      {"default", 0.05, 0.001, ScoreMode::touch, 0, 256, 300, 0.2, false},
      {"default-pins", 0.05, 0.001, ScoreMode::touch, 0, 256, 300, 0.2, true},
      {"attention-1.0-ties", 0.05, 0.001, ScoreMode::touch, 1, 256, 300, 0.1, false},
      {"mostly-zero", 0.05, 0.01, ScoreMode::touch, 2, 64, 200, 0.5, true},
      {"two-levels", 0.3, 0.5, ScoreMode::touch, 3, 16, 150, 0.3, false},
      {"beta0-touch", 0.05, 0.0, ScoreMode::touch, 0, 256, 300, 0.2, true},
      {"beta0-touch-ties", 0.1, 0.0, ScoreMode::touch, 1, 256, 200, 0.05, false},
      {"beta0-decay", 0.05, 0.0, ScoreMode::decay, 0, 256, 300, 0.2, true},
      {"decay", 0.05, 0.001, ScoreMode::decay, 0, 128, 300, 0.2, false},
      {"decay-ties", 0.2, 0.02, ScoreMode::decay, 1, 32, 200, 0.1, true},
      {"tiny-beta", 0.01, 1e-9, ScoreMode::touch, 0, 256, 250, 0.2, false},
      {"large-beta", 0.5, 5.0, ScoreMode::touch, 0, 256, 250, 0.2, true},
      {"alpha-1", 1.0, 0.001, ScoreMode::touch, 0, 1, 200, 0.3, false},
      {"alpha-1-ones", 1.0, 0.01, ScoreMode::touch, 1, 4, 200, 0.3, true},
      {"one-bucket", 0.05, 0.001, ScoreMode::touch, 0, 1, 300, 0.2, false},
      {"many-blocks", 0.05, 0.001, ScoreMode::touch, 0, 1024, 3000, 0.05, true},
      {"same-step", 0.05, 0.001, ScoreMode::touch, 0, 256, 300, 0.02, true, 0.97},
      {"same-step-decay", 0.05, 0.01, ScoreMode::decay, 0, 1024, 1000, 0.02, false, 0.97},
      {"every-block-a-step", 0.05, 0.001, ScoreMode::touch, 0, 256, 600, 0.0, false, 0.2, true},
      {"every-block-pins", 0.05, 0.001, ScoreMode::touch, 0, 64, 300, 0.1, true, 0.5, true},
      {"every-block-decay", 0.05, 0.01, ScoreMode::decay, 0, 256, 500, 0.0, false, 0.2, true},
      {"every-block-beta0", 0.05, 0.0, ScoreMode::touch, 0, 256, 500, 0.0, true, 0.2, true},
  };
  uint64_t total = 0;
  const uint64_t per = kAuditDecisions / (sizeof scenarios / sizeof scenarios[0]) + 1;
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; ++i) {
    Sim sim(scenarios[i], 1000 + i);
    uint64_t target = scenarios[i].max_blocks > 1000 ? per / 4 : per;
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(sim.run(target)) << scenarios[i].name;
    std::printf("%-20s %8llu decisions %6.2f s, examined/victim %.1f\n", scenarios[i].name,
                static_cast<unsigned long long>(sim.decisions),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                double(sim.index.stats().entries_examined) / double(std::max<uint64_t>(1, sim.index.stats().victims)));
    total += sim.decisions;
    EXPECT_EQ(sim.index.stats().audit_disagreements, 0u);
  }
  // The remaining budget on the default scenario so the total is >= kAuditDecisions.
  if (total < kAuditDecisions) {
    Sim sim(scenarios[0], 99);
    ASSERT_TRUE(sim.run(kAuditDecisions - total));
    total += sim.decisions;
  }
  EXPECT_GE(total, kAuditDecisions);
  std::printf("auditor decisions compared: %llu, disagreements: 0\n", static_cast<unsigned long long>(total));
}

// Ties at scale: attention 1.0 or two levels (scores take a few discrete values), beta large
// enough that 1 - exp(-beta d) rounds to exactly 1.0 after tens to hundreds of idle steps (then
// every old block of one score has the same priority), most residents touched every step, and
// capacities from 1 % to 200 % of the working set. The auditor must agree on every decision,
// and ties must be settled by the tie-break rather than by visiting the tied blocks: the
// entries examined per victim stay small while the residents number in the thousands.
TEST(LrfuIndex, TieHeavyWorkloadsAgreeAndDoNotWalkTies) {
  struct Case {
    Scenario sc;
    double capacity_fraction;  // of the working set
  };
  constexpr size_t kWorkingSet = 4000;
  const Case cases[] = {
      {{"ones-beta0.1-1%", 0.5, 0.1, ScoreMode::touch, 1, 256, 0, 0.5, false}, 0.01},
      {{"ones-beta0.1-10%", 0.5, 0.1, ScoreMode::touch, 1, 256, 0, 0.5, false}, 0.10},
      {{"ones-beta0.1-50%", 0.5, 0.1, ScoreMode::touch, 1, 256, 0, 0.8, true}, 0.50},
      {{"ones-beta1-100%", 0.2, 1.0, ScoreMode::touch, 1, 256, 0, 0.3, false}, 1.00},
      {{"two-levels-beta5-200%", 0.3, 5.0, ScoreMode::touch, 3, 256, 0, 1.0, true}, 2.00},
      {{"ones-beta0.5-decay-20%", 0.1, 0.5, ScoreMode::decay, 1, 256, 0, 0.5, false}, 0.20},
      {{"two-levels-beta0.1-5%", 0.05, 0.1, ScoreMode::touch, 3, 64, 0, 0.9, true}, 0.05},
      // Few touches per step (a replay's pattern): most residents idle past saturation.
      {{"ones-beta0.1-sparse-25%", 0.5, 0.1, ScoreMode::touch, 1, 256, 0, 0.01, false}, 0.25},
      {{"ones-beta0.1-sparse-100%", 0.5, 0.1, ScoreMode::touch, 1, 256, 0, 0.01, true}, 1.00},
      // Dozens of evictions a step, as a replayed request's misses: kept bounds, refreshed
      // records.
      {{"ones-beta0.1-same-step-10%", 0.5, 0.1, ScoreMode::touch, 1, 256, 0, 0.01, true, 0.97}, 0.10},
      // Every resident touched every step (an engine's decode step), tied scores.
      {{"ones-beta0.1-every-block-50%", 0.5, 0.1, ScoreMode::touch, 1, 256, 0, 0.0, true, 0.2, true}, 0.50},
      {{"two-levels-beta1-every-block-150%", 0.3, 1.0, ScoreMode::touch, 3, 256, 0, 0.0, false, 0.2, true}, 1.50},
      // Scores that seldom repeat (random attention): buckets hold ranges of scores, and their
      // idle blocks leave them for the saturated heap.
      {{"random-beta0.1-sparse-25%", 0.5, 0.1, ScoreMode::touch, 0, 256, 0, 0.01, false}, 0.25},
      {{"random-beta1-same-step-100%", 0.2, 1.0, ScoreMode::touch, 0, 64, 0, 0.01, true, 0.97}, 1.00},
  };
  const uint64_t per = kAuditDecisions / 60;  // the auditor scans thousands of residents per decision
  for (const Case &c : cases) {
    Scenario sc = c.sc;
    sc.max_blocks = std::max<size_t>(1, static_cast<size_t>(c.capacity_fraction * kWorkingSet));
    Sim sim(sc, 4242, kWorkingSet);
    // A step that touches every resident costs thousands of accesses: fewer decisions there.
    ASSERT_TRUE(sim.run(sc.every_resident ? per / 4 : per)) << sc.name;
    EXPECT_EQ(sim.index.stats().audit_disagreements, 0u);
    const double examined = double(sim.index.stats().entries_examined) / double(std::max<uint64_t>(1, sim.index.stats().victims));
    std::printf("%-24s %5zu residents max, %8llu decisions, examined/victim %.1f, level refits %llu, saturated moves %llu, kept %llu\n",
                sc.name, sc.max_blocks, static_cast<unsigned long long>(sim.decisions), examined,
                static_cast<unsigned long long>(sim.index.stats().level_refits),
                static_cast<unsigned long long>(sim.index.stats().saturated_moves),
                static_cast<unsigned long long>(sim.index.stats().saturated_kept));
    EXPECT_LT(examined, 32.0) << sc.name << ": the victim search visits tied blocks";
    // Touch mode with a saturating beta and scores that seldom repeat: idle blocks leave their
    // buckets for the saturated heap. Scores on a few levels, each with a bucket of its own:
    // the buckets keep them (their bounds are exact), and searches read them there.
    if (sc.mode == ScoreMode::touch && sc.attention_kind == 0) {
      EXPECT_GT(sim.index.stats().saturated_moves, 0u) << sc.name;
    }
    if (sc.mode == ScoreMode::touch && sc.attention_kind != 0 && !sc.every_resident) {
      EXPECT_GT(sim.index.stats().saturated_kept, 0u) << sc.name;
    }
    // Attention 1.0 gives few distinct scores: each gets a bucket, refitted when a new one shows
    // up, and at most once per bucket pair before the edges fall back to quantiles for good.
    if (sc.attention_kind == 1 && sc.mode == ScoreMode::touch) {
      EXPECT_GT(sim.index.stats().level_refits, 0u) << sc.name;
    }
    EXPECT_LE(sim.index.stats().level_refits, sc.buckets / 2 + 1) << sc.name;
  }
}

// Saturated blocks where priorities tie across scores: 1 - s is exactly 1.0 for s = 0, -0.0,
// 1e-17 or the smallest subnormal, and exactly 1 - v for v and the next double above it, so
// blocks of one-score buckets, of buckets of a range and of the saturated heap tie and are
// ordered by the tie-break alone. States are set directly (any score in [0, 1]), beta saturates
// within a few to a few hundred idle steps, blocks are pinned and unpinned (not eligible), time
// jumps, and upkeep runs in pieces in half the runs. Every victim must be the auditor's, and the
// structure must check after every 500 operations.
TEST(LrfuIndex, SaturatedTiesAcrossScoresAgreeWithTheAuditor) {
  const double pool[] = {0.0, -0.0, 1e-17, 3e-17, 4.9e-324, 0.25, 0.5, std::nextafter(0.5, 1.0), 0.75, 0.9375,
                         1.0 - 1e-17, 0.1, std::nextafter(0.1, 0.0)};
  constexpr size_t kPool = sizeof pool / sizeof pool[0];
  struct Pins {
    std::vector<uint8_t> pinned;
    bool on = false;
  };
  auto eligible = [](const void *ctx, NodeId id) noexcept {
    const Pins &p = *static_cast<const Pins *>(ctx);
    return !p.on || p.pinned[id] == 0;
  };
  uint64_t decisions = 0, kept = 0, moved = 0;
  for (int seed = 0; seed < 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    const double alphas[] = {0.5, 0.2, 1.0};
    const double betas[] = {1.0, 5.0, 0.1, 0.5};
    const unsigned buckets[] = {4, 16, 64, 256};
    const LrfuParams params{alphas[rng() % 3], betas[rng() % 4], ScoreMode::touch};
    const unsigned nb = buckets[rng() % 4];
    // 0: scores from the pool; 1: mostly one score, else random; 2: half pool, half random;
    // 3: mostly scores whose priority is exactly 1.0.
    const int style = static_cast<int>(rng() % 4);
    const size_t capacity = 20 + rng() % 600, ids = capacity * 3;
    const bool upkeep = rng() % 2 != 0;
    Pins pins;
    pins.on = rng() % 2 != 0;
    pins.pinned.assign(ids, 0);
    LrfuIndex index(params, nb, false);
    index.reserve_ids(ids);
    if (upkeep) index.set_upkeep_min_live(0);
    std::vector<PolicyState> st(ids);
    std::vector<Key> keys(ids);
    std::vector<uint8_t> resident(ids, 0);
    std::vector<uint32_t> live;
    std::vector<uint64_t> order(ids);
    for (size_t i = 0; i < ids; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < ids; ++i) keys[i] = Key{order[i] % 2, order[i]};
    const double common = pool[rng() % kPool];
    auto score = [&]() -> double {
      switch (style) {
        case 0: return pool[rng() % kPool];
        case 1: return rng() % 3 != 0 ? common : static_cast<double>(rng() % 100000) / 100000.0;
        case 2: return rng() % 2 != 0 ? pool[rng() % kPool] : static_cast<double>(rng() % 100000) / 100000.0;
        default: {
          const double ones[] = {0.0, -0.0, 1e-17, 4.9e-324, 2e-16};
          return rng() % 8 != 0 ? ones[rng() % 5] : static_cast<double>(rng() % 1000) / 1000.0;
        }
      }
    };
    const Eligible el{eligible, &pins};
    uint64_t now = 1;
    auto check = [&]() {
      const NodeId v = index.victim(now, el);
      ++decisions;
      EXPECT_EQ(v, index.victim_bruteforce(now, el)) << "at step " << now;
      return v;
    };
    auto remove = [&](uint32_t id) {
      live.erase(std::find(live.begin(), live.end(), id));
      resident[id] = 0;
      pins.pinned[id] = 0;
      index.erase(id, EraseReason::evicted);
    };
    for (int op = 0; op < 6000 && !HasFailure(); ++op) {
      const unsigned r = static_cast<unsigned>(rng() % 100);
      if (r < 30) {  // an admission, evicting the victim when full
        const auto id = static_cast<uint32_t>(rng() % ids);
        if (resident[id]) continue;
        if (live.size() >= capacity) {
          const NodeId v = check();
          if (v == kNoNode) continue;
          remove(v);
        }
        st[id] = PolicyState{score(), now, 1, 0};
        resident[id] = 1;
        live.push_back(id);
        index.insert(id, keys[id], st[id]);
      } else if (r < 65) {  // an access: a new score, now
        if (live.empty()) continue;
        const uint32_t id = live[rng() % live.size()];
        st[id].score = score();
        st[id].last_access = now;
        index.access(id, st[id]);
      } else if (r < 70) {
        if (!live.empty()) remove(live[rng() % live.size()]);
      } else if (r < 80) {
        check();
      } else if (r < 85) {
        if (!live.empty()) pins.pinned[live[rng() % live.size()]] ^= 1;
      } else if (r < 90) {
        if (upkeep)
          for (int k = 0; k < 3 && index.upkeep(1 + rng() % 64); ++k) {
          }
      } else {
        const unsigned j = static_cast<unsigned>(rng() % 10);
        now += j < 5 ? 1 : (j < 8 ? 0 : rng() % 400);
      }
      if (op % 500 == 499) {
        check();  // completes a rebuild upkeep began
        ASSERT_EQ(index.validate(), "") << "after operation " << op;
      }
    }
    kept += index.stats().saturated_kept;
    moved += index.stats().saturated_moves;
  }
  std::printf("%llu decisions, saturated roots kept in one-score buckets %llu, moved to the saturated heap %llu\n",
              static_cast<unsigned long long>(decisions), static_cast<unsigned long long>(kept),
              static_cast<unsigned long long>(moved));
  EXPECT_GT(kept, 0u);
  EXPECT_GT(moved, 0u);
}

// The upkeep a runtime's mover makes in pieces, with the lock handed to engine threads between
// them: accesses, admissions and evictions come while a rebuild is part-way (blocks placed
// already become pending again, blocks not yet placed are placed as they are then, the placed
// ones stay first in the live list), and a search completes it first. The auditor must agree
// on every decision, on the scenarios above and tie-heavy ones.
TEST(LrfuIndex, UpkeepInPiecesKeepsVictimsExact) {
  const Scenario scenarios[] = {
      {"upkeep-default", 0.05, 0.001, ScoreMode::touch, 0, 256, 300, 0.2, true},
      {"upkeep-ones-ties", 0.05, 0.001, ScoreMode::touch, 1, 256, 300, 0.1, false},
      {"upkeep-two-levels", 0.3, 0.5, ScoreMode::touch, 3, 16, 150, 0.3, true},
      {"upkeep-beta0", 0.05, 0.0, ScoreMode::touch, 0, 256, 300, 0.2, true},
      {"upkeep-beta0-ties", 0.1, 0.0, ScoreMode::touch, 1, 256, 200, 0.05, false},
      {"upkeep-decay", 0.05, 0.01, ScoreMode::decay, 0, 128, 300, 0.2, true},
      {"upkeep-large-beta", 0.5, 5.0, ScoreMode::touch, 0, 256, 250, 0.2, false},
      {"upkeep-ones-beta0.1", 0.5, 0.1, ScoreMode::touch, 1, 256, 400, 0.5, true},
      {"upkeep-every-block", 0.05, 0.001, ScoreMode::touch, 0, 256, 500, 0.0, true, 0.2, true},
      {"upkeep-every-block-ties", 0.3, 1.0, ScoreMode::touch, 3, 256, 400, 0.0, false, 0.2, true},
      {"upkeep-every-block-beta0", 0.05, 0.0, ScoreMode::touch, 1, 64, 300, 0.1, true, 0.5, true},
  };
  const uint64_t per = kAuditDecisions / 4 / (sizeof scenarios / sizeof scenarios[0]) + 1;
  uint64_t rebuilds = 0, completed = 0;
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; ++i) {
    Scenario sc = scenarios[i];
    sc.upkeep = true;
    Sim sim(sc, 5000 + i);
    ASSERT_TRUE(sim.run(sc.every_resident ? per / 4 : per)) << sc.name;
    const LrfuIndex::Stats &st = sim.index.stats();
    EXPECT_EQ(st.audit_disagreements, 0u);
    std::printf("%-26s %7llu decisions, upkeep: %llu rebuilds (%llu completed by another call)\n", sc.name,
                static_cast<unsigned long long>(sim.decisions), static_cast<unsigned long long>(st.upkeep_rebuilds),
                static_cast<unsigned long long>(st.upkeep_completed));
    rebuilds += st.upkeep_rebuilds;
    completed += st.upkeep_completed;
  }
  // Each path ran: rebuilds begun by upkeep, some of them completed by another call part-way.
  EXPECT_GT(rebuilds, 0u);
  EXPECT_GT(completed, 0u);
}

TEST(LrfuIndex, LiveAuditCountsNoDisagreement) {
  Scenario sc{"audit", 0.05, 0.001, ScoreMode::touch, 0, 256, 100, 0.2, false};
  Sim sim(sc, 7);
  LrfuIndex audited(LrfuParams{}, 256, true);
  audited.reserve_ids(16);
  for (NodeId i = 0; i < 8; ++i) {
    PolicyState s;
    s.score = 0.1 * i;
    s.last_access = i;
    audited.insert(i, Key{0, i}, s);
  }
  NodeId v = audited.victim(100, Eligible::all());
  EXPECT_EQ(v, 0u);  // lowest score, oldest
  EXPECT_EQ(audited.stats().audits, 1u);
  EXPECT_EQ(audited.stats().audit_disagreements, 0u);
}

TEST(LrfuIndex, TieBreaksAreDeterministic) {
  LrfuIndex idx(LrfuParams{}, 256, false);
  idx.reserve_ids(8);
  PolicyState s;
  s.score = 0.1;
  s.last_access = 5;
  idx.insert(3, Key{0, 9}, s);
  idx.insert(1, Key{0, 2}, s);
  idx.insert(2, Key{0, 4}, s);
  EXPECT_EQ(idx.victim(50, Eligible::all()), 1u);  // equal priority, equal step and score: smaller key
  PolicyState older = s;
  older.last_access = 4;
  older.score = 0.1 + 1e-3;  // slightly hotter but older: recency order compares priority first
  idx.insert(4, Key{0, 1}, older);
  NodeId v = idx.victim(50, Eligible::all());
  EXPECT_EQ(v, idx.victim_bruteforce(50, Eligible::all()));
}

// The pending list is full when blocks are erased, admitted again and accessed between victim
// searches (each such access takes a new place). Whether the index applies an access whole
// (access) or split (access_own, then note_pending and note_pending_bound, as the runtime's
// parallel drain does), the flush that makes room must leave every block with exactly one live
// entry and the victims those of a full scan.
TEST(LrfuIndex, FullPendingListKeepsVictimsExact) {
  for (bool split : {false, true}) {
    std::mt19937_64 rng(split ? 11 : 12);
    const LrfuParams params{0.2, 0.01, ScoreMode::touch};
    LrfuIndex idx(params, 16, false);
    constexpr NodeId kIds = 8;
    idx.reserve_ids(kIds);  // the pending list holds 8 places
    std::vector<PolicyState> st(kIds);
    std::vector<uint8_t> live(kIds, 0);
    uint64_t now = 1;
    for (NodeId id = 0; id < 4; ++id) {
      st[id].last_access = now;
      idx.insert(id, Key{0, id}, st[id]);
      live[id] = 1;
    }
    for (int round = 0; round < 4000; ++round) {
      const NodeId id = static_cast<NodeId>(rng() % kIds);
      if (live[id] && rng() % 2) {
        idx.erase(id, EraseReason::evicted);
        live[id] = 0;
      }
      if (!live[id]) {
        st[id].last_access = now;
        idx.insert(id, Key{0, id}, st[id]);
        live[id] = 1;
      }
      st[id].score = lrfu_access(st[id].score, now - st[id].last_access, static_cast<float>(rng() % 100) / 100.0f, params);
      st[id].last_access = now;
      if (split) {
        idx.prepare_access_own(1);
        if (idx.access_own(id, st[id])) idx.note_pending(id);
        idx.note_pending_bound(st[id].score, st[id].last_access);
      } else {
        idx.access(id, st[id]);
      }
      now += rng() % 3;
      if (rng() % 16 == 0) {  // a search now and then, most rounds without one
        ASSERT_EQ(idx.victim(now, Eligible::all()), idx.victim_bruteforce(now, Eligible::all())) << round;
        ASSERT_EQ(idx.validate(), "") << round;
      }
    }
    EXPECT_EQ(idx.victim(now, Eligible::all()), idx.victim_bruteforce(now, Eligible::all()));
    EXPECT_EQ(idx.validate(), "") << (split ? "split" : "whole");
  }
}

// Scores that rarely repeat (random attention) spread over every bucket once the edges are
// fitted: a one-value bucket only for a value a bucket's share of blocks hold. (Giving every
// quantile one had left the upper half of the scores in the last bucket, which then counted
// as lopsided at every check and had its edges moved again every fourth rebuild.) Each step
// touches every block, so each search rebuilds the index.
TEST(LrfuIndex, EdgesSpreadScoresThatRarelyRepeat) {
  std::mt19937_64 rng(5);
  const LrfuParams params{0.05, 0.001, ScoreMode::touch};
  LrfuIndex idx(params, 256, false);
  constexpr NodeId kBlocks = 4096;
  idx.reserve_ids(kBlocks);
  std::vector<PolicyState> st(kBlocks);
  uint64_t now = 1;
  for (NodeId id = 0; id < kBlocks; ++id) {
    st[id].last_access = now;
    idx.insert(id, Key{0, id}, st[id]);
  }
  auto step = [&] {
    for (NodeId id = 0; id < kBlocks; ++id) {
      st[id].score = lrfu_access(st[id].score, now - st[id].last_access, static_cast<float>(rng() % 100001) / 100000.0f, params);
      st[id].last_access = now;
      idx.access(id, st[id]);
    }
    ++now;
  };
  // Until the scores' distribution has settled (about 1 / alpha steps each way), then a search.
  for (int i = 0; i < 200; ++i) step();
  ASSERT_EQ(idx.victim(now, Eligible::all()), idx.victim_bruteforce(now, Eligible::all()));
  const uint64_t moves = idx.stats().edge_moves, rebuilds = idx.stats().compactions;
  constexpr int kSteps = 64;
  for (int i = 0; i < kSteps; ++i) {
    step();
    ASSERT_EQ(idx.victim(now, Eligible::all()), idx.victim_bruteforce(now, Eligible::all())) << i;
  }
  EXPECT_EQ(idx.validate(), "");
  EXPECT_GE(idx.stats().compactions - rebuilds, static_cast<uint64_t>(kSteps));  // a rebuild a step
  // Edges that fit are not moved again while the distribution holds (those that did not fit
  // were moved at every fourth rebuild, 16 times here).
  EXPECT_LE(idx.stats().edge_moves - moves, 2u);
}

// A score of -0.0 (a checkpoint file may hold one) is the lowest score there is. Its sign bit
// must not send it to the top bucket, whose lower edge would then bound its priority far below
// what it is, so that the search would pass it by.
TEST(LrfuIndex, NegativeZeroScoreIsTheLowest) {
  const LrfuParams params{0.05, 0.001, ScoreMode::touch};
  LrfuIndex idx(params, 256, false);
  constexpr NodeId kBlocks = 64;
  idx.reserve_ids(kBlocks);
  for (NodeId id = 0; id + 1 < kBlocks; ++id) {
    PolicyState st;
    st.score = static_cast<double>(id + 1) / kBlocks;
    st.last_access = 1;
    idx.insert(id, Key{0, id}, st);
  }
  PolicyState zero;
  zero.score = -0.0;
  zero.last_access = 1;
  idx.insert(kBlocks - 1, Key{0, kBlocks - 1}, zero);
  EXPECT_EQ(idx.validate(), "");
  EXPECT_EQ(idx.victim_bruteforce(2, Eligible::all()), kBlocks - 1);
  EXPECT_EQ(idx.victim(2, Eligible::all()), kBlocks - 1);
}

// A record names its owner in 15 bits: the records refuse an index past the last tag rather
// than give two indexes one tag, and an index refused there is not attached.
TEST(LrfuIndex, OwnerTagsRunOutWithAnError) {
  auto shared = std::make_shared<LrfuIdRecords>();
  const LrfuParams params{0.1, 0.01, ScoreMode::touch};
  // Declared before the indexes, so that they detach before the views go; the views stay
  // attached (each detach scans the list) and the records do not grow after they are made.
  std::vector<LrfuIdView> views(LrfuIdRecord::kMaxOwner - 3);
  std::vector<std::unique_ptr<LrfuIndex>> kept;
  for (int i = 0; i < 3; ++i) kept.push_back(std::make_unique<LrfuIndex>(params, 16, false, shared));
  for (auto &ix : kept) ix->reserve_ids(8);
  uint16_t last = 0;
  for (LrfuIdView &v : views) last = shared->attach(&v);
  EXPECT_EQ(last, LrfuIdRecord::kMaxOwner);
  EXPECT_EQ(views.back().size(), 8u);  // attached: it sees the records
  EXPECT_THROW(std::make_unique<LrfuIndex>(params, 16, false, shared), std::length_error);
  // The indexes attached first still work on the shared records, each as the owner of its own.
  kept[0]->insert(1, Key{0, 1}, PolicyState{0.5, 1, 1, 1});
  kept[1]->insert(2, Key{0, 2}, PolicyState{0.25, 1, 1, 2});
  EXPECT_EQ(kept[0]->victim(2, Eligible::all()), 1u);
  EXPECT_EQ(kept[1]->victim(2, Eligible::all()), 2u);
  for (auto &ix : kept) EXPECT_EQ(ix->validate(), "");
}

// The tiers of a runtime share one per-id record array (lrfu_id_records.hpp). Blocks move down
// a cascade of three tiers' indexes and back up, are accessed whole or split, and leave; each
// index must keep choosing what a full scan of its own blocks chooses, and none may act on a
// record another index owns (the places left in its pending list included).
TEST(LrfuIndex, TiersSharingRecordsKeepEachVictimExact) {
  // The states live in 64-byte lines, as a score store keeps them. With `external`, the
  // indexes read each id's score and last access there and keep its stamp there (as the
  // runtime's do) instead of in the records' own arrays, and the lines move to a new array
  // halfway, republished.
  struct Line {
    Key key;
    PolicyState st;
    uint32_t stamp;
    uint32_t pad[3];
  };
  static_assert(sizeof(Line) == 64);
  for (int mode = 0; mode < 4; ++mode) {
    const bool split = (mode & 1) != 0, external = (mode & 2) != 0;
    SCOPED_TRACE(std::string(split ? "split" : "whole") + (external ? ", external states" : ", own states"));
    std::mt19937_64 rng(split ? 21 : 22);
    const LrfuParams params{0.1, 0.01, ScoreMode::touch};
    auto shared = std::make_shared<LrfuIdRecords>();
    constexpr int kTiers = 3;
    const size_t capacity[kTiers] = {24, 48, 96};
    // An index whose constructor refuses its arguments leaves the records no view to update
    // (the growth below would write through it; ASan would see that).
    EXPECT_THROW(std::make_unique<LrfuIndex>(params, 3, false, shared), Error);
    std::vector<std::unique_ptr<LrfuIndex>> tiers;
    for (int t = 0; t < kTiers; ++t) tiers.push_back(std::make_unique<LrfuIndex>(params, 16, false, shared));
    constexpr NodeId kIds = 400;
    for (auto &t : tiers) t->reserve_ids(kIds);
    auto lines = std::make_unique<std::vector<Line>>(kIds);
    auto publish = [&] { shared->external_states(&(*lines)[0].st.score, &(*lines)[0].stamp, sizeof(Line)); };
    if (external) publish();
    struct States {  // st[id]: the id's line's state, wherever the lines are now
      std::unique_ptr<std::vector<Line>> *lines;
      PolicyState &operator[](NodeId id) const { return (**lines)[id].st; }
    } st{&lines};
    std::vector<int> where(kIds, -1);
    std::vector<size_t> count(kTiers, 0);
    uint64_t now = 1;
    auto put = [&](NodeId id, int t) {
      tiers[t]->insert(id, Key{0, id}, st[id]);
      where[id] = t;
      ++count[t];
    };
    auto take = [&](NodeId id) {
      tiers[where[id]]->erase(id, EraseReason::moved);
      --count[where[id]];
      where[id] = -1;
    };
    // Room in tier t: its victim goes one tier down (out at the last), checked against a scan.
    std::function<void(int)> make_room = [&](int t) {
      if (count[t] < capacity[t]) return;
      const NodeId v = tiers[t]->victim(now, Eligible::all());
      ASSERT_EQ(v, tiers[t]->victim_bruteforce(now, Eligible::all())) << "tier " << t;
      take(v);
      if (t + 1 < kTiers) {
        make_room(t + 1);
        put(v, t + 1);
      }
    };
    for (int round = 0; round < 20000; ++round) {
      if (external && round == 10000) {  // the lines move, as a growing store's entries do
        auto moved = std::make_unique<std::vector<Line>>(*lines);
        std::swap(lines, moved);
        publish();
      }
      const NodeId id = static_cast<NodeId>(rng() % kIds);
      const unsigned op = static_cast<unsigned>(rng() % 8);
      if (where[id] < 0) {  // admitted to the first tier
        make_room(0);
        st[id].last_access = now;
        put(id, 0);
      } else if (op < 5) {  // accessed where it is
        st[id].score = lrfu_access(st[id].score, now - st[id].last_access, static_cast<float>(rng() % 100) / 100.0f, params);
        st[id].last_access = now;
        LrfuIndex &ix = *tiers[where[id]];
        const uint32_t stamp_before = (*lines)[id].stamp;
        if (split) {
          ix.prepare_access_own(1);
          if (ix.access_own(id, st[id])) ix.note_pending(id);
          ix.note_pending_bound(st[id].score, st[id].last_access);
        } else {
          ix.access(id, st[id]);
        }
        if (external) {  // the access wrote its stamp in the line: a new version, pending
          ASSERT_NE((*lines)[id].stamp >> 1, stamp_before >> 1);
          ASSERT_EQ((*lines)[id].stamp & 1u, 1u);
        } else {
          ASSERT_EQ((*lines)[id].stamp, 0u);  // the records keep it
        }
      } else if (op < 7 && where[id] > 0) {  // promoted one tier up
        const int up = where[id] - 1;
        take(id);
        make_room(up);
        put(id, up);
      } else if (op == 7) {  // released
        take(id);
      }
      now += rng() % 4 == 0 ? 1 : 0;
      if (rng() % 32 == 0)
        for (int t = 0; t < kTiers; ++t) {
          ASSERT_EQ(tiers[t]->victim(now, Eligible::all()), tiers[t]->victim_bruteforce(now, Eligible::all()))
              << "tier " << t << ", round " << round;
          ASSERT_EQ(tiers[t]->validate(), "") << "tier " << t << ", round " << round;
        }
    }
    for (int t = 0; t < kTiers; ++t) {
      EXPECT_EQ(tiers[t]->size(), count[t]);
      EXPECT_EQ(tiers[t]->validate(), "");
    }
  }
}
