// SPDX-License-Identifier: Apache-2.0
// Placement quality (placement.hpp, docs/runtime.md "Placement quality"): the inversions of
// the tiers' order, counted exactly from a scan of every resident block.
#include "lib/runtime/runtime_impl.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace cxltier {

namespace {
// A block the reconciliation (and the measure) may compare and move: resident, unpinned, not
// moving, not held, not being admitted.
bool movable(const StoreEntry &e) noexcept {
  return resident_unpinned(e) && (e.res.flags & kFlagsInPassage) == 0;
}
// wait_idle gives up on the order settling after this many mover passes (about 2 s) past the
// call: a safeguard, never reached by a workload that stops (each swap strictly improves the order).
constexpr uint64_t kSettlePasses = 1000;
// A synchronous runtime reconciles in wait_idle for at most this many rounds.
constexpr int kSettleRounds = 4096;

// The keep values of one scan, each equal bit for bit to keep_value's. Under decaying LRFU a
// keep value is score x (1-alpha)^d for a block idle d steps: the factor comes from the table
// filled at open (decay_factor, by the same std::pow call as lrfu_effective_score; (1-alpha)^0
// is exactly 1) rather than from a pow per block (the keep-value call and its pow were over a
// third of a reconciliation's scan of 1M blocks, under the lock).
// Under LRFU in touch mode (the default) the keep value is the stored score itself, read here
// from the entry the scan holds instead of through keep_value's call.
// Every value of one scan is taken at the step the scan began, so that a scan that hands the
// lock over between chunks (reconcile) compares values of one step even when the clock moves
// meanwhile. Only LRFU's keep values change with the step.
class ScanKeep {
public:
  explicit ScanKeep(const Runtime::Impl &m) noexcept
      : m_(m), now_(m.now), lrfu_(m.cfg.policy == PolicyKind::lrfu),
        touch_(lrfu_ && m.cfg.lrfu.mode == ScoreMode::touch) {}
  double operator()(NodeId id, const StoreEntry &e) const noexcept {
    if (touch_) return e.st.score;
    if (!lrfu_) return m_.keep_value(id);
    const uint64_t d = now_ - std::min(now_, e.st.last_access);
    const std::vector<double> &factor = m_.decay_factor;
    if (d < factor.size()) return e.st.score * factor[d];
    return lrfu_effective_score(e.st.score, d, m_.cfg.lrfu);  // keep_value's, at the scan's step
  }

private:
  const Runtime::Impl &m_;
  uint64_t now_;
  bool lrfu_, touch_;
};
// The reconciliation scans this many ids at a time, handing the lock to a waiting engine
// thread between two (pass_lock): about 0.06 ms of scanning each. Chunks of 2^16 ids let more
// of the engine's steps wait a whole chunk (the 99th percentile of its batches 0.45-0.63 ms
// against 0.22 with 2^14; bench/README.md, section 2); 2^12 did as well as 2^14.
constexpr size_t kScanChunk = size_t{1} << 14;
}  // namespace

double Runtime::Impl::keep_value(NodeId id) const noexcept {
  const PolicyState &st = (*store)[id].st;
  return keep_value_of(st, id, st.tick);
}

double Runtime::Impl::keep_value_of(const PolicyState &st, NodeId id, uint64_t tick_of) const noexcept {
  switch (cfg.policy) {
    case PolicyKind::lrfu: return lrfu_effective_score(st.score, now - std::min(now, st.last_access), cfg.lrfu);
    case PolicyKind::lfu: return static_cast<double>(st.accesses);
    case PolicyKind::opt: return opt_next.empty() || id >= opt_next.size() ? 0.0 : -static_cast<double>(opt_next[id]);
    default: return static_cast<double>(tick_of);
  }
}

uint64_t Runtime::Impl::snapshot_keep_values(std::vector<std::vector<double>> &by_tier) const {
  by_tier.resize(tiers.size());
  for (auto &v : by_tier) v.clear();
  ScanKeep keep(*this);
  store->for_each([&](NodeId id, const StoreEntry &e) {
    if (!movable(e)) return;
    by_tier[static_cast<size_t>(e.res.tier)].push_back(keep(id, e));
  });
  return placement.begin();
}

PlacementMeasure count_inversions(std::vector<std::vector<double>> &by_tier) {
  constexpr double kHysteresis = kPlacementHysteresis;
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
  return m;
}

