// SPDX-License-Identifier: Apache-2.0
// The placement-quality measure (lib/runtime/placement.cpp): the inversions the stats report
// equal a brute-force count over every pair of resident blocks, with the largest gap, through
// random admissions, accesses, pins and releases (a synchronous runtime: nothing moves between
// the stats and the scan); measures counted by several callers at once keep the latest
// snapshot's; and stats pollers beside engine threads and the mover (ThreadSanitizer runs it).
#include "runtime_test_util.hpp"

#include "lib/runtime/placement.hpp"

#include <cxltier/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace cxltier;
using namespace cxlt_test;

namespace {

struct Brute {
  uint64_t inversions = 0;
  double max_gap = 0;
};

// Every pair (a in a slower tier, b in a faster one), both unpinned: inverted when a's
// effective score exceeds b's.
Brute brute_force(Runtime &rt, const std::vector<Key> &keys, const std::map<Key, int> &pins) {
  struct R {
    int tier;
    double score;
  };
  std::vector<R> res;
  for (const Key &k : keys) {
    cxlt_policy_state_t st;
    if (!rt.policy_state(k, &st) || st.tier < 0) continue;
    auto it = pins.find(k);
    if (it != pins.end() && it->second > 0) continue;
    res.push_back({st.tier, st.score});
  }
  Brute b;
  for (const R &a : res)
    for (const R &c : res)
      if (a.tier > c.tier && a.score > c.score) {
        ++b.inversions;
        b.max_gap = std::max(b.max_gap, a.score - c.score);
      }
  return b;
}

TEST(Placement, InversionsMatchBruteForce) {
  RuntimeConfig cfg = three_tier_config(4, 6, 10);
  cfg.synchronous = true;
  for (int variant = 0; variant < 6; ++variant) {
    const PromotionRule rule = std::array{PromotionRule::never, PromotionRule::score_above_victim, PromotionRule::always}[variant % 3];
    cfg.promotion = rule;
    cfg.lrfu.mode = variant < 3 ? ScoreMode::touch : ScoreMode::decay;  // the scans' two LRFU paths
    SCOPED_TRACE(std::string(score_mode_name(cfg.lrfu.mode)) + " mode, rule " + std::to_string(variant % 3));
    auto rt = Runtime::open(cfg);
    std::mt19937_64 rng(static_cast<uint64_t>(variant) + 7);
    std::vector<Key> keys;
    for (uint64_t i = 0; i < 40; ++i) keys.push_back(key_from_sequence(3, i));
    std::map<Key, int> pins;
    uint64_t seen_inverted = 0;
    for (int op = 0; op < 600; ++op) {
      const Key &k = keys[rng() % keys.size()];
      const unsigned what = static_cast<unsigned>(rng() % 10);
      try {
        if (what < 3) {
          rt->admit(k);
        } else if (what < 7) {
          if (rt->lookup(k, nullptr)) {
            const float a = static_cast<float>(rng() % 1000) / 1000.0f;
            rt->access(&k, &a, 1);
          }
        } else if (what == 7) {
          if (rt->lookup(k, nullptr) && pins[k] < 2) {
            rt->pin(k);
            ++pins[k];
          }
        } else if (what == 8) {
          if (pins[k] > 0) {
            rt->unpin(k);
            --pins[k];
          } else if (rt->lookup(k, nullptr)) {
            rt->release(k, rng() % 2 == 0);
          }
        } else {
          rt->step();
        }
      } catch (const Error &e) {
        ASSERT_TRUE(e.code() == CXLT_ERROR_OUT_OF_TIER_MEMORY || e.code() == CXLT_ERROR_INVALID_ARGUMENT) << e.what();
      }
      const cxlt_stats_t s = rt->stats();
      const Brute b = brute_force(*rt, keys, pins);
      ASSERT_EQ(s.inversions, b.inversions) << "op " << op;
      ASSERT_NEAR(s.inversion_max_gap, b.max_gap, 1e-12) << "op " << op;
      if (b.inversions) ++seen_inverted;
    }
    // The workload must produce inversions for the comparison to mean anything (a cold block
    // admitted into tier 0 above hot blocks below it), at least without promotions.
    if (rule == PromotionRule::never) {
      EXPECT_GT(seen_inverted, 0u);
    }
    // Idle times past the scans' table of decay factors (4,096 steps), beside fresh ones.
    for (int i = 0; i < 5000; ++i) rt->step();
    for (size_t i = 0; i < keys.size(); i += 3)
      if (rt->lookup(keys[i], nullptr)) {
        const float a = 0.5f;
        rt->access(&keys[i], &a, 1);
      }
    rt->step();
    const cxlt_stats_t late = rt->stats();
    const Brute lb = brute_force(*rt, keys, pins);
    EXPECT_EQ(late.inversions, lb.inversions);
    EXPECT_NEAR(late.inversion_max_gap, lb.max_gap, 1e-12);
    EXPECT_EQ(rt->validate(), "");
  }
}

TEST(Placement, StepsSinceNoInversion) {
  RuntimeConfig cfg = three_tier_config(1, 1, 2);
  cfg.synchronous = true;
  cfg.promotion = PromotionRule::never;
  auto rt = Runtime::open(cfg);
  const Key a = key_from_sequence(1, 0), b = key_from_sequence(1, 1);
  rt->admit(a);
  EXPECT_EQ(rt->stats().inversions, 0u);
  EXPECT_EQ(rt->stats().steps_since_no_inversion, 0u);
  rt->admit(b);  // tier 0 is full: b lands in tier 1
  const float hot = 1.0f;
  rt->access(&b, &hot, 1);  // b (tier 1) is now hotter than a (tier 0), never promoted
  for (int i = 0; i < 3; ++i) rt->step();
  const cxlt_stats_t s = rt->stats();
  EXPECT_EQ(s.inversions, 1u);
  EXPECT_GT(s.inversion_max_gap, 0.0);
  EXPECT_EQ(s.steps_since_no_inversion, 3u);
  EXPECT_EQ(s.placement_blocks, 2u);

  // Without the measure, the counters are current and the placement fields are the last measure's.
  rt->pin(a);  // a pinned block is out of the measure
  rt->access(&b, &hot, 1);
  const cxlt_stats_t quick = rt->stats(/*measure_placement=*/false);
  EXPECT_EQ(quick.inversions, 1u);
  EXPECT_EQ(quick.placement_blocks, 2u);
  EXPECT_EQ(quick.tier[1].hits, s.tier[1].hits + 1);  // the counters see the access
  const cxlt_stats_t full = rt->stats();
  EXPECT_EQ(full.inversions, 0u);
  EXPECT_EQ(full.placement_blocks, 1u);
}

// Two callers snapshot (1, then 2) and count with the lock released; whichever order they
// finish in, the recorded measure is snapshot 2's, and the clean step is the latest clean
// snapshot's.
TEST(Placement, TheLatestSnapshotsMeasureIsKept) {
  for (bool later_finishes_first : {false, true}) {
    PlacementTrack t;
    const uint64_t first = t.begin(), second = t.begin();
    ASSERT_LT(first, second);
    PlacementMeasure dirty, clean;
    dirty.inversions = 5;
    dirty.blocks = 9;
    clean.blocks = 8;
    if (later_finishes_first) {
      EXPECT_TRUE(t.record(clean, second, 20));
      EXPECT_FALSE(t.record(dirty, first, 10));  // older: dropped
    } else {
      EXPECT_TRUE(t.record(dirty, first, 10));
      EXPECT_TRUE(t.record(clean, second, 20));
    }
    EXPECT_TRUE(t.measured);
    EXPECT_EQ(t.last.inversions, 0u);
    EXPECT_EQ(t.last.blocks, 8u);
    EXPECT_TRUE(t.ever_clean);
    EXPECT_EQ(t.last_clean_step, 20u);
    EXPECT_FALSE(t.record(dirty, second, 30));  // the same snapshot twice: the first is kept
    EXPECT_EQ(t.last.inversions, 0u);
    EXPECT_EQ(t.last_clean_step, 20u);
  }
  {
    // An earlier clean snapshot finishing after a later dirty one: the measure is the later
    // one's, and the clean step is still the earlier's.
    PlacementTrack t;
    const uint64_t first = t.begin(), second = t.begin();
    PlacementMeasure dirty, clean;
    dirty.inversions = 5;
    EXPECT_TRUE(t.record(dirty, second, 20));
    EXPECT_FALSE(t.record(clean, first, 10));
    EXPECT_EQ(t.last.inversions, 5u);
    EXPECT_TRUE(t.ever_clean);
    EXPECT_EQ(t.last_clean_step, 10u);
    EXPECT_FALSE(t.record(clean, first, 5));  // an older clean step never replaces a later one
    EXPECT_EQ(t.last_clean_step, 10u);
  }
  PlacementTrack t;
  PlacementMeasure dirty;
  dirty.inversions = 1;
  EXPECT_TRUE(t.record(dirty, t.begin(), 4));
  EXPECT_FALSE(t.ever_clean);  // never clean: steps since none count from open
}

// Engine threads admit, access (by key and by handle) and step while two threads poll the
// stats (each call sorts and counts with the lock released, and the C++ and JSON forms both
// measure) and the mover reconciles. Afterwards, settled: the measure equals the brute-force
// count, and a quick stats() reports the same measure.
TEST(Placement, PollersBesideEngineThreadsAndTheMover) {
  RuntimeConfig cfg = three_tier_config(8, 16, 64);
  auto rt = Runtime::open(cfg);
  std::vector<Key> keys;
  for (uint64_t i = 0; i < 96; ++i) keys.push_back(key_from_sequence(5, i));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> polls{0};
  std::vector<std::thread> pollers;
  for (int p = 0; p < 2; ++p)
    pollers.emplace_back([&, p] {
      while (!stop.load()) {
        if (p == 0) {
          // The snapshot is taken in the same critical section as the counters: it compares
          // at most the blocks the tiers hold (fewer: pinned, moving or being admitted).
          const cxlt_stats_t s = rt->stats();
          uint64_t held = 0;
          for (uint32_t t = 0; t < s.tier_count; ++t) held += s.tier[t].blocks;
          EXPECT_LE(s.placement_blocks, held);
        } else {
          EXPECT_NE(rt->stats_json().find("\"inversions\""), std::string::npos);
        }
        polls.fetch_add(1);
      }
    });
  std::vector<std::thread> engines;
  for (int e = 0; e < 2; ++e)
    engines.emplace_back([&, e] {
      std::mt19937_64 rng(static_cast<uint64_t>(e) + 11);
      while (polls.load() < 2) std::this_thread::yield();  // the polls begin before the engines do
      for (int op = 0; op < 3000; ++op) {
        const Key &k = keys[rng() % keys.size()];
        const float a = static_cast<float>(rng() % 1000) / 1000.0f;
        try {
          switch (rng() % 4) {
            case 0: rt->admit(k); break;
            case 1: rt->access(&k, &a, 1); break;
            case 2: {
              Block b;
              if (rt->lookup(k, &b)) rt->access_handles(&b.handle, &a, 1);
              break;
            }
            default: rt->step();
          }
        } catch (const Error &ex) {
          // Another thread dropped the block meanwhile, or every slot is busy.
          ASSERT_TRUE(ex.code() == CXLT_ERROR_NOT_FOUND || ex.code() == CXLT_ERROR_OUT_OF_TIER_MEMORY) << ex.what();
        }
      }
    });
  for (auto &t : engines) t.join();
  stop = true;
  for (auto &t : pollers) t.join();
  ASSERT_TRUE(rt->wait_idle(-1));
  const cxlt_stats_t s = rt->stats();
  const Brute b = brute_force(*rt, keys, {});
  EXPECT_EQ(s.inversions, b.inversions);
  EXPECT_NEAR(s.inversion_max_gap, b.max_gap, 1e-12);
  const cxlt_stats_t quick = rt->stats(/*measure_placement=*/false);
  EXPECT_EQ(quick.inversions, s.inversions);
  EXPECT_EQ(quick.placement_blocks, s.placement_blocks);
  EXPECT_EQ(rt->validate(), "");
}

}  // namespace
