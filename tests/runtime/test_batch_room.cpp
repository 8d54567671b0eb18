// SPDX-License-Identifier: Apache-2.0
// The room admit_batch makes for a burst (lib/runtime/batch_room.cpp) against a brute-force
// answer. Three full tiers of real memory, every block accessed with its own attention so that
// no two keep values tie, the hottest in the fastest tier: a burst of k new blocks
// (keep value 0: below every resident block) must drop the k coldest blocks of all, move each
// tier's k coldest one tier down and put the new blocks in the fastest tier. The brute force
// sorts every resident block by the keep value computed from its policy state. Synchronous
// runtimes (copies in the calling thread) check the whole placement; asynchronous ones (each
// level's copies by the migration workers together) check the drops, which are decided before
// any lock release, and that every block's bytes survived. Random sizes, bursts and seeds.
#include "runtime_test_util.hpp"

#include <cxltier/policy.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace cxltier;
using namespace cxlt_test;

namespace {

struct Resident {
  double keep;
  Key key;
  int tier;
};

// Every resident block of `keys`, coldest first.
std::vector<Resident> by_keep(Runtime &rt, const RuntimeConfig &cfg, const std::vector<Key> &keys) {
  std::vector<Resident> r;
  const uint64_t now = rt.current_step();
  for (const Key &k : keys) {
    cxlt_policy_state_t st{};
    if (!rt.policy_state(k, &st) || st.tier < 0) continue;
    const uint64_t idle = now - std::min(now, st.last_access_step);
    r.push_back({lrfu_effective_score(st.score, idle, cfg.lrfu), k, st.tier});
  }
  std::sort(r.begin(), r.end(), [](const Resident &a, const Resident &b) { return a.keep < b.keep; });
  return r;
}

void run_case(uint64_t seed, bool synchronous) {
  SCOPED_TRACE("seed " + std::to_string(seed) + (synchronous ? ", synchronous" : ", migration workers"));
  std::mt19937_64 rng(seed);
  // Whole extents (three_tier_config's extent_blocks = 4), so that every slot of a budget exists.
  const uint32_t sizes[3] = {4 * static_cast<uint32_t>(2 + rng() % 6), 4 * static_cast<uint32_t>(2 + rng() % 6),
                             4 * static_cast<uint32_t>(4 + rng() % 8)};
  RuntimeConfig cfg = three_tier_config(sizes[0], sizes[1], sizes[2]);
  cfg.synchronous = synchronous;
  // Nothing moves but what the burst moves: no promotion, no headroom kept (every tier stays
  // full), and so no reconciliation either (its swaps need a free slot).
  cfg.promotion = PromotionRule::never;
  cfg.high_watermark = cfg.low_watermark = 1.0;
  auto rt = Runtime::open(cfg);
  const size_t block = cfg.geometry.bytes();

  // Fill every tier (the fastest first) and give the blocks distinct scores that fall with the
  // order of admission: the tiers' order holds from the start.
  const size_t total = sizes[0] + sizes[1] + sizes[2];
  std::vector<Key> old;
  for (size_t i = 0; i < total; ++i) old.push_back(key_from_sequence(seed, i));
  std::vector<Block> out(total);
  rt->admit_batch(old.data(), old.size(), false, out.data(), nullptr);
  for (size_t i = 0; i < total; ++i) {
    Block b = rt->pin(old[i]);
    fill_block(b.data, block, old[i], 1);
    rt->unpin(old[i]);
  }
  std::vector<float> attention(total);
  for (float &a : attention) a = std::uniform_real_distribution<float>(0.05f, 1.0f)(rng);
  std::sort(attention.begin(), attention.end(), std::greater<float>());
  rt->access(old.data(), attention.data(), total);
  rt->step();
  ASSERT_TRUE(rt->wait_idle(60000));
  ASSERT_EQ(rt->stats().inversions, 0u);

  const std::vector<Resident> before = by_keep(*rt, cfg, old);
  ASSERT_EQ(before.size(), total);
  for (size_t i = 1; i < before.size(); ++i) ASSERT_LT(before[i - 1].keep, before[i].keep) << "a tie: pick another seed";

  const size_t k = 1 + rng() % std::min(sizes[0], sizes[1]);
  std::vector<Key> burst;
  for (size_t i = 0; i < k; ++i) burst.push_back(key_from_sequence(seed + 1000000, i));
  const cxlt_stats_t s0 = rt->stats();
  std::vector<Block> got(k);
  rt->admit_batch(burst.data(), k, false, got.data(), nullptr);
  const cxlt_stats_t s1 = rt->stats();

  // The brute force: the k coldest are gone; in a synchronous runtime each tier's k coldest
  // went one tier down and the burst took the fastest tier.
  std::set<Key> dropped;
  for (size_t i = 0; i < k; ++i) dropped.insert(before[i].key);
  std::map<Key, int> want;
  std::vector<std::vector<Key>> in_tier(3);
  for (const Resident &r : before) in_tier[r.tier].push_back(r.key);  // coldest first in each
  for (int t = 0; t < 3; ++t)
    for (size_t i = 0; i < in_tier[t].size(); ++i)
      if (!(t == 2 && i < k)) want[in_tier[t][i]] = i < k ? t + 1 : t;
  EXPECT_EQ(s1.drops - s0.drops, k);
  for (const Key &key : old) {
    cxlt_policy_state_t st{};
    ASSERT_TRUE(rt->policy_state(key, &st));
    if (dropped.count(key)) {
      EXPECT_EQ(st.tier, -1) << key.hex() << " is among the " << k << " coldest: dropped";
      continue;
    }
    EXPECT_GE(st.tier, 0) << key.hex() << " is not among the " << k << " coldest: kept";
    if (synchronous) {
      EXPECT_EQ(st.tier, want[key]) << key.hex();
    }
  }
  for (size_t i = 0; i < k && synchronous; ++i) EXPECT_EQ(got[i].tier, 0);
  if (synchronous) {
    EXPECT_EQ(s1.demotions - s0.demotions, 2 * k);
  }
  EXPECT_EQ(s1.migration_failures, 0u);

  // Every kept block's bytes survived its moves.
  ASSERT_TRUE(rt->wait_idle(60000));
  for (const Key &key : old) {
    if (dropped.count(key)) continue;
    Block b = rt->pin(key);
    EXPECT_TRUE(check_block(b.data, block, key, nullptr)) << key.hex() << " torn in tier " << b.tier;
    rt->unpin(key);
  }
  // (The new blocks, keep value 0, now sit above hotter ones: with no headroom the mover cannot
  // swap them down. tests/runtime/test_reconcile.cpp checks bursts with the default headroom.)
  EXPECT_EQ(rt->validate(), "");
}

TEST(BatchRoom, BurstDropsTheColdestAndDemotesEachTiersColdestSynchronous) {
  for (uint64_t seed = 1; seed <= 30; ++seed) run_case(seed, true);
}

TEST(BatchRoom, BurstDropsTheColdestAndKeepsEveryBlockWithWorkers) {
  for (uint64_t seed = 101; seed <= 120; ++seed) run_case(seed, false);
}

}  // namespace
