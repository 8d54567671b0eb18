// SPDX-License-Identifier: Apache-2.0
// Placement quality (placement.hpp, docs/runtime.md "Placement quality"): the inversions of
// the tiers' order, counted exactly from a scan of every resident block.
#include "runtime/runtime_impl.hpp"

#include <algorithm>
#include <vector>

namespace cxltier {

double Runtime::Impl::keep_value(NodeId id) const noexcept {
  const StoreEntry &e = (*store)[id];
  switch (cfg.policy) {
    case PolicyKind::lrfu: return lrfu_effective_score(e.st.score, now - std::min(now, e.st.last_access), cfg.lrfu);
    case PolicyKind::lfu: return static_cast<double>(e.st.accesses);
    case PolicyKind::opt: return opt_next.empty() || id >= opt_next.size() ? 0.0 : -static_cast<double>(opt_next[id]);
    default: return static_cast<double>(e.st.tick);
  }
}

PlacementMeasure Runtime::Impl::measure_placement() const {
  // The promotion rule promotes on a strictly larger keep value: its hysteresis is 0.
  constexpr double kHysteresis = 0.0;
  thread_local std::vector<std::vector<double>> by_tier;  // keeps its capacity between calls
  by_tier.resize(tiers.size());
  for (auto &v : by_tier) v.clear();
  store->for_each([&](NodeId id, const StoreEntry &e) {
    if (e.tier < 0 || e.pins != 0 || (e.flags & (kFlagMoving | kFlagHeld | kFlagAdmitting))) return;
    by_tier[static_cast<size_t>(e.tier)].push_back(keep_value(id));
  });
  PlacementMeasure m;
  for (auto &v : by_tier) {
    std::sort(v.begin(), v.end());
    m.blocks += v.size();
  }
  // A pair (a in slower tier j, b in faster tier i) is inverted when keep(a) > keep(b) + h: for
  // each a, the b of tier i below keep(a) - h, found by binary search in i's sorted values.
  for (size_t i = 0; i < by_tier.size(); ++i) {
    const std::vector<double> &fast = by_tier[i];
    if (fast.empty()) continue;
    for (size_t j = i + 1; j < by_tier.size(); ++j) {
      const std::vector<double> &slow = by_tier[j];
      if (slow.empty()) continue;
      const double gap = slow.back() - fast.front();
      if (!(gap > kHysteresis)) continue;
      m.max_gap = std::max(m.max_gap, gap);
      for (auto it = slow.rbegin(); it != slow.rend(); ++it) {
        const size_t below = static_cast<size_t>(std::lower_bound(fast.begin(), fast.end(), *it - kHysteresis) - fast.begin());
        if (below == 0) break;  // sorted: no smaller a finds any
        m.inversions += below;
      }
    }
  }
  placement.measured = true;
  placement.last = m;
  if (m.inversions == 0) {
    placement.ever_clean = true;
    placement.last_clean_step = now;
  }
  return m;
}

}  // namespace cxltier
