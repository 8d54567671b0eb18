// SPDX-License-Identifier: Apache-2.0
// Placement quality (docs/runtime.md, "Placement quality"): how far the tiers are from holding
// the blocks the promotion rule prefers in the faster tiers. An inversion is a pair of unpinned,
// not-moving blocks, A in a slower tier and B in a faster one, where A's keep value (the value
// the promotion rule compares: the effective LRFU score, the access count for LFU, the next use
// for OPT, the last reference for the recency policies) exceeds B's by more than the rule's
// hysteresis. Computed from a scan of every remembered state under the runtime's mutex (O(n):
// each movable block's keep value, copied out per tier; placement.cpp), then a sort and count
// with no lock held (O(n log n)), so that a stats poller stalls the engine only for the scan
// (the three parts: the numbered comment above Runtime::stats, stats.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace cxltier {

// The promotion rule promotes on a strictly larger keep value: its hysteresis is 0. The
// measure and the mover's reconciliation both compare by it.
inline constexpr double kPlacementHysteresis = 0.0;

struct PlacementMeasure {
  uint64_t inversions = 0;  // pairs out of order (lower is better; 0 is the goal)
  double max_gap = 0;       // largest keep-value gap of such a pair, in the rule's units (0: none)
  uint64_t blocks = 0;      // blocks compared (unpinned, not moving)
};

// The measure of keep values copied out per tier (index: tier rank). Sorts each tier's values
// in place; needs no lock.
PlacementMeasure count_inversions(std::vector<std::vector<double>> &by_tier);

// What the runtime remembers between measurements (under the runtime's mutex). Measures are
// numbered by their snapshot; two callers may count theirs at once and finish in either order.
// The measure remembered is the latest snapshot's, never an earlier one that finished later;
// a clean one (no inversion) counts for the clean step whenever it finishes.
struct PlacementTrack {
  uint64_t snapshots = 0;  // keep-value snapshots taken
  uint64_t recorded = 0;   // the snapshot whose measure `last` is (0: none)
  bool measured = false;
  uint64_t last_clean_step = 0;  // decode step of the latest snapshot that found no inversion
  bool ever_clean = false;
  PlacementMeasure last;

  uint64_t begin() noexcept { return ++snapshots; }  // a snapshot's number
  // The measure of snapshot `snapshot`, taken at decode step `step`. False, and `last` kept,
  // when a later snapshot's measure is recorded already.
  bool record(const PlacementMeasure &m, uint64_t snapshot, uint64_t step) noexcept {
    if (m.inversions == 0 && (!ever_clean || step > last_clean_step)) {
      ever_clean = true;
      last_clean_step = step;
    }
    if (snapshot <= recorded) return false;
    recorded = snapshot;
    measured = true;
    last = m;
    return true;
  }
};

}  // namespace cxltier
