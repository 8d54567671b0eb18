// SPDX-License-Identifier: Apache-2.0
// Accesses by handle, applied at the call or through the log (lib/runtime/access_log.cpp): stale
// handles still refused at the call, every recorded access visible to the next query, batches
// larger than a buffer, and engine threads recording while another thread admits, drops,
// steps and validates (every access that returned is counted exactly once); and the drain's
// decisions against the locked path's on the same randomized workload.
#include "../common/thrown.hpp"
#include "runtime_test_util.hpp"

#include "lib/runtime/access_log.hpp"
#include "lib/runtime/parallel_drain.hpp"
#include "lib/runtime/test_access.hpp"

#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <string>
#include <random>
#include <thread>
#include <utility>
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

// Run twice: with the blocks' ids below LowIdWords::kIds, whose handles are checked against
// residency words, and with ids past them (kIds other blocks admitted first), whose handles are
// checked against the store entries.
TEST(AccessLog, StaleHandlesAreRefusedAtTheCall) {
  for (const uint32_t before : {uint32_t{0}, uint32_t{LowIdWords::kIds}}) {
    SCOPED_TRACE(before);
    auto rt = Runtime::open(one_tier(before + 2, before + 2));
    for (uint32_t i = 0; i < before; ++i) rt->admit(K(1000000 + i));
    const uint64_t a = rt->admit(K(1)).handle;
    EXPECT_EQ(a & 0xffffffffu, before) << "the ids the test means to check";
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
}

// Run twice: batches applied at the call (the mutex free), and every batch
// through the log (RuntimeTestAccess::apply_at_call off).
TEST(AccessLog, EveryQuerySeesTheRecordedAccesses) {
  for (const bool at_call : {true, false}) {
  SCOPED_TRACE(at_call ? "applied at the call" : "through the log");
  auto rt = Runtime::open(one_tier(8, 64));
  RuntimeTestAccess::apply_at_call(*rt, at_call);
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
  EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*rt), at_call ? 3u : 0u);
  EXPECT_EQ(rt->validate(), "");
  }
}

// A batch is applied at the call when the mutex is free; records the
// thread appended to the log before (the mutex was taken then) come first. Two accesses of one
// block with different attention give a different score in the other order.
TEST(AccessLog, ABatchAppliedAtTheCallComesAfterTheRecordsBeforeIt) {
  RuntimeConfig cfg = one_tier(8, 64);
  cfg.lrfu.alpha = 0.5;
  auto rt = Runtime::open(cfg);
  const uint64_t h = rt->admit(K(1)).handle;
  cxlt_policy_state_t before{}, st{};
  ASSERT_TRUE(rt->policy_state(K(1), &before));
  const float first = 0.25f, second = 1.0f;
  ASSERT_TRUE(RuntimeTestAccess::append_unchecked(*rt, &h, &first, 1));  // as if M had been taken
  rt->access_handles(&h, &second, 1);
  EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*rt), 1u);
  ASSERT_TRUE(rt->policy_state(K(1), &st));
  EXPECT_EQ(st.accesses, before.accesses + 2);
  EXPECT_EQ(st.score, lrfu_update(lrfu_update(before.score, first, 0.5), second, 0.5));
  EXPECT_NE(st.score, lrfu_update(lrfu_update(before.score, second, 0.5), first, 0.5)) << "the test needs order to matter";
  EXPECT_EQ(rt->validate(), "");
}

// A batch that fits its shard never waits for the runtime's mutex held by a thread other than an
// engine thread applying its batch: with another thread holding it, the batch goes to the log,
// and the next query shows it once the mutex is free.
TEST(AccessLog, ABatchNeverWaitsForTheMutex) {
  auto rt = Runtime::open(one_tier(8, 64));
  const uint64_t h = rt->admit(K(1)).handle;
  cxlt_policy_state_t before{}, st{};
  ASSERT_TRUE(rt->policy_state(K(1), &before));
  std::promise<void> held, release;
  std::thread holder([&] {
    auto lk = RuntimeTestAccess::lock_mutex(*rt);
    held.set_value();
    release.get_future().wait();
  });
  held.get_future().wait();
  auto call = std::async(std::launch::async, [&] { rt->access_handles(&h, nullptr, 1); });
  const bool returned = call.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  release.set_value();
  holder.join();
  call.get();
  ASSERT_TRUE(returned) << "access_handles waited for the mutex another thread held";
  EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*rt), 0u);
  ASSERT_TRUE(rt->policy_state(K(1), &st));
  EXPECT_EQ(st.accesses, before.accesses + 1);
  EXPECT_EQ(rt->validate(), "");
}

