// SPDX-License-Identifier: Apache-2.0
// The tiers' order after wait_idle (docs/runtime.md, "Placement quality"): random workloads
// (bursts of admissions, accesses with random attention, pins, unpins, releases, re-admissions
// with restored state, decode steps) on 2-3 tiers of the null or the emulated backend, for every
// `runtime.promotion` rule and the LRU, LRFU and LFU policies, tie-heavy attention included.
// After every wait_idle the runtime's own inversion count and a brute-force count over every
// pair of resident blocks, written here from policy_state and the test's own record of the
// reference order, are both 0. Seeds are fixed. Also the mover's work in chunks with the lock
// handed to step() between them: the scan, and the LRFU index's upkeep.
#include "../common/thrown.hpp"
#include "runtime_test_util.hpp"

#include <cxltier/error.hpp>

#include "lib/runtime/test_access.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace cxltier;
using namespace cxlt_test;

namespace {

RuntimeConfig tiers_config(const std::vector<uint32_t> &blocks, const std::string &backend) {
  RuntimeConfig cfg = three_tier_config(blocks[0], blocks[1], blocks.size() > 2 ? blocks[2] : 1, backend);
  cfg.tiers.resize(blocks.size());
  return cfg;
}

// What the test knows of each key: its pins, and for LRU its place in the reference order
// (the runtime's keep value for the recency policies: each admission and each access is a
// newer reference than every one before it).
struct Model {
  std::map<Key, int> pins;
  std::map<Key, uint64_t> order;
  uint64_t clock = 0;
};

// Every pair (a in a slower tier, b in a faster one), both unpinned, with a's keep value above
// b's: the inversions, counted pair by pair.
uint64_t brute_inversions(Runtime &rt, PolicyKind policy, const std::vector<Key> &keys, const Model &m) {
  struct R {
    int tier;
    double keep;
  };
  std::vector<R> res;
  for (const Key &k : keys) {
    cxlt_policy_state_t st;
    if (!rt.policy_state(k, &st) || st.tier < 0) continue;
    auto p = m.pins.find(k);
    if (p != m.pins.end() && p->second > 0) continue;
    double keep = st.score;
    if (policy == PolicyKind::lfu) keep = static_cast<double>(st.accesses);
    if (policy == PolicyKind::lru) keep = static_cast<double>(m.order.at(k));
    res.push_back({st.tier, keep});
  }
  uint64_t n = 0;
  for (const R &a : res)
    for (const R &b : res)
      if (a.tier > b.tier && a.keep > b.keep) ++n;
  return n;
}

struct Workload {
  PolicyKind policy;
  PromotionRule rule;
  std::vector<uint32_t> tiers;
  std::string backend;
  bool ties;  // attention only 0 or 1: many equal keep values
  uint64_t seed;
};

struct Seen {
  uint64_t moves = 0, restored = 0, inverted_before_wait = 0;
};

void drive(const Workload &r, Seen *seen) {
  SCOPED_TRACE(std::string(policy_kind_name(r.policy)) + " " + promotion_rule_name(r.rule) + " " + r.backend + " " +
               std::to_string(r.tiers.size()) + " tiers, seed " + std::to_string(r.seed) + (r.ties ? ", ties" : ""));
  RuntimeConfig cfg = tiers_config(r.tiers, r.backend);
  cfg.policy = r.policy;
  cfg.promotion = r.rule;
  cfg.migration_threads = 2;
  auto rt = Runtime::open(cfg);
  uint32_t capacity = 0;
  for (uint32_t b : r.tiers) capacity += b;
  std::vector<Key> keys;
  for (uint64_t i = 0; i < capacity * 2; ++i) keys.push_back(key_from_sequence(r.seed, i));
  std::mt19937_64 rng(r.seed);
  Model m;
  auto pick = [&] { return keys[rng() % keys.size()]; };
  // Pins stay few, as an engine's do (a step's working set): the watermark pass can then keep
  // a free slot in every tier, which a swap needs (a tier full of pinned blocks blocks it).
  const size_t pin_cap = capacity / 4;
  auto pinned = [&] {
    size_t n = 0;
    for (const auto &[k, p] : m.pins) n += static_cast<size_t>(p);
    return n;
  };
  auto attention = [&] {
    if (r.ties) return static_cast<float>(rng() % 2);
    return static_cast<float>(rng() % 1001) / 1000.0f;
  };
  for (int round = 0; round < 12; ++round) {
    if (round % 3 == 2) {  // the engine's step ends: every pin goes, in one call
      std::vector<Key> all;
      for (const auto &[k, p] : m.pins)
        for (int i = 0; i < p; ++i) all.push_back(k);
      rt->unpin_batch(all.data(), all.size());
      m.pins.clear();
    }
    for (int op = 0; op < 24; ++op) {
      const unsigned what = static_cast<unsigned>(rng() % 16);
      if (what < 3) {
        // A burst: one prefill's blocks, some pinned by the call.
        std::vector<Key> burst(1 + rng() % (capacity / 2 + 1));
        for (Key &k : burst) k = pick();
        const bool pin = rng() % 4 == 0 && pinned() + burst.size() <= pin_cap;
        std::vector<Block> out(burst.size());
        std::unique_ptr<bool[]> placed(new bool[burst.size()]);
        const cxlt_result_t c = code_of([&] { rt->admit_batch(burst.data(), burst.size(), pin, out.data(), placed.get()); });
        ASSERT_TRUE(c == CXLT_OK || c == CXLT_ERROR_OUT_OF_TIER_MEMORY) << cxlt_result_string(c);
        if (c != CXLT_OK) continue;
        for (size_t i = 0; i < burst.size(); ++i) {
          if (placed[i]) m.order[burst[i]] = ++m.clock;  // admitted now (not resident before): a reference
          if (pin) ++m.pins[burst[i]];
        }
      } else if (what < 5) {
        const Key k = pick();
        const bool pin = rng() % 4 == 0 && pinned() < pin_cap;
        bool placed = false;
        const cxlt_result_t c = code_of([&] { rt->admit(k, &placed, pin); });
        ASSERT_TRUE(c == CXLT_OK || c == CXLT_ERROR_OUT_OF_TIER_MEMORY) << cxlt_result_string(c);
        if (c != CXLT_OK) continue;
        if (placed) m.order[k] = ++m.clock;
        if (pin) ++m.pins[k];
      } else if (what < 10) {
        // One decode step's accesses to resident blocks, by key or by handle.
        std::vector<Key> ks;
        std::vector<uint64_t> hs;
        for (int i = 0; i < 12; ++i) {
          const Key k = pick();
          Block b;
          if (rt->lookup(k, &b)) {
            ks.push_back(k);
            hs.push_back(b.handle);
          }
        }
        std::vector<float> att(ks.size());
        for (float &a : att) a = attention();
        const bool by_handle = rng() % 3 == 0;
        const cxlt_result_t c = code_of([&] {
          if (by_handle) {
            rt->access_handles(hs.data(), att.data(), hs.size());
          } else {
            rt->access(ks.data(), att.data(), ks.size());
          }
        });
        // A block the mover dropped since the lookup: the batch is refused whole.
        ASSERT_TRUE(c == CXLT_OK || c == CXLT_ERROR_NOT_FOUND) << cxlt_result_string(c);
        if (c == CXLT_OK)
          for (const Key &k : ks) m.order[k] = ++m.clock;
      } else if (what < 12) {
        const Key k = pick();
        if (m.pins[k] > 0) {
          rt->unpin(k);
          --m.pins[k];
        } else if (pinned() < pin_cap && rt->lookup(k, nullptr) && code_of([&] { rt->pin(k); }) == CXLT_OK) {
          ++m.pins[k];
        }
      } else if (what < 14) {
        const Key k = pick();
        if (m.pins[k] == 0 && rt->lookup(k, nullptr)) {
          const cxlt_result_t c = code_of([&] { rt->release(k, rng() % 2 == 0); });
          // Released before (without forget), or dropped by the mover since the lookup.
          ASSERT_TRUE(c == CXLT_OK || c == CXLT_ERROR_INVALID_ARGUMENT || c == CXLT_ERROR_NOT_FOUND)
              << cxlt_result_string(c);
        }
      } else {
        rt->step();
      }
    }
    if (rt->stats().inversions > 0) ++seen->inverted_before_wait;
    ASSERT_TRUE(rt->wait_idle(10000)) << "round " << round;
    const cxlt_stats_t s = rt->stats();
    if (s.inversions != 0) {
      for (uint32_t t = 0; t < s.tier_count; ++t) fprintf(stderr, "tier %u: %lu blocks of %lu\n", t, (unsigned long)s.tier[t].blocks, (unsigned long)(s.tier[t].budget_bytes / rt->config().geometry.bytes()));
      for (const Key &k : keys) {
        cxlt_policy_state_t st;
        if (rt->policy_state(k, &st) && st.tier >= 0) fprintf(stderr, "  tier %d score %.6f acc %lu pins %d\n", st.tier, st.score, (unsigned long)st.accesses, m.pins[k]);
      }
    }
    ASSERT_EQ(s.inversions, 0u) << "round " << round << ": largest gap " << s.inversion_max_gap;
    ASSERT_EQ(brute_inversions(*rt, r.policy, keys, m), 0u) << "round " << round;
    ASSERT_EQ(rt->validate(), "") << "round " << round;
  }
  const cxlt_stats_t s = rt->stats();
  seen->moves += s.promotions + s.demotions;
  seen->restored += s.readmissions_restored;
}

TEST(Reconcile, NoInversionAfterWaitIdle) {
  Seen seen;
  uint64_t seed = 1;
  const std::vector<std::vector<uint32_t>> shapes = {{4, 6}, {6, 8, 12}, {3, 5, 9}};
  for (PolicyKind policy : {PolicyKind::lru, PolicyKind::lrfu, PolicyKind::lfu})
    for (PromotionRule rule : {PromotionRule::never, PromotionRule::score_above_victim, PromotionRule::always})
      for (const char *backend : {"null", "emulated"}) {
        const Workload r{policy, rule, shapes[seed % shapes.size()], backend, seed % 2 == 0, seed};
        ++seed;
        drive(r, &seen);
        if (HasFatalFailure()) return;
      }
  // The workloads did what the check needs: blocks out of order before wait_idle, moves to
  // fix them, re-admissions whose state was restored.
  EXPECT_GT(seen.inverted_before_wait, 10u);
  EXPECT_GT(seen.moves, 100u);
  EXPECT_GT(seen.restored, 10u);
}

// Admission into a full fastest tier (a synchronous runtime: no mover makes room meanwhile)
// demotes that tier's victim when it keeps less than the incoming block: its keep value as
// admitted, the restored one for a block seen before.
TEST(Reconcile, AdmissionDemotesAVictimThatKeepsLess) {
  {
    RuntimeConfig cfg = tiers_config({2, 4}, "emulated");
    cfg.synchronous = true;
    cfg.policy = PolicyKind::lru;
    auto rt = Runtime::open(cfg);
    const Key a = key_from_sequence(9, 0), b = key_from_sequence(9, 1), c = key_from_sequence(9, 2);
    rt->admit(a);
    rt->admit(b);
    EXPECT_EQ(rt->admit(c).tier, 0) << "the newest reference keeps most under LRU";
    EXPECT_EQ(rt->admit(a).tier, 1) << "the oldest went down";
    EXPECT_EQ(rt->stats().inversions, 0u);
    EXPECT_EQ(rt->validate(), "");
  }
  RuntimeConfig cfg = tiers_config({2, 4, 4}, "emulated");
  cfg.synchronous = true;
  auto rt = Runtime::open(cfg);
  const Key hot = key_from_sequence(8, 0), a = key_from_sequence(8, 1), b = key_from_sequence(8, 2),
            fresh = key_from_sequence(8, 3);
  rt->admit(hot);
  const float full = 1.0f, half = 0.5f;
  for (int i = 0; i < 3; ++i) rt->access(&hot, &full, 1);
  rt->release(hot, /*forget=*/true);  // its state stays: score about 0.14
  rt->admit(a);
  rt->admit(b);
  rt->access(&a, &half, 1);
  rt->access(&b, &half, 1);  // tier 0 full of blocks scoring 0.025
  EXPECT_EQ(rt->admit(fresh).tier, 1) << "a new block (score 0) takes a free slot below";
  EXPECT_EQ(rt->admit(hot).tier, 0) << "its restored score is above the victim's";
  cxlt_policy_state_t sa{}, sb{};
  ASSERT_TRUE(rt->policy_state(a, &sa) && rt->policy_state(b, &sb));
  EXPECT_EQ((sa.tier == 1) + (sb.tier == 1), 1) << "one of the two went down";
  const cxlt_stats_t s = rt->stats();
  EXPECT_EQ(s.inversions, 0u);
  EXPECT_EQ(s.readmissions_restored, 1u);
  EXPECT_EQ(rt->validate(), "");
}


// The reconciliation scans the blocks in chunks of 16,384 ids and hands the runtime's lock to
// an engine thread waiting in step() between two (pass_lock, parallel_drain.cpp). Here 180,000
// blocks (ids in eleven chunks) on two null tiers, an engine thread accessing random blocks and
// stepping while the mover scans: the lock is handed over, and once the engine stops the order
// settles with no inversion and the runtime's structures agree.
TEST(Reconcile, ChunkedScanHandsTheLockOverAndSettles) {
  constexpr uint32_t kFast = 60000, kSlow = 200000, kBlocks = 180000;  // no drops: both tiers stay under their watermarks
  RuntimeConfig cfg = tiers_config({kFast, kSlow}, "null");
  cfg.geometry.layers = cfg.geometry.kv_heads = cfg.geometry.head_dim = cfg.geometry.bytes_per_element = 1;
  cfg.geometry.k_and_v = false;
  cfg.geometry.tokens_per_block = 1024;  // 1 KiB blocks: only the budgets see the size
  cfg.tiers[0].budget_bytes = uint64_t{kFast} * cfg.geometry.bytes();
  cfg.tiers[1].budget_bytes = uint64_t{kSlow} * cfg.geometry.bytes();
  cfg.store_capacity = 1u << 19;
  cfg.promotion = PromotionRule::never;  // only the reconciliation moves blocks up
  // Moves a pass: the hot blocks out of order settle in about 45 passes, each a scan of every
  // block (at the default 8, about 350 passes: 16-25 s under ThreadSanitizer).
  cfg.migration_batch = 64;
  auto rt = Runtime::open(cfg);
  std::vector<uint64_t> handles(kBlocks);
  for (uint32_t i = 0; i < kBlocks; ++i) handles[i] = rt->admit(key_from_sequence(5, i)).handle;
  // A hot set of 4,096 blocks, most of them in the slow tier: few enough that the mover's
  // moves (a batch a pass) mend the order well within wait_idle's 1,000 passes.
  std::mt19937_64 rng(11);
  std::vector<uint64_t> hot(4096);
  for (uint64_t &h : hot) h = handles[rng() % kBlocks];
  std::vector<uint64_t> batch(256);
  std::vector<float> att(batch.size(), 1.0f);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a hang guard, not a speed check
  uint64_t handovers = 0;
  for (uint64_t it = 0; handovers < 3 && std::chrono::steady_clock::now() < give_up; ++it) {
    for (uint64_t &h : batch) h = hot[rng() % hot.size()];
    const cxlt_result_t c = code_of([&] { rt->access_handles(batch.data(), att.data(), batch.size()); });
    ASSERT_TRUE(c == CXLT_OK || c == CXLT_ERROR_NOT_FOUND) << cxlt_result_string(c);
    rt->step();
    if (it % 64 == 63) handovers = RuntimeTestAccess::lock_handovers(*rt);
  }
  EXPECT_GE(handovers, 3u) << "the scan never handed the lock to step() in 60 s";
  ASSERT_TRUE(rt->wait_idle(-1));  // meson's timeout guards a hang
  const cxlt_stats_t s = rt->stats();
  EXPECT_EQ(s.inversions, 0u) << "largest gap " << s.inversion_max_gap;
  EXPECT_GT(s.promotions, 0u);  // the accesses put blocks out of order, and the mover mended it
  EXPECT_EQ(rt->validate(), "");
}

// The mover's upkeep of the LRFU indexes (a rebuild when most blocks were accessed since the
// last) in pieces, with the lock handed to step() between them: an engine thread accesses
// random resident blocks (100,000 at first; every block often pending) and admits more each
// step, so that the fast tier stays over its watermark and the mover demotes
// at every pass. Every admitted block stays resident (the slow tier has room for all), the
// order settles, and the structure validates.
TEST(Reconcile, IndexUpkeepInPiecesLosesNothing) {
  constexpr uint32_t kFast = 80000, kSlow = 400000, kFirst = 100000;
  RuntimeConfig cfg = tiers_config({kFast, kSlow}, "null");
  cfg.geometry.layers = cfg.geometry.kv_heads = cfg.geometry.head_dim = cfg.geometry.bytes_per_element = 1;
  cfg.geometry.k_and_v = false;
  cfg.geometry.tokens_per_block = 1024;
  cfg.tiers[0].budget_bytes = uint64_t{kFast} * cfg.geometry.bytes();
  cfg.tiers[1].budget_bytes = uint64_t{kSlow} * cfg.geometry.bytes();
  cfg.store_capacity = 1u << 19;
  cfg.promotion = PromotionRule::never;
  cfg.migration_batch = 64;
  auto rt = Runtime::open(cfg);
  std::vector<uint64_t> handles;
  handles.reserve(kSlow);
  uint32_t next = 0;
  for (; next < kFirst; ++next) handles.push_back(rt->admit(key_from_sequence(6, next)).handle);
  std::mt19937_64 rng(12);
  std::vector<uint64_t> batch(4096);
  std::vector<float> att(batch.size());
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a hang guard, not a speed check
  RuntimeTestAccess::IndexUpkeep up;
  for (uint64_t it = 0; up.rebuilds < 2 && std::chrono::steady_clock::now() < give_up; ++it) {
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i] = handles[rng() % handles.size()];
      att[i] = u(rng);
    }
    ASSERT_EQ(code_of([&] { rt->access_handles(batch.data(), att.data(), batch.size()); }), CXLT_OK);
    for (int k = 0; k < 32 && next < kSlow - 1000; ++k, ++next) handles.push_back(rt->admit(key_from_sequence(6, next)).handle);
    rt->step();
    if (it % 16 == 15) up = RuntimeTestAccess::index_upkeep(*rt, 0);
  }
  EXPECT_GE(up.rebuilds, 2u) << "the mover never rebuilt the fast tier's index in pieces in 60 s";
  ASSERT_TRUE(rt->wait_idle(-1));
  const cxlt_stats_t s = rt->stats();
  EXPECT_EQ(s.tier[0].blocks + s.tier[1].blocks, static_cast<uint64_t>(next));
  EXPECT_EQ(s.drops, 0u);
  EXPECT_EQ(s.inversions, 0u) << "largest gap " << s.inversion_max_gap;
  EXPECT_GT(s.demotions, 0u);
  EXPECT_EQ(rt->validate(), "");
  std::printf("%u blocks admitted; fast tier's index: %llu rebuilds in pieces (%llu completed by another call)\n", next,
              static_cast<unsigned long long>(up.rebuilds), static_cast<unsigned long long>(up.completed));
}
}  // namespace
