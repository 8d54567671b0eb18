// SPDX-License-Identifier: Apache-2.0
// Test doubles of the remote tier (lib/runtime/remote.hpp) that hold a write-out or close() part
// way until the test lets them go, installed with RuntimeTestAccess::set_remote. The real Redis
// Cluster client has its own tests (tests/remote); these make a window that a test can hold open.
#pragma once

#include "lib/runtime/remote.hpp"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

namespace cxlt_test {

// A gate: the double's call marks itself entered and waits until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, open = false;
  void pass() {
    std::unique_lock lk(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lk, [&] { return open; });
  }
  // True once a call has entered, within `s` seconds.
  bool wait_entered(double s) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, std::chrono::duration<double>(s), [&] { return entered; });
  }
  void let_go() {
    {
      const std::lock_guard lk(mu);
      open = true;
    }
    cv.notify_all();
  }
};

// Every victim is written out (threshold 0), in the thread that makes room, and each write-out
// waits at the gate; it fetches nothing. `stored` is the key of the last write-out begun.
struct HeldWriteOuts : cxltier::RemoteTier {
  Gate gate;
  cxltier::Key stored{};
  bool fetch(const cxltier::Key &, void *, size_t) noexcept override { return false; }
  bool store(const cxltier::Key &key, const void *, size_t) noexcept override {
    {
      const std::lock_guard lk(gate.mu);
      stored = key;
    }
    gate.pass();
    return true;
  }
  bool store_async(const cxltier::Key &, const void *, size_t, std::function<void(bool)>) noexcept override { return false; }
  void note_skipped() noexcept override {}
  void stop() noexcept override {}
  cxltier::RemoteCounters counters() const noexcept override { return {}; }
  double write_threshold() const noexcept override { return 0.0; }
  std::string describe() const override { return "held write-outs (test)"; }
  cxltier::Key last_stored() {
    const std::lock_guard lk(gate.mu);
    return stored;
  }
};

// Every fetch (an admission of a block resident nowhere) waits at the gate and then finds
// nothing, so the admission holds its block, flagged admitting and pinned by it, with the lock
// released until the test lets it go; it writes out nothing.
struct HeldFetch : cxltier::RemoteTier {
  Gate gate;
  bool fetch(const cxltier::Key &, void *, size_t) noexcept override {
    gate.pass();
    return false;
  }
  bool store(const cxltier::Key &, const void *, size_t) noexcept override { return false; }
  bool store_async(const cxltier::Key &, const void *, size_t, std::function<void(bool)>) noexcept override { return false; }
  void note_skipped() noexcept override {}
  void stop() noexcept override {}
  cxltier::RemoteCounters counters() const noexcept override { return {}; }
  double write_threshold() const noexcept override { return 1.0; }
  std::string describe() const override { return "held fetch (test)"; }
};

// Writes out nothing; its stop(), which close() calls once the threads are stopped, waits at the gate.
struct HeldStop : cxltier::RemoteTier {
  Gate gate;
  bool fetch(const cxltier::Key &, void *, size_t) noexcept override { return false; }
  bool store(const cxltier::Key &, const void *, size_t) noexcept override { return false; }
  bool store_async(const cxltier::Key &, const void *, size_t, std::function<void(bool)>) noexcept override { return false; }
  void note_skipped() noexcept override {}
  void stop() noexcept override { gate.pass(); }
  cxltier::RemoteCounters counters() const noexcept override { return {}; }
  double write_threshold() const noexcept override { return 1.0; }
  std::string describe() const override { return "held stop (test)"; }
};

}  // namespace cxlt_test
