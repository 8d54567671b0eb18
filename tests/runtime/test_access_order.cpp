// SPDX-License-Identifier: Apache-2.0
// The order in which a drain applies the batches of several engine threads
// (lib/runtime/access_log.cpp, protocol step 4): a batch that returned before another thread's
// began is applied first, as the runtime's mutex would have applied them, in the serial drain
// and in a drain in parts; and AccessLog::in_order, which gives that order, against a sort of
// every batch by its number.
#include "runtime_test_util.hpp"

#include "lib/runtime/access_log.hpp"
#include "lib/runtime/test_access.hpp"

#include <cxltier/policy.hpp>
#include <cxltier/runtime.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

using namespace cxltier;

namespace {

Key K(uint64_t i) { return key_from_sequence(12, i); }

RuntimeConfig one_tier(uint32_t blocks) {
  RuntimeConfig cfg = cxlt_test::three_tier_config(blocks, 0, 0, "null");
  cfg.tiers.resize(1);
  cfg.synchronous = true;
  cfg.store_capacity = blocks + 100;
  return cfg;
}

// Admit blocks 0..n-1, a step every 64 (so their states differ); their handles.
std::vector<uint64_t> admit_all(Runtime &rt, uint32_t n) {
  std::vector<uint64_t> handles(n);
  for (uint32_t i = 0; i < n; ++i) {
    handles[i] = rt.admit(K(i)).handle;
    if (i % 64 == 0) rt.step();
  }
  return handles;
}

struct Access {
  uint32_t block;
  float attention;
};

// Blocks of the shared set, then the other blocks: the score of each after `batches` (in the
// order given) are applied to the states `before` at step `now`, one LRFU access each.
std::vector<double> fold(const std::vector<std::vector<Access>> &batches, const std::vector<cxlt_policy_state_t> &before,
                         uint64_t now, const LrfuParams &p) {
  std::vector<double> score(before.size());
  std::vector<bool> touched(before.size(), false);
  for (size_t i = 0; i < before.size(); ++i) score[i] = before[i].score;
  for (const auto &batch : batches)
    for (const Access &a : batch) {
      score[a.block] = lrfu_access(score[a.block], touched[a.block] ? 0 : now - before[a.block].last_access_step, a.attention, p);
      touched[a.block] = true;
    }
  return score;
}

}  // namespace

// Two engine threads, each in a shard of its own; the thread of the higher shard appends an
// access to a block, returns, and then the other thread appends an access to the same block
// (the runtime's mutex held by the test, so both wait in the log for one drain). The block's
// score must be the one of the accesses in the order they were made: the drain must not apply
// them in shard order. The attention values (1 then 0) make the two orders' scores differ by
// far more than rounding.
TEST(AccessOrder, AnAccessAppendedAfterAnotherIsAppliedAfterIt) {
  RuntimeConfig cfg = one_tier(64);
  auto rt = Runtime::open(cfg);
  std::vector<uint64_t> handles;
  for (uint32_t i = 0; i < 64; ++i) handles.push_back(rt->admit(K(i)).handle);
  rt->step();
  // Each engine thread claims its shard with an access to a block of its own (the first to
  // claim gets the lower shard), then waits for its turn to access block 0.
  std::atomic<int> turn{0}, done{0};
  const float first_attention = 1.0f, later_attention = 0.0f;
  const auto engine = [&](int my_turn, size_t own_block, float attention, int *shard) {
    rt->access_handles(&handles[own_block], nullptr, 1);
    *shard = RuntimeTestAccess::thread_shard(*rt);
    done.fetch_add(1);
    while (turn.load() != my_turn) std::this_thread::yield();
    rt->access_handles(&handles[0], &attention, 1);
    done.fetch_add(1);
  };
  const auto wait_done = [&](int n) {
    while (done.load() != n) std::this_thread::yield();
  };
  int shard_later = -1, shard_first = -1;
  std::thread later(engine, 2, 1, later_attention, &shard_later);  // makes the later access
  wait_done(1);
  std::thread first(engine, 1, 2, first_attention, &shard_first);
  wait_done(2);
  EXPECT_LT(shard_later, shard_first) << "the thread making the later access must own the lower shard";
  cxlt_policy_state_t before{};
  EXPECT_TRUE(rt->policy_state(K(0), &before));  // the threads wait for their turns: no early return
  {
    auto held = RuntimeTestAccess::lock_mutex(*rt);  // both accesses wait in the log
    turn.store(1);
    wait_done(3);
    turn.store(2);
    wait_done(4);
  }
  first.join();
  later.join();
  cxlt_policy_state_t after{};
  ASSERT_TRUE(rt->policy_state(K(0), &after));  // drains
  const uint64_t idle = rt->current_step() - before.last_access_step;
  const double in_order = lrfu_access(lrfu_access(before.score, idle, first_attention, cfg.lrfu), 0, later_attention, cfg.lrfu);
  const double reversed = lrfu_access(lrfu_access(before.score, idle, later_attention, cfg.lrfu), 0, first_attention, cfg.lrfu);
  ASSERT_NE(in_order, reversed);
  EXPECT_EQ(after.accesses, before.accesses + 2);
  EXPECT_EQ(after.score, in_order) << "applied in shard order (that gives " << reversed << ")";
  EXPECT_EQ(rt->validate(), "");
}

