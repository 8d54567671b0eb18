// SPDX-License-Identifier: Apache-2.0
// The faulty tier backend: a decorator that wraps another backend (option inner_backend) and
// injects failures as its FaultControl says: alloc_extent fails after N successes, copies fail
// at random with a seeded probability. Everything else passes through. Each opened backend
// makes its own FaultControl, armed with nothing; fault_control() (or TierBackend::control(),
// its ext_control) gives it to the test that arms it. For the runtime's fault-injection tests:
// every injected failure must reach the caller as an error.
#pragma once

#include "lib/memory/backend.hpp"

#include <cstdint>
#include <memory>
#include <mutex>

namespace cxltier {

struct FaultPlan {
  // alloc_extent: this many calls succeed (from arm()), then `alloc_failures` calls fail
  // (-1: every later call), then calls succeed again. -1 here: never fail.
  int64_t alloc_successes = -1;
  int64_t alloc_failures = -1;
  // Each copy (ext_copy_in or ext_copy_out through this backend) fails with this
  // probability, drawn from a deterministic sequence seeded by `seed` (the k-th copy's fate
  // depends only on seed and k, whichever thread makes it).
  double copy_failure_probability = 0;
  uint64_t seed = 1;
  // On an injected copy_in failure, first write half the bytes (when this tier is host
  // memory): a torn destination, so a runtime that used it anyway would be caught by checksums.
  bool tear_failed_copies = true;
};

struct FaultCounts {
  uint64_t allocs_passed = 0, allocs_failed = 0;  // calls let through / failed by injection
  uint64_t copies_passed = 0, copies_failed = 0;
};

// Shared between the test (which arms it) and the backend state (which consults it).
// Thread-safe: every member takes one mutex (this is a test tool, not a hot path).
class FaultControl {
public:
  explicit FaultControl(const FaultPlan &plan = {}) { arm(plan); }

  // Replace the plan and restart its counting (successes count from now; the copy sequence
  // restarts at k = 0). Counts are kept; reset_counts() clears them.
  void arm(const FaultPlan &plan);
  void disarm() { arm(FaultPlan{}); }
  FaultPlan plan() const;
  FaultCounts counts() const;
  void reset_counts();

  // Used by the backend: true if this call must fail. Each call is counted.
  bool next_alloc_fails() noexcept;
  bool next_copy_fails() noexcept;

private:
  mutable std::mutex mutex_;
  FaultPlan plan_;
  int64_t alloc_calls_ = 0;   // since arm()
  uint64_t copy_calls_ = 0;   // since arm()
  FaultCounts counts_;
};

// The FaultControl of a faulty backend; nullptr when `backend` is another backend.
std::shared_ptr<FaultControl> fault_control(const TierBackend &backend);

}  // namespace cxltier