// Reconciliation (docs/runtime.md, "Placement quality"). For each tier i and the next slower
// tier j holding a movable block, the blocks of j by keep value from the highest down are
// matched against those of i from the lowest up; while the one from j keeps more (by more than
// the hysteresis), it moves up: into a free slot of i when i can take one without passing its
// high watermark (so that the watermark pass never answers a reconciliation), else by a swap:
// i's lowest is demoted into a free slot of j, and when that copy is done (finish_swap, in the
// same critical section that frees its slot in i) j's block moves up into it. A swap needs
// one free slot in j: the watermark pass keeps such headroom. Each move goes through the
// migration protocol; a block that changed while the lock was released is skipped.
size_t Runtime::Impl::reconcile(std::unique_lock<std::mutex> &lk, size_t budget) {
  const size_t T = tiers.size();
  if (T < 2 || budget == 0 || reconciling) return 0;
  reconciling = true;  // the scratch below is this call's while the lock is released (the pick, a synchronous copy)
  reconcile_stale = false;
  struct Done {
    Impl &m;
    ~Done() {
      m.reconciling = false;
      if (m.cfg.synchronous) m.moved_cv.notify_all();  // a wait_settled waits for this call (below)
    }
  } done{*this};
  rank_all.resize(T);
  rank_low.resize(T);
  rank_high.resize(T);
  for (auto &v : rank_all) v.clear();
  // The scan, in chunks: between two, the lock goes to an engine thread waiting for it
  // (pass_lock's protocol, parallel_drain.cpp), so that step() waits for a chunk, not for the
  // whole scan. Blocks change meanwhile as they may during the pick below, and the same checks
  // answer for both: a block scanned twice under two ids (dropped and admitted again) fails
  // `still` under its old one, and a value that changed after its chunk is the current value's
  // question, asked before any move. Accesses made during the scan may leave an inversion it
  // does not see; the next scan does.
  ScanKeep keep(*this);
  for (size_t lo = 0; lo < store->id_limit(); lo += kScanChunk) {
    if (lo != 0) {
      pass_lock(lk);
      if (stopping) return 0;
    }
    store->for_each_in(lo, lo + kScanChunk, [&](NodeId id, const StoreEntry &e) {
      if (movable(e)) rank_all[static_cast<size_t>(e.res.tier)].push_back(Ranked{keep(id, e), id, e.res.generation()});
    });
  }
  // The candidates are picked from the scan with the lock released (the pick was a third of
  // the time the lock was held at 1M blocks). Blocks may change meanwhile: each candidate is
  // checked again under the lock below (still: same generation and tier, movable), and a pair
  // out of order by the scan's values is moved only if it still is by the current ones; one
  // that is not marks the scan stale (reconcile_stale), so that no caller takes this pass for
  // proof that the order is settled.
  for (size_t t = 0; t < T; ++t) {  // sized here: nothing allocates, or throws, unlocked
    const size_t k = std::min(budget, rank_all[t].size());
    rank_low[t].resize(k);
    rank_high[t].resize(k);
  }
  lk.unlock();
  const auto lower = [](const Ranked &a, const Ranked &b) { return a.keep < b.keep || (a.keep == b.keep && a.id < b.id); };
  const auto higher = [](const Ranked &a, const Ranked &b) { return a.keep > b.keep || (a.keep == b.keep && a.id < b.id); };
  for (size_t t = 0; t < T; ++t) {
    std::partial_sort_copy(rank_all[t].begin(), rank_all[t].end(), rank_low[t].begin(), rank_low[t].end(), lower);
    std::partial_sort_copy(rank_all[t].begin(), rank_all[t].end(), rank_high[t].begin(), rank_high[t].end(), higher);
  }
  relock(lk);
  if (stopping) return 0;
  const bool sync = cfg.synchronous;
  auto still = [&](const Ranked &r, int t) {
    if (!store->valid(r.id)) return false;
    const StoreEntry &e = (*store)[r.id];
    return e.res.generation() == r.generation && e.res.tier == t && movable(e);
  };
  // A tier takes one more block without a swap while that keeps it at or under its high
  // watermark (a synchronous runtime has no watermark pass: its whole budget).
  auto room = [&](int t) {
    const BlockPool &p = *tiers[static_cast<size_t>(t)].pool;
    const double limit = sync ? p.max_slots() : std::floor(cfg.high_watermark * p.max_slots());
    return p.slots_used() + 1.0 <= limit;
  };
  std::string err;
  size_t begun = 0;
  for (int i = 0; i + 1 < static_cast<int>(T) && begun < budget; ++i) {
    int j = i + 1;
    while (j < static_cast<int>(T) && rank_all[static_cast<size_t>(j)].empty()) ++j;
    if (j == static_cast<int>(T)) break;
    const std::vector<Ranked> &low = rank_low[static_cast<size_t>(i)];
    const std::vector<Ranked> &high = rank_high[static_cast<size_t>(j)];
    size_t p = 0;
    for (size_t q = 0; q < high.size() && begun < budget; ++q) {
      const Ranked a = high[q];
      if (!still(a, j)) continue;
      while (p < low.size() && !still(low[p], i)) ++p;
      if (p == low.size()) break;
      const Ranked b = low[p];
      if (!(a.keep > b.keep + kPlacementHysteresis)) break;  // sorted: no later pair is out of order
      if (!(keep_value(a.id) > keep_value(b.id) + kPlacementHysteresis)) {  // accessed since the scan
        reconcile_stale = true;
        continue;
      }
      SlotId d = kInvalidSlot;
      if (room(i)) {
        if (allocate_for_move(i, &d) != CXLT_OK) break;
        if (sync) {
          move_now(lk, a.id, i, d, &err);
        } else {
          schedule_move(a.id, i, d);
        }
        ++begun;
        continue;
      }
      if (tiers[static_cast<size_t>(j)].pool->slots_free() == 0 || allocate_for_move(j, &d) != CXLT_OK) break;
      ++p;
      ++begun;
      if (!sync) {
        schedule_move(b.id, j, d, a.id);
        continue;
      }
      if (!move_now(lk, b.id, j, d, &err) || !still(a, j) || allocate_for_move(i, &d) != CXLT_OK) continue;
      move_now(lk, a.id, i, d, &err);
      ++begun;
    }
  }
  return begun;
}