// With few ids, a second engine thread's first access counts its shard, whether or not its
// batch was applied at the call, and from then on no batch is applied at the call: they go
// through the log, and the thread that drains applies them, every line staying in its core.
// With many ids (the lines come from memory), every engine thread applies its batch at the
// call when it can take the mutex: a second engine thread's too, in a shard of its own, and the
// first thread's after it. With no waiter for the mutex that is every batch here.
namespace {
void second_engine_thread(bool many_ids) {
  const uint32_t blocks = many_ids ? LowIdWords::kIds + 64 : 8;
  auto rt = Runtime::open(one_tier(blocks, blocks + 64));
  for (uint32_t i = 2; i < blocks; ++i) rt->admit(K(i));
  const uint64_t h = rt->admit(K(1)).handle;
  ASSERT_EQ(RuntimeTestAccess::prefetches_ahead(*rt), many_ids) << "the test needs the check by entry, or by word";
  cxlt_policy_state_t before{}, st{};
  ASSERT_TRUE(rt->policy_state(K(1), &before));
  rt->access_handles(&h, nullptr, 1);
  ASSERT_EQ(RuntimeTestAccess::batches_applied_at_call(*rt), 1u);
  // Each of the first AccessLog::kShards threads to record in a runtime owns a shard there,
  // whatever other runtimes they record in.
  auto other = Runtime::open(one_tier(8, 64));
  const uint64_t oh = other->admit(K(1)).handle;
  const int mine = RuntimeTestAccess::thread_shard(*rt);
  int theirs = mine;
  uint32_t calls = 1;
  std::thread([&] {
    other->access_handles(&oh, nullptr, 1);
    rt->access_handles(&h, nullptr, 1);
    theirs = RuntimeTestAccess::thread_shard(*rt);
  }).join();
  ++calls;
  ASSERT_NE(theirs, -1);
  ASSERT_NE(theirs, mine);
  if (many_ids) {
    EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*rt), 2u) << "the second engine thread's batch went through the log";
  }
  const uint64_t at_call = RuntimeTestAccess::batches_applied_at_call(*rt);
  rt->access_handles(&h, nullptr, 1);
  ++calls;
  if (many_ids) {
    EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*rt), 3u) << "a batch went through the log beside a second engine thread";
  } else {
    EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*rt), at_call) << "a batch applied at the call beside a second engine thread";
  }
  ASSERT_TRUE(rt->policy_state(K(1), &st));
  EXPECT_EQ(st.accesses, before.accesses + calls);
  EXPECT_EQ(rt->validate(), "");
}
}  // namespace

TEST(AccessLog, WithFewIdsASecondEngineThreadSendsEveryBatchThroughTheLog) { second_engine_thread(false); }

TEST(AccessLog, WithManyIdsEveryEngineThreadAppliesItsBatchAtTheCall) { second_engine_thread(true); }

// A call waiting for the runtime's mutex (a query here) counts itself, and while any thread is
// counted so, an engine thread leaves the mutex to it: its batch goes through the log even with
// the mutex free, and the next query shows it.
TEST(AccessLog, EngineThreadsLeaveTheMutexToAWaitingCall) {
  auto rt = Runtime::open(one_tier(8, 64));
  const uint64_t h = rt->admit(K(1)).handle;
  cxlt_policy_state_t before{}, st{};
  ASSERT_TRUE(rt->policy_state(K(1), &before));
  ASSERT_EQ(RuntimeTestAccess::lock_waiters(*rt), 0u);
  {
    auto held = RuntimeTestAccess::lock_mutex(*rt);
    auto query = std::async(std::launch::async, [&] {
      cxlt_policy_state_t q{};
      return rt->policy_state(K(1), &q);
    });
    bool counted = false;
    for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
         !counted && std::chrono::steady_clock::now() < until;)
      if (!(counted = RuntimeTestAccess::lock_waiters(*rt) == 1)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    held.unlock();
    EXPECT_TRUE(query.get());
    ASSERT_TRUE(counted) << "a query waiting for the mutex was not counted";
  }
  EXPECT_EQ(RuntimeTestAccess::lock_waiters(*rt), 0u) << "the query did not count itself out";
  RuntimeTestAccess::add_lock_waiters(*rt, 1);  // as a query waiting for the mutex looks
  rt->access_handles(&h, nullptr, 1);
  RuntimeTestAccess::add_lock_waiters(*rt, -1);
  EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*rt), 0u) << "the batch took the mutex ahead of a waiting call";
  ASSERT_TRUE(rt->policy_state(K(1), &st));
  EXPECT_EQ(st.accesses, before.accesses + 1);
  rt->access_handles(&h, nullptr, 1);
  EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*rt), 1u);
  EXPECT_EQ(rt->validate(), "");
}

// With many ids, an engine thread that finds another applying its batch at the call waits for
// it and applies its own batch at the call too; a call that counts itself waiting for the mutex
// ends the wait, and the batch goes through the log; a holder not applying a batch (a query, the
// mover) is not waited for at all. The wait is made long here (20 s) so that the other thread's
// release always comes within it.
TEST(AccessLog, AnEngineThreadWaitsForAnotherApplyingItsBatch) {
  const uint32_t blocks = LowIdWords::kIds + 64;
  auto rt = Runtime::open(one_tier(blocks, blocks + 64));
  for (uint32_t i = 2; i < blocks; ++i) rt->admit(K(i));
  const uint64_t h = rt->admit(K(1)).handle;
  ASSERT_TRUE(RuntimeTestAccess::prefetches_ahead(*rt)) << "the test needs the check by entry";
  cxlt_policy_state_t before{}, st{};
  ASSERT_TRUE(rt->policy_state(K(1), &before));
  rt->access_handles(&h, nullptr, 1);  // this thread's shard: the other thread's is a second
  RuntimeTestAccess::set_at_call_wait_us(*rt, 20'000'000);
  {
    SCOPED_TRACE("a holder not applying a batch");
    const uint64_t at_call = RuntimeTestAccess::batches_applied_at_call(*rt);
    auto held = RuntimeTestAccess::lock_mutex(*rt);
    auto call = std::async(std::launch::async, [&] { rt->access_handles(&h, nullptr, 1); });
    const bool returned = call.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    held.unlock();
    call.get();
    EXPECT_TRUE(returned) << "the engine thread waited for a holder not applying a batch";
    EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*rt), at_call);
  }
  for (const bool waiter : {false, true}) {
    SCOPED_TRACE(waiter ? "a call counted waiting" : "the holder releases");
    const uint64_t at_call = RuntimeTestAccess::batches_applied_at_call(*rt);
    auto held = RuntimeTestAccess::hold_as_at_call(*rt);
    const uint64_t waits = RuntimeTestAccess::at_call_waits(*rt);
    std::atomic<bool> returned{false};
    std::thread engine([&] {
      rt->access_handles(&h, nullptr, 1);
      returned = true;
    });
    bool waiting = false;
    for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
         !waiting && !returned && std::chrono::steady_clock::now() < until;)
      if (!(waiting = RuntimeTestAccess::at_call_waits(*rt) > waits)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (waiter) {
      RuntimeTestAccess::add_lock_waiters(*rt, 1);
      // The batch goes to the log, the mutex still held here: well within the 20 s wait.
      for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
           !returned && std::chrono::steady_clock::now() < until;)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const bool returned_held = returned.load();
      RuntimeTestAccess::add_lock_waiters(*rt, -1);
      RuntimeTestAccess::release_as_at_call(*rt, held);
      engine.join();
      EXPECT_TRUE(returned_held) << "the engine thread went on waiting beside a counted waiter";
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      const bool returned_early = returned.load();
      RuntimeTestAccess::release_as_at_call(*rt, held);
      engine.join();
      EXPECT_FALSE(returned_early) << "the engine thread did not wait for the mutex";
    }
    ASSERT_TRUE(waiting) << "the engine thread did not begin to wait";
    EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*rt), at_call + (waiter ? 0 : 1));
  }
  ASSERT_TRUE(rt->policy_state(K(1), &st));
  EXPECT_EQ(st.accesses, before.accesses + 4);
  EXPECT_EQ(rt->validate(), "");
}

