// SPDX-License-Identifier: Apache-2.0
// The runtime mutex's counted waiters (lib/runtime/counted_lock.hpp): a free mutex is taken
// without a count; a thread that finds it taken is counted until it holds it, and its take is
// counted; a condition variable's waiter is counted while it takes the mutex back after a
// notify; what a counted lock does between tries runs while the mutex stays taken.
#include "lib/runtime/counted_lock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

using namespace cxltier;

namespace {

// Polls `done` every millisecond for up to 20 s (a loaded machine, a sanitizer build).
bool within_20s(const std::function<bool()> &done) {
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
       std::chrono::steady_clock::now() < until;) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

}  // namespace

TEST(CountedLock, AFreeMutexIsTakenWithoutACount) {
  std::mutex mu;
  LockCount count;
  std::unique_lock lk(mu, std::defer_lock);
  count.lock(lk);
  EXPECT_TRUE(lk.owns_lock());
  EXPECT_EQ(count.waiters.load(), 0u);
  EXPECT_EQ(count.takes.load(), 0u);
}

TEST(CountedLock, AWaiterIsCountedUntilItHoldsTheMutex) {
  std::mutex mu;
  LockCount count;
  std::unique_lock held(mu);
  std::atomic<bool> took{false};
  std::thread waiter([&] {
    std::unique_lock lk(mu, std::defer_lock);
    count.lock(lk);
    took = true;
  });
  const bool counted = within_20s([&] { return count.waiters.load() == 1; });
  EXPECT_FALSE(took.load());
  held.unlock();
  waiter.join();
  ASSERT_TRUE(counted) << "a thread waiting for the mutex was not counted";
  EXPECT_TRUE(took.load());
  EXPECT_EQ(count.waiters.load(), 0u);
  EXPECT_EQ(count.takes.load(), 1u);
}

// The waiter is notified while this thread holds the mutex, so it can only take the mutex back
// by waiting for it: counted, as any other caller of the runtime's mutex is.
TEST(CountedLock, AConditionVariablesWaiterIsCountedWhileItTakesTheMutexBack) {
  std::mutex mu;
  LockCount count;
  CountedCv cv(count);
  bool ready = false, woke = false;
  std::atomic<bool> entering{false};
  std::thread waiter([&] {
    std::unique_lock lk(mu);
    entering = true;
    cv.wait(lk, [&] { return ready; });
    woke = true;  // under the mutex, taken back
  });
  ASSERT_TRUE(within_20s([&] { return entering.load(); }));
  std::unique_lock held(mu);  // free only once the waiter is inside the wait
  ready = true;
  cv.notify_one();
  const bool counted = within_20s([&] { return count.waiters.load() == 1; });
  held.unlock();
  waiter.join();
  ASSERT_TRUE(counted) << "the condition variable's waiter took the mutex back uncounted";
  EXPECT_TRUE(woke);
  EXPECT_EQ(count.waiters.load(), 0u);
  EXPECT_GE(count.takes.load(), 1u);
}

// lock_counted counts the thread before its first try and calls `meanwhile` between tries until
// it returns false; then it blocks until the mutex comes free.
TEST(CountedLock, WhatACountedLockDoesMeanwhileRunsWhileTheMutexIsTaken) {
  std::mutex mu;
  LockCount count;
  std::unique_lock held(mu);
  std::atomic<unsigned> calls{0};
  std::thread waiter([&] {
    std::unique_lock lk(mu, std::defer_lock);
    count.lock_counted(lk, [&] { return calls.fetch_add(1) + 1 < 3; });
  });
  const bool spun = within_20s([&] { return calls.load() == 3 && count.waiters.load() == 1; });
  held.unlock();
  waiter.join();
  ASSERT_TRUE(spun) << "calls " << calls.load() << ", waiters " << count.waiters.load();
  EXPECT_EQ(calls.load(), 3u) << "called again after it returned false";
  EXPECT_EQ(count.waiters.load(), 0u);
  EXPECT_EQ(count.takes.load(), 1u);
}
