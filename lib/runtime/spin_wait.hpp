// SPDX-License-Identifier: Apache-2.0
// Bounded waits for another thread's work of a few microseconds: pause, never yield, then give
// up (block, yield or leave). The access log's shard locks and the parallel drain use them.
#pragma once

#include <chrono>
#include <mutex>

namespace cxltier {

// A spin-wait hint to the core (x86 PAUSE, AArch64 YIELD): it frees the sibling hyperthread and
// avoids the memory-order flush a tight load loop costs when the awaited line changes.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Pauses for at most `us` microseconds (the clock is read every 32 rounds), after which the
// caller blocks, yields or gives up. No sched_yield while it lasts: where another process shares
// the waiter's core, a yield hands that process the rest of its time slice (milliseconds), and
// two engine threads, one sharing its core with a busy loop, ran 140-480 times slower when the
// parallel drain's waits yielded (bench/README.md).
class SpinBudget {
public:
  explicit SpinBudget(unsigned us) noexcept : until_(std::chrono::steady_clock::now() + std::chrono::microseconds(us)) {}
  // One round: a pause; false once the budget is spent.
  bool spin() noexcept {
    cpu_relax();
    return (++rounds_ & 31) != 0 || std::chrono::steady_clock::now() < until_;
  }

private:
  std::chrono::steady_clock::time_point until_;
  unsigned rounds_ = 0;
};

// Lock `mu`, whose holders keep it for at most a few microseconds: try it while pausing for up
// to `us` microseconds, then block. std::mutex blocks in the kernel at the first contended try,
// and the holder's unlock then has to wake the waiter, which costs more than the critical section
// (a virtual machine's wake-up takes tens of microseconds).
inline void lock_spinning(std::mutex &mu, unsigned us) {
  if (mu.try_lock()) return;
  for (SpinBudget wait(us); wait.spin();)
    if (mu.try_lock()) return;
  mu.lock();
}

}  // namespace cxltier