// A batch applied at the call drains what waits in the log first, in parts when enough records
// of more than one engine thread wait (parallel_drain.cpp): every access counted once.
TEST(AccessLog, ABatchAppliedAtTheCallDrainsTheLogInParts) {
  constexpr uint32_t kBlocks = 20000;
  constexpr size_t kPerThread = 1536, kBatch = 512;
  auto rt = Runtime::open(one_tier(kBlocks, kBlocks + 64));
  std::vector<uint64_t> handles(kBlocks);
  for (uint32_t i = 0; i < kBlocks; ++i) handles[i] = rt->admit(K(i)).handle;
  ASSERT_TRUE(RuntimeTestAccess::prefetches_ahead(*rt));
  std::vector<cxlt_policy_state_t> before(kBlocks);
  for (uint32_t i = 0; i < kBlocks; ++i) ASSERT_TRUE(rt->policy_state(K(i), &before[i]));
  std::vector<uint32_t> count(kBlocks, 0);
  std::vector<uint64_t> batch[2];
  std::mt19937_64 rng(5);
  for (auto &b : batch)
    for (size_t i = 0; i < kPerThread; ++i) {
      const uint32_t id = static_cast<uint32_t>(rng() % kBlocks);
      b.push_back(handles[id]);
      ++count[id];
    }
  RuntimeTestAccess::apply_at_call(*rt, false);  // both threads' records wait in the log
  const auto record = [&](const std::vector<uint64_t> &b) {
    for (size_t at = 0; at < b.size(); at += kBatch) rt->access_handles(b.data() + at, nullptr, kBatch);
  };
  std::thread other([&] { record(batch[1]); });
  other.join();
  record(batch[0]);
  RuntimeTestAccess::apply_at_call(*rt, true);
  const uint64_t drains = RuntimeTestAccess::parallel_drains(*rt), at_call = RuntimeTestAccess::batches_applied_at_call(*rt);
  rt->access_handles(&handles[7], nullptr, 1);
  ++count[7];
  EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*rt), at_call + 1);
  EXPECT_EQ(RuntimeTestAccess::parallel_drains(*rt), drains + 1) << "the log was not drained in parts";
  for (uint32_t i = 0; i < kBlocks; ++i) {
    cxlt_policy_state_t st{};
    ASSERT_TRUE(rt->policy_state(K(i), &st));
    ASSERT_EQ(st.accesses, before[i].accesses + count[i]) << "block " << i;
  }
  EXPECT_EQ(rt->validate(), "");
}

// Each of the first AccessLog::kShards threads to record in a runtime owns a shard of its own
// there (the lowest free at its first access), whatever other runtimes they recorded in before
// and in whatever order; later threads share one, always the same for a thread. Ten threads
// record in another runtime one after another, then in this one in another order: the first
// and the ninth first (a shard number kept per thread, or one drawn from an order kept per
// thread, would put them in one shard).
TEST(AccessLog, TheFirstThreadsToRecordOwnAShardEach) {
  constexpr size_t kThreads = AccessLog::kShards + 2;
  auto rt = Runtime::open(one_tier(8, 64));
  auto before = Runtime::open(one_tier(8, 64));
  const uint64_t h = rt->admit(K(1)).handle, bh = before->admit(K(1)).handle;
  const size_t order[kThreads] = {0, 8, 1, 2, 3, 4, 5, 6, 7, 9};  // in this runtime
  size_t place[kThreads];
  for (size_t p = 0; p < kThreads; ++p) place[order[p]] = p;
  std::mutex mu;
  std::condition_variable cv;
  size_t turn = 0;
  std::vector<int> shard(kThreads, -2), unclaimed(kThreads, -2);
  auto wait_turn = [&](size_t t) {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return turn == t; });
  };
  auto next_turn = [&] {
    std::lock_guard lk(mu);
    ++turn;
    cv.notify_all();
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      wait_turn(t);
      before->access_handles(&bh, nullptr, 1);
      next_turn();
      wait_turn(kThreads + place[t]);
      unclaimed[t] = RuntimeTestAccess::thread_shard(*rt);
      rt->access_handles(&h, nullptr, 1);
      shard[t] = RuntimeTestAccess::thread_shard(*rt);
      rt->access_handles(&h, nullptr, 1);
      if (RuntimeTestAccess::thread_shard(*rt) != shard[t]) shard[t] = -3;  // moved: its order would break
      // Back to the other runtime and here again: the shard found afresh is the same.
      before->access_handles(&bh, nullptr, 1);
      rt->access_handles(&h, nullptr, 1);
      if (RuntimeTestAccess::thread_shard(*rt) != shard[t]) shard[t] = -4;
      next_turn();
    });
  for (auto &th : threads) th.join();
  for (size_t p = 0; p < kThreads; ++p) {
    const size_t t = order[p];
    if (p < AccessLog::kShards) {
      EXPECT_EQ(unclaimed[t], -1) << "thread " << t;
      EXPECT_EQ(shard[t], static_cast<int>(p)) << "thread " << t;
    } else {
      EXPECT_EQ(unclaimed[t], -1) << "thread " << t;  // it owns none and has not recorded here
      EXPECT_GE(shard[t], 0) << "thread " << t;
      EXPECT_LT(shard[t], static_cast<int>(AccessLog::kShards)) << "thread " << t;
    }
  }
  cxlt_policy_state_t st{};
  ASSERT_TRUE(rt->policy_state(K(1), &st));
  EXPECT_EQ(st.accesses, 3 * kThreads);
  EXPECT_EQ(rt->validate(), "");
}