// Three engine threads make batches one after another, each after the one before it has
// returned (a turn counter orders them), with the runtime's mutex held by the test so that
// every batch waits in the log. First one batch a thread, in the order last thread, first,
// second (so not in shard order): with many ids, a drain in parts whose parts must follow that
// order. Then eight batches a thread, the threads' batches interleaved: a drain that cannot
// cut them into parts by shard and applies them serially, in order. With few ids both are
// serial drains. Every block's score must be that of its accesses folded in the order made,
// bit for bit (a third of each batch comes from a set of 200 blocks that every thread records).
TEST(AccessOrder, BatchesOfSeveralThreadsAreAppliedInTheOrderMade) {
  for (const uint32_t blocks : {4000u, 20000u}) {  // below and past the ids from which drains go in parts
    SCOPED_TRACE(blocks);
    const bool parts = blocks >= LowIdWords::kIds;
    RuntimeConfig cfg = one_tier(blocks);
    auto rt = Runtime::open(cfg);
    const std::vector<uint64_t> handles = admit_all(*rt, blocks);
    constexpr size_t kThreads = 3;
    std::mt19937_64 rng(777 + blocks);
    for (const size_t per_thread : {size_t{1}, size_t{8}}) {
      SCOPED_TRACE(per_thread);
      const size_t batch_size = per_thread == 1 ? 1024 : 256;
      // The schedule: which thread makes the k-th batch.
      std::vector<size_t> turn_of;
      if (per_thread == 1)
        turn_of = {2, 0, 1};
      else
        for (size_t r = 0; r < per_thread; ++r)
          for (size_t t = 0; t < kThreads; ++t) turn_of.push_back((t + r) % kThreads);
      std::vector<std::vector<Access>> batches(turn_of.size());
      for (size_t k = 0; k < batches.size(); ++k)
        for (size_t i = 0; i < batch_size; ++i) {
          const uint32_t b = i % 3 == 0 ? static_cast<uint32_t>(rng() % 200)
                                        : static_cast<uint32_t>(200 + turn_of[k] * ((blocks - 200) / kThreads) + rng() % ((blocks - 200) / kThreads));
          batches[k].push_back({b, static_cast<float>(rng() % 1000 + 1) / 1001.0f});
        }
      // The threads claim their shards in thread order (an access each to a block of their
      // own), so the schedule's first batches are not in shard order.
      std::atomic<size_t> claimed{0}, turn{SIZE_MAX};
      std::vector<std::thread> threads;
      for (size_t t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
          while (claimed.load() != t) std::this_thread::yield();
          rt->access_handles(&handles[blocks - 1 - t], nullptr, 1);
          claimed.fetch_add(1);
          for (size_t k = 0; k < batches.size(); ++k) {
            if (turn_of[k] != t) continue;
            while (turn.load(std::memory_order_acquire) != k) std::this_thread::yield();
            std::vector<uint64_t> h;
            std::vector<float> a;
            for (const Access &x : batches[k]) {
              h.push_back(handles[x.block]);
              a.push_back(x.attention);
            }
            rt->access_handles(h.data(), a.data(), h.size());
            turn.store(k + 1, std::memory_order_release);
          }
        });
      while (claimed.load() != kThreads) std::this_thread::yield();
      std::vector<cxlt_policy_state_t> before(blocks);
      for (uint32_t i = 0; i < blocks; ++i) EXPECT_TRUE(rt->policy_state(K(i), &before[i]));  // threads run: no early return
      const uint64_t parts_before = RuntimeTestAccess::parallel_drains(*rt);
      const uint64_t interleaved_before = RuntimeTestAccess::interleaved_drains(*rt);
      {
        auto held = RuntimeTestAccess::lock_mutex(*rt);  // every batch waits in the log
        turn.store(0, std::memory_order_release);
        for (std::thread &th : threads) th.join();
      }
      const uint64_t now = rt->current_step();
      const std::vector<double> want = fold(batches, before, now, cfg.lrfu);
      (void)rt->stats();  // one drain of every batch
      EXPECT_EQ(RuntimeTestAccess::parallel_drains(*rt) - parts_before, parts && per_thread == 1 ? 1u : 0u);
      EXPECT_EQ(RuntimeTestAccess::interleaved_drains(*rt) - interleaved_before, parts && per_thread != 1 ? 1u : 0u);
      std::vector<uint32_t> count(blocks, 0);
      for (const auto &batch : batches)
        for (const Access &a : batch) ++count[a.block];
      for (uint32_t i = 0; i < blocks; ++i) {
        cxlt_policy_state_t st{};
        ASSERT_TRUE(rt->policy_state(K(i), &st));
        ASSERT_EQ(st.accesses, before[i].accesses + count[i]) << "block " << i;
        ASSERT_EQ(st.score, want[i]) << "block " << i << ", " << count[i] << " accesses";
      }
      EXPECT_EQ(rt->validate(), "");
    }
  }
}