// A swap's demotion finished (protocol step 3, lock held): its partner moves up into the slot
// just freed, if it still may move. The slot cannot be taken by anyone in between.
void Runtime::Impl::finish_swap(const MoveJob &job, bool ok) {
  --swap_in[job.dst];
  if (!ok || stopping || !store->valid(job.partner)) return;
  const StoreEntry &e = (*store)[job.partner];
  if (e.res.generation() != job.partner_generation || e.res.tier != job.dst || !movable(e)) return;
  SlotId d = kInvalidSlot;
  if (allocate_for_move(job.src, &d) != CXLT_OK) return;
  schedule_move(job.partner, job.src, d);
}

bool Runtime::Impl::wait_settled(std::unique_lock<std::mutex> &lk, int64_t timeout_ms) {
  // wait_for converts to the clock's nanoseconds: past 2^63 ns (about 9.2e12 ms, 292 years) the
  // product overflows (and the wait returns at once), so from 2^43 ms (278 years) on it waits
  // forever.
  const bool forever = timeout_ms < 0 || timeout_ms > int64_t{1} << 43;
  if (cfg.synchronous) {
    // No threads: the order is reconciled here, each copy in this thread.
    drain_accesses();
    const size_t budget = std::max<size_t>(1, cfg.migration_batch) * tiers.size();
    for (int round = 0; round < kSettleRounds; ++round) {
      // Another engine thread's reconcile may own the scratch, its lock released for the pick
      // or a copy: wait for it (it notifies as it returns), then reconcile here. A round that
      // moves nothing ends the wait, stale or not: a scan goes stale only when engine threads
      // act meanwhile, and then no wait can promise an order (nor should it rescan every state
      // up to kSettleRounds times while they do).
      moved_cv.wait(lk, [&] { return !reconciling; });
      if (reconcile(lk, budget) == 0) break;
    }
    return jobs.empty() && in_flight == 0;
  }
  // A zero timeout polls: no copy queued or in flight, and the mover's latest pass found
  // nothing to do (its last scan of the order included: that may be up to 10 ms old).
  if (timeout_ms == 0) return jobs.empty() && in_flight == 0 && idle_pass == mover_passes;
  ++settle_waiters;
  const uint64_t want = mover_passes + 1;  // a pass begun after this call
  mover_cv.notify_one();
  auto settled = [&] {
    return stopping || (jobs.empty() && in_flight == 0 && (quiet_pass >= want || mover_passes >= want + kSettlePasses));
  };
  if (forever) {
    moved_cv.wait(lk, settled);
  } else {
    moved_cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), settled);
  }
  --settle_waiters;
  return jobs.empty() && in_flight == 0 && (stopping || quiet_pass >= want);
}

}  // namespace cxltier