TEST(AccessLog, BatchLargerThanABufferIsApplied) {
  const uint32_t n = 5000;  // above AccessLog::kCapacity
  auto rt = Runtime::open(one_tier(n, n));
  RuntimeTestAccess::apply_at_call(*rt, false);  // the small batch goes through a buffer
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
// Run twice: in a store of 2^14 states, whose ids all have residency words (LowIdWords), and
// in one of 2^14 + 64 filled before the threads start (2^14 + 64 blocks admitted, most of them
// dropped since), so that handles are checked against the store entries: every block the
// engines and the admitter admit then takes the id of a forgotten state, most of them below
// 2^14, and the admitter also records an access to each block it admits. The test checks that
// accesses to blocks with such ids were recorded.
TEST(AccessLog, EngineThreadsRecordWhileAnotherThreadAdmitsAndDrops) {
  for (const uint32_t before : {uint32_t{0}, uint32_t{LowIdWords::kIds}}) {
    SCOPED_TRACE(before);
    RuntimeConfig cfg = cxlt_test::three_tier_config(32, 32, 32, "null");
    cfg.synchronous = false;
    cfg.store_capacity = before ? before + 64 : 1u << 14;
    auto rt = Runtime::open(cfg);
    for (uint32_t i = 0; before != 0 && i < before + 64; ++i) rt->admit(K(2000000 + i));
    constexpr int kOwn = 16, kRounds = 3000;
    std::atomic<uint64_t> recorded{0}, low_ids{0};
    std::atomic<bool> done{false};
    auto engine = [&](uint64_t base) {
      std::vector<uint64_t> h(kOwn);
      std::vector<float> att(kOwn, 0.25f);
      for (int i = 0; i < kOwn; ++i) h[i] = rt->admit(K(base + i)).handle;
      for (int r = 0; r < kRounds; ++r) {
        try {
          rt->access_handles(h.data(), att.data(), kOwn);
          recorded += kOwn;
          if (before != 0)
            for (uint64_t x : h) low_ids += (x & 0xffffffffu) < LowIdWords::kIds;
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
        uint64_t fresh[8];
        for (int i = 0; i < 8; ++i) fresh[i] = rt->admit(K(next++)).handle;
        if (before != 0) {
          try {
            rt->access_handles(fresh, nullptr, 8);
            recorded += 8;
            for (uint64_t h : fresh) low_ids += (h & 0xffffffffu) < LowIdWords::kIds;
          } catch (const Error &e) {
            if (e.code() != CXLT_ERROR_NOT_FOUND && bad.empty()) bad = e.what();  // dropped already: fine
          }
        }
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
    if (before != 0) {
      EXPECT_GT(low_ids.load(), 0u) << "no reused id below 2^14 was checked by its entry";
    }
  }
}

// Three engine threads record overlapping random batches over 20,000 resident blocks (enough
// ids that the drain is applied in parts, lib/runtime/parallel_drain.cpp), while the main
// thread reads states and stats (each such call drains, so it is the draining thread while the
// engines help). Each round is one step; with one attention value for all accesses of a round
// the order of one step's accesses to a block does not change its score, so after the round
// every block must show exactly its
// count of accesses and the score that count gives, and the runtime must validate. Run on one
// synchronous tier, and on three tiers with the background mover promoting (which drains too,
// and moves blocks while they are accessed; every block fits somewhere, so none is dropped),
// where every victim is also audited against a full scan (validate reports a disagreement).
namespace {
// *exercised gets what the configuration exercised: drains in parts (batches applied at the
// call, with at_call), for drain_round_trips to check over both configurations.
void drain_in_parts_round_trip(const RuntimeConfig &cfg, uint32_t blocks, bool at_call, uint64_t *exercised) {
  constexpr size_t kBatch = 512, kThreads = 3;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr int kRounds = 3, kBatches = 24;
#else
  constexpr int kRounds = 4, kBatches = 64;
#endif
  auto rt = Runtime::open(cfg);
  RuntimeTestAccess::apply_at_call(*rt, at_call);
  std::vector<uint64_t> handles(blocks);
  for (uint32_t i = 0; i < blocks; ++i) handles[i] = rt->admit(K(i)).handle;
  ASSERT_TRUE(rt->wait_idle(60000));
  uint64_t total = rt->stats().accesses;
  for (int round = 0; round < kRounds; ++round) {
    // Attention 0 in every other round: accessed blocks lose score and become the victims,
    // so a pending block's bound decides the search.
    const float attention = round % 2 ? 0.0f : 1.0f;
    std::vector<cxlt_policy_state_t> before(blocks);
    for (uint32_t i = 0; i < blocks; ++i) ASSERT_TRUE(rt->policy_state(K(i), &before[i]));
    std::vector<std::vector<uint32_t>> counts(kThreads, std::vector<uint32_t>(blocks, 0));
    std::atomic<bool> done{false};
    std::vector<std::thread> engines;
    for (size_t t = 0; t < kThreads; ++t)
      engines.emplace_back([&, t] {
        std::mt19937_64 rng(1000 * round + t);
        std::vector<uint64_t> batch(kBatch);
        const std::vector<float> att(kBatch, attention);
        for (int b = 0; b < kBatches; ++b) {
          for (size_t i = 0; i < kBatch; ++i) {
            const uint32_t id = static_cast<uint32_t>(rng() % blocks);
            batch[i] = handles[id];
            ++counts[t][id];
          }
          rt->access_handles(batch.data(), att.data(), kBatch);
        }
      });
    // The reader's queries drain under the mutex as the engines record. stats() measures the
    // placement every 64th call only: the measure scans every state (with the mutex held) and
    // sorts their keep values, and when the sort too was under the mutex a reader measuring at
    // every call made this test's time depend on how often it won the mutex (4.7 s to 65 s in
    // the plain build).
    std::thread reader([&] {
      std::mt19937_64 rng(round);
      for (unsigned q = 0; !done.load(); ++q) {
        cxlt_policy_state_t st{};
        rt->policy_state(K(rng() % blocks), &st);
        (void)rt->stats(/*measure_placement=*/q % 64 == 0);
      }
    });
    for (auto &e : engines) e.join();
    done = true;
    reader.join();
    total += kThreads * kBatches * kBatch;
    ASSERT_EQ(rt->stats().accesses, total) << "round " << round;
    const LrfuParams lrfu = cfg.lrfu;
    const uint64_t now = rt->current_step();
    for (uint32_t i = 0; i < blocks; ++i) {
      uint32_t k = 0;
      for (size_t t = 0; t < kThreads; ++t) k += counts[t][i];
      cxlt_policy_state_t st{};
      ASSERT_TRUE(rt->policy_state(K(i), &st));
      ASSERT_GE(st.tier, 0) << "block " << i << " was dropped";
      ASSERT_EQ(st.accesses, before[i].accesses + k) << "block " << i << ", round " << round;
      double want = before[i].score;
      for (uint32_t j = 0; j < k; ++j) want = lrfu_access(want, j == 0 ? now - before[i].last_access_step : 0, attention, lrfu);
      ASSERT_EQ(st.score, want) << "block " << i << ", round " << round;
      if (k != 0) {
        ASSERT_EQ(st.last_access_step, now);
      }
    }
    ASSERT_EQ(rt->validate(), "");
    rt->step();
  }
  // How many parts engine threads applied for another thread's drain, and how many batches were
  // applied at the call: timing decides, so they are reported, not asserted.
  ::testing::Test::RecordProperty("parts_helped", std::to_string(RuntimeTestAccess::parts_helped(*rt)));
  std::printf("drains in parts: %llu, parts applied by helping threads: %llu, batches applied at the call: %llu\n",
              static_cast<unsigned long long>(RuntimeTestAccess::parallel_drains(*rt)),
              static_cast<unsigned long long>(RuntimeTestAccess::parts_helped(*rt)),
              static_cast<unsigned long long>(RuntimeTestAccess::batches_applied_at_call(*rt)));
  *exercised = at_call ? RuntimeTestAccess::batches_applied_at_call(*rt) : RuntimeTestAccess::parallel_drains(*rt);
  ASSERT_TRUE(rt->wait_idle(60000));
  EXPECT_EQ(rt->validate(), "");
}

// The round trip on one synchronous tier, then on three tiers with the mover. Some drain must
// go in parts (some batch be applied at the call) over the two: timing decides how many in
// each, and under ThreadSanitizer, with the mover and the reader draining often, the three-tier
// run once had none (its checks of every block's count and score still ran).
void drain_round_trips(bool at_call) {
  constexpr uint32_t kBlocks = 20000;
  uint64_t on_one = 0, on_three = 0;
  drain_in_parts_round_trip(one_tier(kBlocks, 2 * kBlocks), kBlocks, at_call, &on_one);
  RuntimeConfig three = cxlt_test::three_tier_config(kBlocks / 8, kBlocks / 4, kBlocks, "null");
  three.synchronous = false;
  three.store_capacity = 2 * kBlocks;
  three.audit = true;  // every victim the mover's promotions ask for is checked by a full scan
  drain_in_parts_round_trip(three, kBlocks, at_call, &on_three);
  EXPECT_GT(on_one + on_three, 0u) << (at_call ? "no batch was applied at the call" : "no drain was applied in parts")
                           << " in either configuration: the test tests nothing";
}
}  // namespace

TEST(AccessLog, DrainInPartsAppliesEveryAccessOnce) { drain_round_trips(/*at_call=*/false); }

// The same with batches applied at the call: the engine threads take the mutex in turn, each
// waiting for the one applying its batch (access_log.cpp, step 2: 20,000 ids are enough for it),
// while the reader's queries (and, on three tiers, the mover) make them send batches through the
// log, drained by the next call that takes the mutex (in parts where enough records wait).
TEST(AccessLog, EngineThreadsApplyingAtTheCallApplyEveryAccessOnce) { drain_round_trips(/*at_call=*/true); }

// One engine thread's accesses by handle, drained in order by the thread that holds the mutex,
// and applied at the call (access_log.cpp step 2), against access by key (the locked path), on
// the same randomized workload in three runtimes:
// admissions into full tiers (demotions, drops and the LRFU victim searches that choose them),
// batches with repeated blocks, attention values that tie, releases, and states forgotten when
// the store is full. Every decision must come out alike: after every step each key has the same
// state and tier in both. Run below and above the id count from which the drain prefetches, in
// both score modes, with a batch larger than a buffer now and then (applied at the call).
TEST(AccessLog, DrainDecidesAsTheLockedPath) {
  for (const uint32_t scale : {64u, 8192u}) {
    for (const auto &[mode, beta] : {std::pair{ScoreMode::touch, 0.1}, std::pair{ScoreMode::decay, 0.1},
                                     std::pair{ScoreMode::touch, 0.0}}) {
      SCOPED_TRACE("scale " + std::to_string(scale) + ", mode " + score_mode_name(mode) + ", beta " +
                   std::to_string(beta));
      RuntimeConfig cfg = cxlt_test::three_tier_config(scale / 4, scale / 2, scale, "null");
      cfg.synchronous = true;  // no mover: the two runtimes see the same sequence of calls
      cfg.promotion = PromotionRule::never;  // a synchronous promotion takes the locked path
      cfg.store_capacity = 2 * scale;        // below the keys used: states are forgotten too
      cfg.lrfu.mode = mode;
      // An access of zero attention halves the score. With beta 0.1 (large) many blocks of
      // different ages tie once decayed; with beta 0 the order is by score alone, and a block
      // accessed since the last victim search can be the next victim, which only the index's
      // bounds on its pending blocks find.
      cfg.lrfu.alpha = 0.5;
      cfg.lrfu.beta = beta;
      auto by_handle = Runtime::open(cfg);
      auto at_call = Runtime::open(cfg);
      auto by_key = Runtime::open(cfg);
      RuntimeTestAccess::apply_at_call(*by_handle, false);  // every batch through the log
      const uint32_t universe = 3 * scale;
      std::vector<uint64_t> handle(universe, 0);  // by_handle's handle of a resident key, else 0
      std::mt19937_64 rng(scale * 4 + static_cast<unsigned>(mode) * 2 + (beta == 0.0));
      const float ties[4] = {1.0f, 0.5f, 0.0f, 0.0f};
      std::vector<uint64_t> hs;
      std::vector<Key> keys;
      std::vector<float> att;
      std::vector<uint32_t> resident;
      for (int step = 0; step < 30; ++step) {
        for (uint32_t j = 0; j < scale / 4; ++j) {
          const uint32_t k = static_cast<uint32_t>(rng() % universe);
          handle[k] = by_handle->admit(K(k)).handle;
          ASSERT_EQ(at_call->admit(K(k)).handle, handle[k]);
          by_key->admit(K(k));
        }
        resident.clear();
        for (uint32_t k = 0; k < universe; ++k) {
          cxlt_policy_state_t st{};
          if (handle[k] != 0 && by_handle->policy_state(K(k), &st) && st.tier >= 0)
            resident.push_back(k);
          else
            handle[k] = 0;
        }
        ASSERT_FALSE(resident.empty());
        // Mostly small batches, which leave most blocks unaccessed since the last victim search
        // (the index's pending list and its bounds decide then), some that touch nearly all.
        size_t n = 1 + rng() % (step % 3 == 0 ? 2 * scale : scale / 16);
        if (step % 7 == 6 && scale > AccessLog::kCapacity) n = AccessLog::kCapacity + 100;
        hs.clear();
        keys.clear();
        att.clear();
        for (size_t i = 0; i < n; ++i) {
          const uint32_t k = resident[rng() % resident.size()];
          hs.push_back(handle[k]);
          keys.push_back(K(k));
          att.push_back(rng() % 4 == 0 ? static_cast<float>(rng() % 1000) / 1000.0f : ties[rng() % 4]);
        }
        by_handle->access_handles(hs.data(), att.data(), n);
        at_call->access_handles(hs.data(), att.data(), n);
        by_key->access(keys.data(), att.data(), n);
        // Release a few blocks the batch accessed (an access clears a release): the next batch
        // that accesses one clears it again, in the drain as in the locked path.
        for (size_t r = 0; r < 3 && r < n; ++r) {
          if (r > 0 && keys[r] == keys[0]) continue;
          if (r > 1 && keys[r] == keys[1]) continue;
          by_handle->release(keys[r], false);
          at_call->release(keys[r], false);
          by_key->release(keys[r], false);
        }
        by_handle->step();
        at_call->step();
        by_key->step();
        // Every key at every step at the small scale; at the large one every 5th step and the
        // last (a decision that differs shows in the states from then on), which keeps the test
        // to seconds under the sanitizers.
        if (scale > 1024 && step % 5 != 4) continue;
        for (uint32_t k = 0; k < universe; ++k) {
          cxlt_policy_state_t b{};
          const bool kb = by_key->policy_state(K(k), &b);
          for (Runtime *rt : {by_handle.get(), at_call.get()}) {
            cxlt_policy_state_t a{};
            const bool ka = rt->policy_state(K(k), &a);
            const char *which = rt == at_call.get() ? " (applied at the call)" : " (through the log)";
            ASSERT_EQ(ka, kb) << "key " << k << " at step " << step << which;
            if (!ka) continue;
            ASSERT_EQ(a.tier, b.tier) << "key " << k << " at step " << step << which;
            ASSERT_EQ(a.score, b.score) << "key " << k << " at step " << step << which;
            ASSERT_EQ(a.accesses, b.accesses) << "key " << k << " at step " << step << which;
            ASSERT_EQ(a.last_access_step, b.last_access_step) << "key " << k << " at step " << step << which;
          }
        }
      }
      const auto sb = by_key->stats();
      for (Runtime *rt : {by_handle.get(), at_call.get()}) {
        const auto sa = rt->stats();
        EXPECT_EQ(sa.accesses, sb.accesses);
        for (size_t t = 0; t < 3; ++t) EXPECT_EQ(sa.tier[t].hits, sb.tier[t].hits) << "tier " << t;
        EXPECT_EQ(sa.demotions, sb.demotions);
        EXPECT_EQ(sa.drops, sb.drops);
      }
      EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*by_handle), 0u);
      EXPECT_EQ(RuntimeTestAccess::batches_applied_at_call(*at_call), 30u);
      EXPECT_GT(sb.drops, 0u) << "no block left the last tier: the victim searches went untested";
      // The larger scale's later steps ran the drain that prefetches (16,384 ids and more).
      EXPECT_EQ(RuntimeTestAccess::prefetches_ahead(*by_handle), scale > 1024);
      EXPECT_EQ(by_handle->validate(), "");
      EXPECT_EQ(at_call->validate(), "");
      EXPECT_EQ(by_key->validate(), "");
    }
  }
}

// A drain in parts applies each block's accesses in one order that the runtime's mutex could
// have given them: each thread's in the order it made them, the threads' batches in the order
// they were appended (here thread by thread: parallel_drain.cpp step 1). Three threads append (without the
// call's check, so that every record waits for one drain) accesses with attention values that
// differ from record to record, so that another order of a block's accesses gives another
// score (its floating-point sums round differently): blocks of a small shared set that every
// thread records, some recorded twice by one thread far apart (in different parts of its
// shard), and blocks of the thread's own. The last thread then drains (stats()) while the others
// have finished: it applies its own parts first, though they come last in drain order, so the
// accesses of blocks that other threads recorded too must wait for theirs; and in a second run
// it claims every part in reverse (RuntimeTestAccess::claim_parts_in_reverse), so that a block
// recorded in two parts of one shard must wait too. Every block must show exactly the score of
// its accesses folded in drain order.
TEST(AccessLog, ADrainInPartsKeepsEachBlocksAccessesInOrder) {
  for (const bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "the drainer claiming in reverse" : "the drainer claiming its own parts first");
    constexpr uint32_t kBlocks = 20000;  // past the ids from which the drain prefetches and goes in parts
    constexpr size_t kThreads = 3, kPerThread = 3584, kShared = 256;
    RuntimeConfig cfg = one_tier(kBlocks, kBlocks + 100);
    auto rt = Runtime::open(cfg);
    RuntimeTestAccess::claim_parts_in_reverse(*rt, reverse);
    std::vector<uint64_t> handles(kBlocks);
    for (uint32_t i = 0; i < kBlocks; ++i) {
      handles[i] = rt->admit(K(i)).handle;
      if (i % 64 == 0) rt->step();
    }
    std::vector<cxlt_policy_state_t> before(kBlocks);
    for (uint32_t i = 0; i < kBlocks; ++i) ASSERT_TRUE(rt->policy_state(K(i), &before[i]));
    struct Access {
      uint32_t block;
      float attention;
    };
    std::vector<std::vector<Access>> made(kThreads);
    std::vector<int> shard(kThreads, -1);
    std::atomic<bool> refused{false};
    uint64_t drains_before = 0, drains_after = 0;
    const auto record = [&](size_t t) {
      std::mt19937_64 rng(4242 + t);
      std::vector<Access> &mine = made[t];
      for (size_t i = 0; i < kPerThread; ++i) {
        uint32_t b;
        if (i % 3 == 0)
          b = static_cast<uint32_t>(rng() % kShared);  // shared by the threads
        else if (i >= kPerThread / 2 && i % 7 == 0)
          b = mine[i - kPerThread / 2].block;  // again, from the first half of this thread's records
        else
          b = static_cast<uint32_t>(kShared + t * 5000 + rng() % 5000);  // this thread's own
        mine.push_back({b, static_cast<float>(rng() % 1000 + 1) / 1001.0f});
      }
      for (size_t at = 0; at < mine.size(); at += 512) {
        const size_t n = std::min<size_t>(512, mine.size() - at);
        std::vector<uint64_t> h(n);
        std::vector<float> a(n);
        for (size_t i = 0; i < n; ++i) {
          h[i] = handles[mine[at + i].block];
          a[i] = mine[at + i].attention;
        }
        if (!RuntimeTestAccess::append_unchecked(*rt, h.data(), a.data(), n)) refused = true;
      }
      shard[t] = RuntimeTestAccess::thread_shard(*rt);
    };
    for (size_t t = 0; t + 1 < kThreads; ++t) std::thread(record, t).join();
    std::thread([&] {  // the last thread records, then drains with every record waiting
      record(kThreads - 1);
      drains_before = RuntimeTestAccess::parallel_drains(*rt);
      (void)rt->stats();
      drains_after = RuntimeTestAccess::parallel_drains(*rt);
    }).join();
    ASSERT_FALSE(refused.load()) << "a shard had no room: the test needs every record waiting";
    ASSERT_EQ(drains_after, drains_before + 1) << "the records were not applied in one drain in parts";
    // The drainer's own parts (4: its 3,584 records cut by position) came first, in the order asked.
    EXPECT_EQ(RuntimeTestAccess::drainer_first_part(*rt),
              static_cast<unsigned>(shard[kThreads - 1]) * ParallelDrain::kShardParts + (reverse ? 3 : 0));
    for (size_t t = 0; t < kThreads; ++t)
      for (size_t u = t + 1; u < kThreads; ++u) ASSERT_NE(shard[t], shard[u]) << "two threads share a shard";
    const uint64_t now = rt->current_step();
    std::vector<double> want(kBlocks);
    std::vector<uint32_t> count(kBlocks, 0);
    std::vector<uint8_t> threads_of(kBlocks, 0);
    for (uint32_t i = 0; i < kBlocks; ++i) want[i] = before[i].score;
    // The drain order: the order the batches were appended, thread by thread (each thread
    // was joined before the next began).
    for (size_t t = 0; t < kThreads; ++t)
      for (const Access &a : made[t]) {
        want[a.block] = lrfu_access(want[a.block], count[a.block] == 0 ? now - before[a.block].last_access_step : 0,
                                    a.attention, cfg.lrfu);
        ++count[a.block];
        threads_of[a.block] |= static_cast<uint8_t>(1u << t);
      }
    size_t crossing = 0;
    for (uint32_t i = 0; i < kBlocks; ++i) {
      cxlt_policy_state_t st{};
      ASSERT_TRUE(rt->policy_state(K(i), &st)) << "block " << i;
      ASSERT_EQ(st.accesses, before[i].accesses + count[i]) << "block " << i;
      ASSERT_EQ(st.score, want[i]) << "block " << i << ", " << count[i] << " accesses";
      if (count[i] != 0) {
        ASSERT_EQ(st.last_access_step, now) << "block " << i;
      }
      crossing += (threads_of[i] & (threads_of[i] - 1)) != 0;
    }
    EXPECT_GT(crossing, kShared / 2) << "few blocks were recorded by two threads: the test tests little";
    EXPECT_EQ(rt->validate(), "");
  }
}

// An access recorded for a block that is dropped before the drain applies it updates the
// block's remembered state only (protocol step 3), and a state resident nowhere has its place
// in the store's forget order, which must follow the update. Records are appended without the
// call's check (as if the drop came between an engine thread's check and its append) for the
// blocks of a full tier's 1,500 victims and for resident ones, with attention 1.0 so that the
// victims' low scores rise past others in the order: from two threads into a drain in parts
// (the drainer applies the dropped blocks' updates, flagged by the parts), from one thread into
// the serial LRFU drain, and from one into the serial drain of another policy (LFU, whose
// forget order is the access count). Every block must show exactly its accesses and the
// score they give, and validate() checks the forget order against every state.
TEST(AccessLog, AccessesToBlocksDroppedMeanwhileKeepTheForgetOrder) {
  struct Case {
    const char *name;
    PolicyKind policy;
    size_t threads;
  };
  for (const Case c : {Case{"LRFU, drain in parts", PolicyKind::lrfu, 2}, Case{"LRFU, serial", PolicyKind::lrfu, 1},
                       Case{"LFU, serial", PolicyKind::lfu, 1}}) {
    SCOPED_TRACE(c.name);
    constexpr uint32_t kBlocks = 20000, kMore = 1500;  // ids past the count from which the drain prefetches
    RuntimeConfig cfg = one_tier(kBlocks, kBlocks + kMore + 100);
    cfg.policy = c.policy;
    auto rt = Runtime::open(cfg);
    std::vector<uint64_t> handles(kBlocks + kMore);
    for (uint32_t i = 0; i < kBlocks + kMore; ++i) {
      handles[i] = rt->admit(K(i)).handle;
      if (i % 64 == 0) rt->step();
    }
    std::vector<cxlt_policy_state_t> before(kBlocks + kMore);
    std::vector<uint32_t> dropped;
    for (uint32_t i = 0; i < kBlocks + kMore; ++i) {
      ASSERT_TRUE(rt->policy_state(K(i), &before[i]));
      if (before[i].tier < 0) dropped.push_back(i);
    }
    ASSERT_EQ(dropped.size(), kMore);
    // Each thread: every dropped block once, and resident blocks, in batches that fit a buffer.
    std::vector<std::vector<uint32_t>> counts(c.threads, std::vector<uint32_t>(kBlocks + kMore, 0));
    // One thread after the other (each its own shard): batches of two threads appended at once
    // interleave in the drain order, which a drain in parts applies serially instead (as
    // happened under ThreadSanitizer, where the threads overlapped).
    std::atomic<bool> refused{false};
    for (size_t t = 0; t < c.threads; ++t)
      std::thread([&, t] {
        std::mt19937_64 rng(77 + t);
        std::vector<uint64_t> batch;
        for (size_t j = 0; j < dropped.size(); ++j) {
          const uint32_t d = dropped[(j * 7 + t * 13) % dropped.size()];
          batch.push_back(handles[d]);
          ++counts[t][d];
          const uint32_t r = static_cast<uint32_t>(rng() % (kBlocks + kMore));
          batch.push_back(handles[r]);
          ++counts[t][r];
        }
        for (size_t at = 0; at < batch.size(); at += 512) {
          const size_t n = std::min<size_t>(512, batch.size() - at);
          const std::vector<float> att(n, 1.0f);
          if (!RuntimeTestAccess::append_unchecked(*rt, batch.data() + at, att.data(), n)) refused = true;
        }
      }).join();
    ASSERT_FALSE(refused.load()) << "a shard had no room: the test needs every record waiting";
    const uint64_t drains_before = RuntimeTestAccess::parallel_drains(*rt);
    (void)rt->stats();  // drains
    EXPECT_EQ(RuntimeTestAccess::parallel_drains(*rt) > drains_before, c.threads > 1);
    const uint64_t now = rt->current_step();
    for (uint32_t i = 0; i < kBlocks + kMore; ++i) {
      uint32_t k = 0;
      for (size_t t = 0; t < c.threads; ++t) k += counts[t][i];
      cxlt_policy_state_t st{};
      ASSERT_TRUE(rt->policy_state(K(i), &st)) << "block " << i;
      ASSERT_EQ(st.accesses, before[i].accesses + k) << "block " << i;
      double want = before[i].score;
      for (uint32_t j = 0; j < k; ++j) want = lrfu_access(want, j == 0 ? now - before[i].last_access_step : 0, 1.0f, cfg.lrfu);
      ASSERT_EQ(st.score, want) << "block " << i;
    }
    EXPECT_EQ(rt->validate(), "");
    // The order decides: a full store forgets a non-resident state for each new key.
    for (uint32_t i = 0; i < 200; ++i) rt->admit(K(kBlocks + kMore + i));
    EXPECT_EQ(rt->validate(), "");
  }
}