// The same order with drains at any moment: three engine threads make batches one after
// another (each after the one before it returned, a turn counter deciding which thread makes
// the next), each batch from a set of 100 blocks, while a fourth thread drains again and again
// (lookup()). Batches go to the log or, with many ids and the mutex free, are applied at the
// call; a drain can swap the shards out between two batches or during one's append. Every
// block's score must be that of its accesses folded in the order made.
TEST(AccessOrder, DrainsAtAnyMomentKeepTheOrderMade) {
  for (const uint32_t blocks : {4000u, 20000u}) {
    SCOPED_TRACE(blocks);
    RuntimeConfig cfg = one_tier(blocks);
    auto rt = Runtime::open(cfg);
    const std::vector<uint64_t> handles = admit_all(*rt, blocks);
    constexpr size_t kThreads = 3, kBatches = 600, kBatchSize = 32;
    std::mt19937_64 rng(31 + blocks);
    std::vector<size_t> turn_of(kBatches);
    std::vector<std::vector<Access>> batches(kBatches);
    for (size_t k = 0; k < kBatches; ++k) {
      turn_of[k] = rng() % kThreads;
      for (size_t i = 0; i < kBatchSize; ++i)
        batches[k].push_back({static_cast<uint32_t>(rng() % 100), static_cast<float>(rng() % 1000 + 1) / 1001.0f});
    }
    std::vector<cxlt_policy_state_t> before(blocks);
    for (uint32_t i = 0; i < blocks; ++i) ASSERT_TRUE(rt->policy_state(K(i), &before[i]));
    const uint64_t now = rt->current_step();
    std::atomic<size_t> turn{0};
    std::atomic<bool> stop{false};
    std::thread drainer([&] {
      while (!stop.load()) {
        (void)rt->lookup(K(0), nullptr);
        std::this_thread::yield();
      }
    });
    std::vector<std::thread> threads;
    for (size_t t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        std::vector<uint64_t> h(kBatchSize);
        std::vector<float> a(kBatchSize);
        for (size_t k = 0; k < kBatches; ++k) {
          if (turn_of[k] != t) continue;
          for (size_t i = 0; i < kBatchSize; ++i) {
            h[i] = handles[batches[k][i].block];
            a[i] = batches[k][i].attention;
          }
          while (turn.load(std::memory_order_acquire) != k) std::this_thread::yield();
          rt->access_handles(h.data(), a.data(), kBatchSize);
          turn.store(k + 1, std::memory_order_release);
        }
      });
    for (std::thread &th : threads) th.join();
    stop.store(true);
    drainer.join();
    const std::vector<double> want = fold(batches, before, now, cfg.lrfu);
    for (uint32_t i = 0; i < 100; ++i) {
      cxlt_policy_state_t st{};
      ASSERT_TRUE(rt->policy_state(K(i), &st));
      ASSERT_EQ(st.score, want[i]) << "block " << i;
    }
    EXPECT_EQ(rt->validate(), "");
  }
}

