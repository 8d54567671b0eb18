// SPDX-License-Identifier: Apache-2.0
// Accesses by handle recorded without the runtime's mutex (lib/runtime/access_log.cpp): stale
// handles still refused at the call, every recorded access visible to the next query, batches
// larger than a buffer, and engine threads recording while another thread admits, drops,
// steps and validates (every access that returned is counted exactly once).
#include "../common/thrown.hpp"
#include "runtime_test_util.hpp"

#include "lib/runtime/access_log.hpp"

#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

using namespace cxltier;
using cxlt_test::code_of;

namespace {

Key K(uint64_t i) { return key_from_sequence(11, i); }

// One null tier of `blocks` blocks, synchronous, a store of `capacity` states.
RuntimeConfig one_tier(uint32_t blocks, uint64_t capacity) {
  RuntimeConfig cfg = cxlt_test::three_tier_config(blocks, 0, 0, "null");
  cfg.tiers.resize(1);
  cfg.synchronous = true;
  cfg.store_capacity = capacity;
  return cfg;
}

}  // namespace

TEST(AccessLog, StaleHandlesAreRefusedAtTheCall) {
  auto rt = Runtime::open(one_tier(2, 2));
  const uint64_t a = rt->admit(K(1)).handle;
  rt->admit(K(2));
  rt->access_handles(&a, nullptr, 1);
  rt->release(K(1), /*forget=*/true);  // resident nowhere, its state kept
  EXPECT_EQ(code_of([&] { rt->access_handles(&a, nullptr, 1); }), CXLT_ERROR_NOT_FOUND);
  // Admitted again: the same key keeps its id and generation, so the handle is good again.
  EXPECT_EQ(rt->admit(K(1)).handle, a);
  EXPECT_EQ(code_of([&] { rt->access_handles(&a, nullptr, 1); }), CXLT_OK);
  // Forgotten and its id reused by another key: the old handle names a newer generation.
  rt->release(K(1), true);
  const uint64_t c = rt->admit(K(3)).handle;  // the store is full: K(1)'s state is forgotten
  EXPECT_EQ(c & 0xffffffffu, a & 0xffffffffu) << "the test needs K(3) to reuse K(1)'s id";
  EXPECT_NE(c, a);
  EXPECT_EQ(code_of([&] { rt->access_handles(&a, nullptr, 1); }), CXLT_ERROR_NOT_FOUND);
  // A batch with one stale handle records nothing.
  const uint64_t both[2] = {c, a};
  EXPECT_EQ(code_of([&] { rt->access_handles(both, nullptr, 2); }), CXLT_ERROR_NOT_FOUND);
  cxlt_policy_state_t st{};
  ASSERT_TRUE(rt->policy_state(K(3), &st));
  EXPECT_EQ(st.accesses, 0u);
  EXPECT_EQ(rt->validate(), "");
}

TEST(AccessLog, EveryQuerySeesTheRecordedAccesses) {
  auto rt = Runtime::open(one_tier(8, 64));
  const uint64_t h = rt->admit(K(1)).handle;
  const float att = 0.5f;
  rt->access_handles(&h, &att, 1);
  cxlt_policy_state_t st{};
  ASSERT_TRUE(rt->policy_state(K(1), &st));
  EXPECT_EQ(st.accesses, 1u);
  EXPECT_GT(st.score, 0.0);
  rt->access_handles(&h, &att, 1);
  EXPECT_EQ(rt->stats().accesses, 2u);
  EXPECT_EQ(rt->stats().tier[0].hits, 2u);
  // Recorded at step 0, then the step advances: the access counts at the step it was made in.
  rt->access_handles(&h, &att, 1);
  rt->step();
  ASSERT_TRUE(rt->policy_state(K(1), &st));
  EXPECT_EQ(st.accesses, 3u);
  EXPECT_EQ(st.last_access_step, 0u);
  EXPECT_EQ(rt->validate(), "");
}

TEST(AccessLog, BatchLargerThanABufferIsApplied) {
  const uint32_t n = 5000;  // above AccessLog::kCapacity
  auto rt = Runtime::open(one_tier(n, n));
  std::vector<uint64_t> h(n);
  std::vector<float> att(n, 1.0f);
  for (uint32_t i = 0; i < n; ++i) h[i] = rt->admit(K(i)).handle;
  rt->access_handles(h.data(), att.data(), n);
  rt->access_handles(h.data(), att.data(), 100);  // small: goes through a buffer
  EXPECT_EQ(rt->stats().accesses, n + 100u);
  cxlt_policy_state_t st{};
  ASSERT_TRUE(rt->policy_state(K(n - 1), &st));
  EXPECT_EQ(st.accesses, 1u);
  ASSERT_TRUE(rt->policy_state(K(0), &st));
  EXPECT_EQ(st.accesses, 2u);
  EXPECT_EQ(rt->validate(), "");
}

