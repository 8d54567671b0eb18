// SPDX-License-Identifier: Apache-2.0
// The runtime's mutex taken so that whoever waits for it can be seen: a thread that finds it
// taken counts itself in LockCount::waiters until it holds it. Engine threads, which take the
// mutex at the call to apply their batches (access_log.cpp, step 2), stand aside while any
// thread is counted, and a long holder hands it over between chunks of its work
// (Runtime::Impl::pass_lock). A condition variable's waiter takes the mutex back inside the
// wait, where no count could be written around it: CountedCv takes it back through the count.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <utility>

namespace cxltier {

struct LockCount {
  std::atomic<unsigned> waiters{0};  // threads waiting for the mutex (seq_cst increments)
  std::atomic<uint64_t> takes{0};    // times a counted thread has taken it

  // [no lock; takes the mutex into lk] Free: taken at once, nothing counted. Otherwise as
  // lock_counted with nothing to do while waiting.
  void lock(std::unique_lock<std::mutex> &lk) noexcept {
    if (!lk.try_lock()) lock_counted(lk, [] { return false; });
  }
  // [no lock; takes the mutex into lk] Counted (seq_cst) before the first try, then tries the
  // mutex and calls `meanwhile` between tries for as long as it returns true (a bounded spin,
  // helping other work), then blocks; the take is counted (release) before the count is taken
  // back. noexcept: std::mutex::lock throws only on a misuse, and a waiter that left a
  // condition variable's wait without the mutex would run its cleanup unlocked.
  template <class Meanwhile>
  void lock_counted(std::unique_lock<std::mutex> &lk, Meanwhile meanwhile) noexcept {
    waiters.fetch_add(1, std::memory_order_seq_cst);
    bool taken = false;
    while (!(taken = lk.try_lock()) && meanwhile()) {
    }
    if (!taken) lk.lock();
    takes.fetch_add(1, std::memory_order_release);
    waiters.fetch_sub(1, std::memory_order_release);
  }
};

// A condition variable over the runtime's mutex whose waiters take the mutex back through
// LockCount::lock, so that they are counted while they wait for it as any other caller is.
class CountedCv {
public:
  explicit CountedCv(LockCount &count) : count_(count) {}  // the condition variable allocates
  CountedCv(const CountedCv &) = delete;
  CountedCv &operator=(const CountedCv &) = delete;

  void notify_one() noexcept { cv_.notify_one(); }
  void notify_all() noexcept { cv_.notify_all(); }

  void wait(std::unique_lock<std::mutex> &lk) {
    Relock r{count_, lk};
    cv_.wait(r);
  }
  template <class Pred>
  void wait(std::unique_lock<std::mutex> &lk, Pred pred) {
    Relock r{count_, lk};
    cv_.wait(r, std::move(pred));
  }
  template <class Rep, class Period>
  std::cv_status wait_for(std::unique_lock<std::mutex> &lk, const std::chrono::duration<Rep, Period> &d) {
    Relock r{count_, lk};
    return cv_.wait_for(r, d);
  }
  template <class Rep, class Period, class Pred>
  bool wait_for(std::unique_lock<std::mutex> &lk, const std::chrono::duration<Rep, Period> &d, Pred pred) {
    Relock r{count_, lk};
    return cv_.wait_for(r, d, std::move(pred));
  }

private:
  // What condition_variable_any releases before the wait and takes again after it.
  struct Relock {
    LockCount &count;
    std::unique_lock<std::mutex> &lk;
    void lock() noexcept { count.lock(lk); }
    void unlock() { lk.unlock(); }
  };
  LockCount &count_;
  std::condition_variable_any cv_;
};

}  // namespace cxltier
