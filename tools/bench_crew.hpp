// SPDX-License-Identifier: Apache-2.0
// The worker threads and per-pass timing that the rows of `cxltier bench` share (memcpy and
// move_pages run their passes on them). Internal to the CLI.
#pragma once

#include "bench_migration.hpp"
#include "bench_stats.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cxltier::bench {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
inline double micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// Worker threads, pinned one per CPU (round robin over the allowed CPUs) when asked, else left
// to the scheduler like the runtime's migration threads; created once so that
// no measured pass pays for thread creation. run() hands the same function to the first k of
// them and returns when all k are done; each records its own start and end, so a pass's time
// is from the first start to the last end, without the wake-up of the caller.
class Crew {
public:
  Crew(unsigned n, const std::vector<int> &cpus, bool pin) {
    for (unsigned i = 0; i < n; ++i) {
      int cpu = pin ? cpus[i % cpus.size()] : -1;
      threads_.emplace_back([this, i, cpu] { loop(i, cpu); });
    }
  }
  ~Crew() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread &t : threads_) t.join();
  }
  Crew(const Crew &) = delete;
  Crew &operator=(const Crew &) = delete;

  void run(unsigned k, const std::function<void(unsigned)> &fn) {
    std::unique_lock lk(mu_);
    job_ = &fn;
    active_ = std::min<unsigned>(k, static_cast<unsigned>(threads_.size()));
    remaining_ = active_;
    arrived_.store(0, std::memory_order_relaxed);
    ++generation_;
    cv_.notify_all();
    done_cv_.wait(lk, [&] { return remaining_ == 0; });
    job_ = nullptr;
  }

private:
  void loop(unsigned index, int cpu) {
    if (cpu >= 0) cxlt_bench_stats::pin_to_cpu(cpu);
    uint64_t seen = 0;
    std::unique_lock lk(mu_);
    while (true) {
      cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= active_) continue;
      const std::function<void(unsigned)> *fn = job_;
      const unsigned k = active_;
      lk.unlock();
      // Start together: a pass begins when all k threads run, not when the first one woke.
      arrived_.fetch_add(1, std::memory_order_acq_rel);
      while (arrived_.load(std::memory_order_acquire) < k) std::this_thread::yield();
      (*fn)(index);  // never throws: the jobs below record errors instead
      lk.lock();
      if (--remaining_ == 0) done_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(unsigned)> *job_ = nullptr;
  unsigned active_ = 0, remaining_ = 0;
  std::atomic<unsigned> arrived_{0};
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

struct ThreadSpan {
  Clock::time_point start, end;
  std::vector<double> latency_us;
  std::string error;
};

// Rate of one pass: bytes over the span from the first thread's start to the last one's end.
inline double pass_gbps(const std::vector<ThreadSpan> &spans, unsigned k, double bytes) {
  Clock::time_point s = spans[0].start, e = spans[0].end;
  for (unsigned t = 1; t < k; ++t) {
    s = std::min(s, spans[t].start);
    e = std::max(e, spans[t].end);
  }
  const double secs = seconds(s, e);
  return secs > 0 ? bytes / secs / 1e9 : 0;
}

// Adds the first k threads' pass to `row`: the pass's rate over `bytes`, and every per-block
// latency the threads recorded.
inline void keep_pass(Row &row, const std::vector<ThreadSpan> &spans, unsigned k, double bytes) {
  row.gbps_runs.push_back(pass_gbps(spans, k, bytes));
  for (unsigned t = 0; t < k; ++t) row.latency_us.insert(row.latency_us.end(), spans[t].latency_us.begin(), spans[t].latency_us.end());
}

}  // namespace cxltier::bench