// Two engine threads record accesses to their own blocks (re-admitting one when it was dropped)
// while a third admits fresh blocks into full tiers (dropping others), steps, reads states and
// validates. Every access whose call returned is counted once; the invariants hold throughout.
TEST(AccessLog, EngineThreadsRecordWhileAnotherThreadAdmitsAndDrops) {
  RuntimeConfig cfg = cxlt_test::three_tier_config(32, 32, 32, "null");
  cfg.synchronous = false;
  cfg.store_capacity = 1u << 14;
  auto rt = Runtime::open(cfg);
  constexpr int kOwn = 16, kRounds = 3000;
  std::atomic<uint64_t> recorded{0};
  std::atomic<bool> done{false};
  auto engine = [&](uint64_t base) {
    std::vector<uint64_t> h(kOwn);
    std::vector<float> att(kOwn, 0.25f);
    for (int i = 0; i < kOwn; ++i) h[i] = rt->admit(K(base + i)).handle;
    for (int r = 0; r < kRounds; ++r) {
      try {
        rt->access_handles(h.data(), att.data(), kOwn);
        recorded += kOwn;
      } catch (const Error &e) {
        ASSERT_EQ(e.code(), CXLT_ERROR_NOT_FOUND);
        for (int i = 0; i < kOwn; ++i) h[i] = rt->admit(K(base + i)).handle;  // dropped: back in
      }
    }
  };
  std::string bad;
  std::thread admitter([&] {
    uint64_t next = 1000000;
    while (!done.load()) {
      for (int i = 0; i < 8; ++i) rt->admit(K(next++));
      rt->step();
      cxlt_policy_state_t st{};
      rt->policy_state(K(0), &st);
      if (bad.empty()) bad = rt->validate();
    }
  });
  std::thread e1(engine, 0), e2(engine, 100);
  e1.join();
  e2.join();
  done = true;
  admitter.join();
  EXPECT_EQ(bad, "");
  ASSERT_TRUE(rt->wait_idle(10000));
  EXPECT_EQ(rt->stats().accesses, recorded.load());
  EXPECT_EQ(rt->validate(), "");
}

// The residency table grows in chunks of 2^kChunkBits ids: words on both sides of a chunk
// boundary, in a chunk added later, read back as published, and ids past the chunks read as
// resident nowhere.
TEST(AccessLog, ResidencyWordsAcrossChunks) {
  using cxltier::ResidencyTable;
  constexpr size_t kChunk = size_t{1} << ResidencyTable::kChunkBits;
  ResidencyTable t;
  t.ensure(kChunk + 1);  // two chunks
  const cxltier::NodeId ids[] = {0, static_cast<cxltier::NodeId>(kChunk - 1), static_cast<cxltier::NodeId>(kChunk)};
  for (cxltier::NodeId id : ids) t.publish(id, 7, true);
  for (cxltier::NodeId id : ids) {
    EXPECT_TRUE(t.resident((uint64_t{7} << 32) | id)) << id;
    EXPECT_FALSE(t.resident((uint64_t{8} << 32) | id)) << id << ": another generation";
    EXPECT_EQ(t.word(id), (uint64_t{7} << 1) | 1u) << id;
  }
  const cxltier::NodeId far = static_cast<cxltier::NodeId>(2 * kChunk + 5);
  EXPECT_FALSE(t.resident((uint64_t{1} << 32) | far)) << "no chunk holds it yet";
  EXPECT_EQ(t.word(far), 0u);
  t.ensure(far + 1);  // a third chunk, after the first two were written
  t.publish(far, 1, true);
  EXPECT_TRUE(t.resident((uint64_t{1} << 32) | far));
  EXPECT_TRUE(t.resident((uint64_t{7} << 32) | ids[2])) << "an earlier chunk kept its words";
  t.publish(ids[1], 7, false);
  EXPECT_FALSE(t.resident((uint64_t{7} << 32) | ids[1]));
  EXPECT_EQ(t.bytes(), ResidencyTable::kChunks * sizeof(void *) + 3 * kChunk * sizeof(uint64_t));
}
