// SPDX-License-Identifier: Apache-2.0
// The batch calls of the C++ API (lib/runtime/batch.cpp): admit_batch, prefix_lookup,
// release_batch, unpin_batch. Each applies the single-block rules in order and refuses a bad
// batch with nothing applied; a prefix pinned by prefix_lookup holds its bytes while other
// threads admit and evict around it.
#include "../common/thrown.hpp"
#include "remote_doubles.hpp"
#include "runtime_test_util.hpp"

#include <cxltier/error.hpp>

#include "lib/runtime/test_access.hpp"
#include "tiers/faulty/faulty.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace cxltier;
using namespace cxlt_test;

namespace {

std::vector<Key> seq(uint64_t id, size_t n, size_t from = 0) {
  std::vector<Key> k;
  for (size_t i = 0; i < n; ++i) k.push_back(key_from_sequence(id, from + i));
  return k;
}

TEST(Batch, AdmitRepeatsAndPins) {
  auto rt = Runtime::open(three_tier_config(4, 4, 8));
  std::vector<Key> k = seq(1, 3);
  k.push_back(k[0]);  // given twice: one slot, two pins
  std::vector<Block> b(k.size());
  bool placed[4] = {};
  rt->admit_batch(k.data(), k.size(), true, b.data(), placed);
  EXPECT_TRUE(placed[0] && placed[1] && placed[2]);
  EXPECT_FALSE(placed[3]);
  EXPECT_EQ(b[0].data, b[3].data);
  rt->unpin(k[0]);
  EXPECT_EQ(code_of([&] { rt->release(k[0], false); }), CXLT_ERROR_BUSY);  // one pin left
  rt->unpin_batch(k.data(), 3);
  EXPECT_EQ(code_of([&] { rt->unpin(k[0]); }), CXLT_ERROR_INVALID_ARGUMENT);
  rt->release_batch(k.data(), 3, true);
  EXPECT_FALSE(rt->lookup(k[1], nullptr));
  EXPECT_EQ(rt->validate(), "");
}

TEST(Batch, RefusedAdmissionChangesNothing) {
  auto rt = Runtime::open(three_tier_config(2, 2, 4));  // 8 slots
  std::vector<Key> pinned = seq(1, 6);
  std::vector<Block> b(16);
  rt->admit_batch(pinned.data(), pinned.size(), true, b.data(), nullptr);
  std::vector<Key> cold = seq(2, 1);
  rt->admit(cold[0]);
  ASSERT_TRUE(rt->wait_idle(-1));
  const cxlt_stats_t before = rt->stats();
  std::vector<Key> more = seq(3, 3);  // 1 free + 1 movable = 2 < 3
  const Error refused = thrown([&] { rt->admit_batch(more.data(), more.size(), false, b.data(), nullptr); });
  EXPECT_EQ(refused.code(), CXLT_ERROR_OUT_OF_TIER_MEMORY);
  // Nothing was moving: the message says the rest is pinned, and no more.
  EXPECT_NE(std::string(refused.what()).find("3 blocks need a slot; the tiers have 1 free and 1 blocks that may make room (every other block is pinned): nothing admitted"),
            std::string::npos)
      << refused.what();
  const cxlt_stats_t after = rt->stats();
  EXPECT_EQ(after.demotions, before.demotions);
  EXPECT_EQ(after.drops, before.drops);
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_TRUE(rt->lookup(cold[0], nullptr));
  for (const Key &k : more) EXPECT_FALSE(rt->policy_state(k, nullptr));  // never seen: no state made
  rt->admit_batch(more.data(), 2, false, b.data(), nullptr);  // 2 fit
  EXPECT_FALSE(rt->lookup(cold[0], nullptr));  // made room for them
  EXPECT_EQ(rt->validate(), "");
}

// A flag that a fault leaves set on a block (here kFlagHeld, which a call making room sets and
// always clears) must not hang admissions that wait for blocks in passage: the single-block
// path and admit_batch each wait one bound (a second), see the block still in passage and
// refuse, naming it, instead of waiting a bound in every try or round (16 and 8 of them). The
// upper limit on the time is that difference, five times the bound, not a speed goal. Once the
// flag clears, the block is a victim again and both admit.
TEST(Batch, StuckPassageRefusesAfterOneBound) {
  auto rt = Runtime::open(one_synchronous_tier(4));
  std::vector<Key> pinned = seq(1, 3);
  std::vector<Block> b(4);
  rt->admit_batch(pinned.data(), pinned.size(), true, b.data(), nullptr);
  const Key stuck = key_from_sequence(2, 0);
  rt->admit(stuck);
  ASSERT_TRUE(rt->wait_idle(-1));
  ASSERT_TRUE(rt->lookup(stuck, nullptr));
  ASSERT_TRUE(RuntimeTestAccess::set_held(*rt, stuck, true));
  using Clock = std::chrono::steady_clock;
  const Key one = key_from_sequence(3, 0);
  auto t0 = Clock::now();
  const Error single = thrown([&] { rt->admit(one); });
  const double single_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(single.code(), CXLT_ERROR_OUT_OF_TIER_MEMORY);
  EXPECT_NE(std::string(single.what()).find("or stayed in passage (moving, or held by another call) past the wait's bound"),
            std::string::npos)
      << single.what();
  EXPECT_GE(single_s, 0.9);  // it did wait for the block
  EXPECT_LT(single_s, 5.0);
  std::vector<Key> two = seq(4, 1);
  t0 = Clock::now();
  const Error batch = thrown([&] { rt->admit_batch(two.data(), two.size(), false, b.data(), nullptr); });
  const double batch_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(batch.code(), CXLT_ERROR_OUT_OF_TIER_MEMORY);
  EXPECT_NE(std::string(batch.what()).find("0 blocks that may make room (every other block is pinned, or still moving or held by another call after 1 wait)"),
            std::string::npos)
      << batch.what();
  EXPECT_GE(batch_s, 0.9);
  EXPECT_LT(batch_s, 5.0);
  EXPECT_TRUE(rt->lookup(stuck, nullptr));  // refusals moved nothing
  ASSERT_TRUE(RuntimeTestAccess::set_held(*rt, stuck, false));
  rt->admit(one);
  EXPECT_FALSE(rt->lookup(stuck, nullptr));  // the victim once its flag cleared
  rt->unpin(pinned[0]);
  rt->admit_batch(two.data(), two.size(), false, b.data(), nullptr);
  EXPECT_EQ(rt->validate(), "");
}

// admit_batch of a block in the middle of its write-out (resident, moving, about to be resident
// nowhere) waits for the write-out, as admit(pin) does, and then admits the block again. It had
// pinned it at once: the write-out then left it resident nowhere and still pinned, and the call
// returned it at tier -1 with no data.
TEST(Batch, AdmitBatchWaitsForABlockBeingWrittenOut) {
  for (const bool pin : {true, false}) {
    SCOPED_TRACE(pin ? "pin" : "no pin");
    auto rt = Runtime::open(one_synchronous_tier(4));
    auto owned = std::make_unique<HeldWriteOuts>();
    HeldWriteOuts &remote = *owned;
    RuntimeTestAccess::set_remote(*rt, std::move(owned));
    const std::vector<Key> filled = seq(1, 4);
    for (const Key &k : filled) rt->admit(k);
    // One admission into the full tier: making room writes a victim out, held by the double.
    std::thread admitting([&] { rt->admit(key_from_sequence(2, 0)); });
    if (!remote.gate.wait_entered(5)) {  // no write-out began: let any that comes go, and stop here
      remote.gate.let_go();
      admitting.join();
      FAIL() << "the admission into the full tier wrote nothing out within 5 s";
    }
    const Key victim = remote.last_stored();
    Block out{};
    bool placed = false;
    std::atomic<bool> returned{false};
    std::thread batch([&] {
      rt->admit_batch(&victim, 1, pin, &out, &placed);
      returned = true;
    });
    // It must wait for the write-out, however long that takes (here until the test lets it go).
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(returned.load()) << "admit_batch returned while its block was being written out";
    remote.gate.let_go();
    admitting.join();
    batch.join();
    EXPECT_GE(out.tier, 0) << "admit_batch returned a block resident nowhere";
    EXPECT_NE(out.data, nullptr);
    EXPECT_TRUE(placed) << "the block was written out, so the call admitted it again (a miss: the double fetches nothing)";
    Block now{};
    ASSERT_TRUE(rt->lookup(victim, &now));
    EXPECT_EQ(now.data, out.data);
    if (pin) {
      EXPECT_EQ(code_of([&] { rt->unpin(victim); }), CXLT_OK) << "the pin is not on the block";
    }
    EXPECT_EQ(rt->validate(), "");
  }
}

// A batch that fails part way (here where the tier's backend refuses the extent its third
// block needs) rolls back: every block it placed leaves again with the state it had before, and
// the store's forget order follows those states. A and B have one score, and A the older last
// access, so A comes first in that order; their admission gave both the newest last access,
// and A, placed first and so unplaced last, goes back behind B until its state is restored:
// validate() checks the order.
TEST(Batch, RollbackRestoresStatesAndTheForgetOrder) {
  RuntimeConfig cfg = three_tier_config(6, 0, 0, "faulty");
  cfg.tiers.resize(1);
  cfg.extent_blocks = 2;  // A and B fit the tier's first extent; N needs a second
  cfg.synchronous = true;
  cfg.store_capacity = 8;
  auto rt = Runtime::open(cfg);
  const std::vector<Key> k = seq(9, 3);
  const Key &a = k[0], &b = k[1], &n = k[2];
  const float one = 1.0f;
  rt->admit(a);
  rt->access(&a, &one, 1);
  rt->step();
  rt->admit(b);
  rt->access(&b, &one, 1);
  rt->step();
  rt->release(a, true);  // resident nowhere, remembered
  rt->release(b, true);
  cxlt_policy_state_t before_a{}, before_b{};
  ASSERT_TRUE(rt->policy_state(a, &before_a));
  ASSERT_TRUE(rt->policy_state(b, &before_b));
  ASSERT_EQ(before_a.score, before_b.score);
  ASSERT_LT(before_a.last_access_step, before_b.last_access_step);
  ASSERT_LT(before_a.tier, 0);
  ASSERT_LT(before_b.tier, 0);
  FaultPlan plan;
  plan.alloc_successes = 0;
  plan.alloc_failures = -1;
  RuntimeTestAccess::faults(*rt, 0)->arm(plan);
  std::vector<Block> out(3);
  EXPECT_EQ(code_of([&] { rt->admit_batch(k.data(), 3, false, out.data(), nullptr); }), CXLT_ERROR_BACKEND);
  EXPECT_EQ(RuntimeTestAccess::faults(*rt, 0)->counts().allocs_failed, 1u) << "the batch did not fail where the test means";
  for (const auto &[key, was] : {std::pair{a, before_a}, std::pair{b, before_b}}) {
    cxlt_policy_state_t st{};
    ASSERT_TRUE(rt->policy_state(key, &st));
    EXPECT_LT(st.tier, 0);
    EXPECT_EQ(st.score, was.score);
    EXPECT_EQ(st.accesses, was.accesses);
    EXPECT_EQ(st.last_access_step, was.last_access_step);
  }
  EXPECT_FALSE(rt->policy_state(n, nullptr));
  EXPECT_EQ(rt->validate(), "");
}

TEST(Batch, PrefixPinHoldsWhileOthersEvict) {
  RuntimeConfig cfg = three_tier_config(8, 8, 16);
  auto rt = Runtime::open(cfg);
  const size_t bytes = cfg.geometry.bytes();
  std::vector<Key> prompt = seq(7, 12);
  std::vector<Block> b(prompt.size());
  bool placed[12];
  rt->admit_batch(prompt.data(), prompt.size(), true, b.data(), placed);
  for (size_t i = 0; i < prompt.size(); ++i) fill_block(b[i].data, bytes, prompt[i], 1);
  rt->unpin_batch(prompt.data(), prompt.size());
  std::atomic<bool> stop{false};
  std::thread churn([&] {  // prefills of other requests: they evict whatever is unpinned
    std::vector<Block> ob(8);
    for (uint64_t r = 100; !stop.load(); ++r) {
      std::vector<Key> k = seq(r, 8);
      try {
        rt->admit_batch(k.data(), k.size(), true, ob.data(), nullptr);
        for (size_t i = 0; i < k.size(); ++i) fill_block(ob[i].data, bytes, k[i], r);
        rt->unpin_batch(k.data(), k.size());
      } catch (const Error &e) {
        EXPECT_EQ(e.code(), CXLT_ERROR_OUT_OF_TIER_MEMORY) << e.what();
      }
    }
  });
  size_t hits = 0;
  for (int round = 0; round < 300; ++round) {
    const size_t m = rt->prefix_lookup(prompt.data(), prompt.size(), true, false, b.data());
    hits += m;
    for (size_t i = 0; i < m; ++i) {
      EXPECT_TRUE(check_block(b[i].data, bytes, prompt[i])) << "block " << i << " of a pinned prefix";
      Block now;
      ASSERT_TRUE(rt->lookup(prompt[i], &now));
      EXPECT_EQ(now.data, b[i].data);  // pinned: it did not move
    }
    std::this_thread::yield();
    rt->unpin_batch(prompt.data(), m);
    if (m < prompt.size()) {  // re-admit the lost tail, as an engine recomputes it
      bool p[12];
      rt->admit_batch(prompt.data() + m, prompt.size() - m, true, b.data() + m, p);
      for (size_t i = m; i < prompt.size(); ++i)
        if (p[i - m]) fill_block(b[i].data, bytes, prompt[i], 1);
      rt->unpin_batch(prompt.data() + m, prompt.size() - m);
    }
  }
  stop = true;
  churn.join();
  EXPECT_GT(hits, 0u);
  ASSERT_TRUE(rt->wait_idle(-1));
  EXPECT_EQ(rt->validate(), "");
  EXPECT_EQ(rt->stats().migration_failures, 0u);
}

// Four prefills at once, each of 7 new blocks pinned until the next, in 32 slots: the other
// three hold at most 21 pins, so room for 7 always exists or is about to (a copy in flight, a
// block another prefill holds while it makes its own room). None may be refused for it: the
// calls wait for blocks in passage. The engines also reread their last prefill, so the mover
// promotes and demotes meanwhile.
TEST(Batch, ConcurrentPrefillsWaitForRoomInPassage) {
  RuntimeConfig cfg = three_tier_config(8, 8, 16);
  auto rt = Runtime::open(cfg);
  const size_t bytes = cfg.geometry.bytes();
  constexpr int kThreads = 4, kRounds = 400;
  constexpr size_t kBlocks = 7;
  std::atomic<uint64_t> refused{0}, torn{0};
  std::vector<std::thread> engines;
  for (int t = 0; t < kThreads; ++t)
    engines.emplace_back([&, t] {
      std::vector<Block> b(kBlocks);
      for (int r = 0; r < kRounds; ++r) {
        const std::vector<Key> k = seq(1000u * (t + 1) + r, kBlocks);
        try {
          rt->admit_batch(k.data(), k.size(), true, b.data(), nullptr);
        } catch (const Error &e) {
          EXPECT_EQ(e.code(), CXLT_ERROR_OUT_OF_TIER_MEMORY) << e.what();
          if (refused++ == 0) ADD_FAILURE() << "refused: " << e.what();
          continue;
        }
        for (size_t i = 0; i < kBlocks; ++i) fill_block(b[i].data, bytes, k[i], r);
        rt->access(k.data(), nullptr, k.size());
        rt->step();
        for (size_t i = 0; i < kBlocks; ++i)
          if (!check_block(b[i].data, bytes, k[i])) ++torn;
        rt->unpin_batch(k.data(), k.size());
      }
    });
  for (std::thread &e : engines) e.join();
  EXPECT_EQ(refused.load(), 0u);
  EXPECT_EQ(torn.load(), 0u);
  ASSERT_TRUE(rt->wait_idle(-1));
  EXPECT_EQ(rt->validate(), "");
  EXPECT_EQ(rt->stats().migration_failures, 0u);
}

TEST(Batch, ReleaseAndUnpinCheckFirst) {
  auto rt = Runtime::open(three_tier_config(4, 4, 8));
  std::vector<Key> k = seq(1, 4);
  std::vector<Block> b(4);
  rt->admit_batch(k.data(), 4, false, b.data(), nullptr);
  rt->pin(k[3]);
  EXPECT_EQ(code_of([&] { rt->release_batch(k.data(), 4, true); }), CXLT_ERROR_BUSY);
  for (const Key &x : k) EXPECT_TRUE(rt->lookup(x, nullptr));
  std::vector<Key> twice = {k[0], k[1], k[0]};
  EXPECT_EQ(code_of([&] { rt->release_batch(twice.data(), 3, true); }), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(rt->lookup(k[1], nullptr));
  std::vector<Key> over = {k[3], k[3]};  // pinned once, given twice
  EXPECT_EQ(code_of([&] { rt->unpin_batch(over.data(), 2); }), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(code_of([&] { rt->release(k[3], false); }), CXLT_ERROR_BUSY);  // still pinned
  rt->unpin_batch(over.data(), 1);
  rt->release_batch(k.data(), 4, false);
  EXPECT_EQ(code_of([&] { rt->release_batch(k.data(), 1, false); }), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rt->prefix_lookup(k.data(), 4, false, false, b.data()), 4u);  // released: cached still
  rt->release_batch(k.data(), 4, true);
  EXPECT_EQ(rt->prefix_lookup(k.data(), 4, true, false, b.data()), 0u);
  EXPECT_EQ(rt->validate(), "");
}

TEST(Batch, PinCountLimitIsCheckedFirst) {
  auto rt = Runtime::open(three_tier_config(4, 4, 8));
  const Key k = key_from_sequence(1, 0), other = key_from_sequence(1, 1);
  rt->admit(k);
  for (int i = 0; i < 0xfffe; ++i) rt->pin(k);  // one pin short of the limit
  std::vector<Block> b(3);
  std::vector<Key> twice = {other, k, k};
  EXPECT_EQ(code_of([&] { rt->admit_batch(twice.data(), 3, true, b.data(), nullptr); }), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_FALSE(rt->lookup(other, nullptr));  // nothing admitted
  EXPECT_EQ(code_of([&] { rt->prefix_lookup(twice.data() + 1, 2, true, false, b.data()); }), CXLT_ERROR_INVALID_ARGUMENT);
  rt->admit(other);
  std::vector<Key> pair = {k, other};  // two distinct keys: k takes the last pin there is
  EXPECT_EQ(rt->prefix_lookup(pair.data(), 2, true, false, b.data()), 2u);
  rt->unpin(other);
  EXPECT_EQ(code_of([&] { rt->pin(k); }), CXLT_ERROR_INVALID_ARGUMENT);  // so the refused calls pinned nothing
  std::vector<Key> all(0xffff, k);
  rt->unpin_batch(all.data(), all.size());
  EXPECT_EQ(code_of([&] { rt->unpin(k); }), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rt->validate(), "");
}

}  // namespace
