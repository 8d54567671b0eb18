// SPDX-License-Identifier: Apache-2.0
// Placement quality (docs/runtime.md, "Placement quality"): how far the tiers are from holding
// the blocks the promotion rule prefers in the faster tiers. An inversion is a pair of unpinned,
// not-moving blocks, A in a slower tier and B in a faster one, where A's keep value (the value
// the promotion rule compares: the effective LRFU score, the access count for LFU, the next use
// for OPT, the last reference for the recency policies) exceeds B's by more than the rule's
// hysteresis. Computed by placement.cpp from a scan of every resident block (O(n log n)).
#pragma once

#include <cstdint>

namespace cxltier {

// The promotion rule promotes on a strictly larger keep value: its hysteresis is 0. The
// measure and the mover's reconciliation both compare by it.
inline constexpr double kPlacementHysteresis = 0.0;

struct PlacementMeasure {
  uint64_t inversions = 0;  // pairs out of order (lower is better; 0 is the goal)
  double max_gap = 0;       // largest keep-value gap of such a pair, in the rule's units (0: none)
  uint64_t blocks = 0;      // blocks compared (unpinned, not moving)
};

// What the runtime remembers between measurements (under the runtime's mutex).
struct PlacementTrack {
  bool measured = false;
  uint64_t last_clean_step = 0;  // decode step of the last measurement that found no inversion
  bool ever_clean = false;
  PlacementMeasure last;
};

}  // namespace cxltier