// AccessLog::in_order against a sort: random shards, each with batches of random lengths whose
// numbers are a shuffled run of consecutive numbers that wraps past 2^32 in some rounds. Every
// record must come once, the batches in the order of their numbers, each call a maximal run
// of one shard's consecutive batches.
TEST(AccessOrder, InOrderFollowsTheBatchNumbers) {
  std::mt19937_64 rng(99);
  for (int round = 0; round < 2000; ++round) {
    const size_t k = 1 + rng() % AccessLog::kShards;
    const size_t nbatches = 1 + rng() % 40;
    const uint32_t start = round % 2 == 0 ? static_cast<uint32_t>(0u - 1u - rng() % 30) : static_cast<uint32_t>(rng());
    // Which shard each number goes to: each shard's batches get increasing numbers, as appends do.
    std::vector<size_t> shard_of(nbatches);
    for (size_t b = 0; b < nbatches; ++b) shard_of[b] = rng() % k;
    std::vector<std::vector<AccessLog::Batch>> lists(k);
    std::vector<std::vector<AccessRecord>> records(k);
    struct Want {
      size_t shard;
      uint32_t from, end;
    };
    std::vector<Want> want;  // every batch by number
    for (size_t b = 0; b < nbatches; ++b) {
      const size_t s = shard_of[b];
      const auto from = static_cast<uint32_t>(records[s].size());
      const size_t len = 1 + rng() % 5;
      for (size_t i = 0; i < len; ++i) records[s].push_back({static_cast<NodeId>(b), 0, 0.0f, 0});
      lists[s].push_back({start + static_cast<uint32_t>(b), static_cast<uint32_t>(records[s].size())});
      want.push_back({s, from, static_cast<uint32_t>(records[s].size())});
    }
    std::vector<AccessLog::Taken> taken;
    for (size_t s = 0; s < k; ++s)
      if (!records[s].empty()) taken.push_back({static_cast<unsigned>(s), records[s].data(), lists[s].data(), lists[s].size()});
    // The runs the sort gives: consecutive batches of one shard merged.
    size_t runs = 0;
    for (size_t b = 0; b < nbatches; ++b) runs += b == 0 || shard_of[b] != shard_of[b - 1];
    std::vector<NodeId> got;
    size_t got_calls = 0;
    const size_t calls = AccessLog::in_order(taken.data(), taken.size(), [&](unsigned shard, AccessRecord *r, size_t n) {
      ++got_calls;
      ASSERT_GE(r, records[shard].data());
      ASSERT_LE(r + n, records[shard].data() + records[shard].size());
      for (size_t i = 0; i < n; ++i) got.push_back(r[i].id);
    });
    std::vector<NodeId> expect;
    for (const Want &w : want)
      for (uint32_t i = w.from; i < w.end; ++i) expect.push_back(records[w.shard][i].id);
    ASSERT_EQ(got, expect) << "round " << round;
    ASSERT_EQ(calls, got_calls);
    ASSERT_EQ(calls, runs) << "round " << round;
  }
}
