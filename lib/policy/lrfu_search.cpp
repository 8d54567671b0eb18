// SPDX-License-Identifier: Apache-2.0
// The LRFU index's victim search: branch and bound over the groups, buckets and heap entries
// (see lrfu_index.hpp for why the bounds are exact), and the bounds it reads.
#include "lib/policy/lrfu_index.hpp"

#include "lib/core/assert.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>

namespace cxltier {

namespace {
// The highest of the bounds offered, whose it was, and the next highest: a search takes the
// best of a set of buckets or groups and puts the rest back bounded by the runner-up.
struct TopTwo {
  static constexpr unsigned kNone = 0xffffffffu;
  unsigned top = kNone;
  double top_bound = -std::numeric_limits<double>::infinity(), next_bound = -std::numeric_limits<double>::infinity();
  void offer(unsigned i, double bound) noexcept {
    if (top == kNone || bound > top_bound) {
      if (top != kNone) next_bound = top_bound;
      top = i;
      top_bound = bound;
    } else if (bound > next_bound) {
      next_bound = bound;
    }
  }
};
}  // namespace

void LrfuIndex::push_candidate(Candidate c) {
  cand_.push_back(c);
  std::push_heap(cand_.begin(), cand_.end(), CandidateLess{});
}

LrfuIndex::Candidate LrfuIndex::pop_candidate() noexcept {
  std::pop_heap(cand_.begin(), cand_.end(), CandidateLess{});
  Candidate c = cand_.back();
  cand_.pop_back();
  return c;
}

// Upper bound on the priority of blocks whose score is s or higher and that have been idle for
// d steps or fewer: exact where the tables are monotone (see the constructor), with a relative
// slack past them.
inline double LrfuIndex::slack_bound(double s, uint64_t d) const noexcept {
  const double p = prio_d(s, d);
  if (d <= exact_bound_steps_) return p;
  return p > 0.0 ? p * (1.0 + kBoundSlack) : p;
}

// Upper bound on the priority of blocks in `bucket` idle for d steps or fewer.
inline double LrfuIndex::idle_bound(unsigned bucket, uint64_t d) const noexcept {
  return slack_bound(std::max(bucket_low(bucket), min_score_[bucket]), d);
}

// Upper bound on the priority of blocks in `bucket` whose last access is after step t.
double LrfuIndex::newer_bound(unsigned bucket, uint64_t t, uint64_t now) const noexcept {
  if (t >= now) return kNegInf;  // nothing can be newer than the current step
  return idle_bound(bucket, now - t - 1);
}

// Upper bound on the priority of blocks in `bucket` whose last access is step t or later.
double LrfuIndex::from_bound(unsigned bucket, uint64_t t, uint64_t now) const noexcept {
  return idle_bound(bucket, now > t ? now - t : 0);
}

void LrfuIndex::take_roots(unsigned b, uint64_t now) {
  // The heap's root, then the queue's front (its step sorted first, so that the front is the
  // first entry in order), one entry at a time: a stale one goes, a saturated one moves to
  // sat_pending_ (unless the bucket holds one score: see the top of lrfu_index.hpp), and the
  // first live one that does not move stays. No candidate refers into the bucket yet, so
  // positions may move.
  auto drop_fronts = [&](auto &&front, auto &&pop) {
    for (const Entry *r = front(); r != nullptr; r = front()) {
      if (stale(*r)) {
        --total_entries_;
      } else if (saturated_at(r->t, now)) {
        if (one_value_[b]) {
          ++stats_.saturated_kept;
          break;
        }
        sat_pending_.push_back(*r);  // a copy, before the pop
        --live_in_bucket_[b];
      } else {
        break;
      }
      pop();
    }
  };
  Heap &h = heaps_[b];
  drop_fronts([&h]() -> const Entry * { return h.empty() ? nullptr : &h.top(); }, [&h] { h.pop(); });
  Queue &q = queues_[b];
  drop_fronts(
      [&q]() -> const Entry * {
        if (q.empty()) return nullptr;
        q.sort_front();
        return &q.front();
      },
      [&q] { q.pop_front(); });
  refresh_root(b);
}

// An upper bound on every block in bucket b: its scores are >= the bucket's lowest, its last
// accesses no older than its root's.
double LrfuIndex::bucket_bound(unsigned b, uint64_t now) const noexcept {
  if (score_order_) return prio_d(roots_[b].s, 0);
  return idle_bound(b, now > roots_[b].t ? now - roots_[b].t : 0);
}

LrfuIndex::Group LrfuIndex::group_of_buckets(unsigned g) const noexcept {
  Group r{std::numeric_limits<uint64_t>::max(), std::numeric_limits<double>::infinity(), true};
  const unsigned end = std::min(nbuckets_, (g + 1) * kGroupBuckets);
  for (unsigned b = g * kGroupBuckets; b < end; ++b) {
    if (roots_[b].empty) continue;
    r.empty = false;
    r.filled = static_cast<uint16_t>(r.filled | (1u << (b - g * kGroupBuckets)));
    r.t = std::min(r.t, roots_[b].t);
    r.s = std::min(r.s, group_score(b));
  }
  return r;
}

// An upper bound on every block in group g: every bucket_bound() of its buckets is computed at
// a score no lower and idle steps no more than these (priority is monotone; the slack as there).
double LrfuIndex::group_bound(unsigned g, uint64_t now) const noexcept {
  const Group &gr = groups_[g];
  if (score_order_) return prio_d(gr.s, 0);
  return slack_bound(gr.s, now > gr.t ? now - gr.t : 0);
}

// Upper bound on the priority of every pending block: priority is monotone (higher with more
// idle steps, lower with a higher score), so the oldest access and the lowest score among
// them bound it; exact where the tables are monotone, with the slack of newer_bound past them.
double LrfuIndex::pending_bound(uint64_t now) const noexcept {
  return slack_bound(pending_min_s_, now > pending_min_t_ ? now - pending_min_t_ : 0);
}

// The victim among the indexed blocks; the pending ones (accessed since they were last
// indexed) are indexed first only when their bound could match it: they were accessed
// recently, so in a search for the block that has waited longest they rarely can, and then
// they stay pending (an access that is never needed by a search costs no heap work at all).
NodeId LrfuIndex::search(uint64_t now, Eligible eligible) noexcept {
  // When nearly every live block is pending (7/8 or more: a step that accessed every resident
  // block, as an engine's decode step does), their entries are made first, by the one rebuild
  // flush_pending() makes then: a search of the indexed blocks would read mostly stale entries,
  // dropping them bucket by bucket, and then rebuild all the same. Below that, the blocks not
  // accessed since their entries were made usually hold the victim, and pending ones wait.
  // (The list counts places left by blocks erased since, too: a rebuild a little early, still
  // at most one per 7/8 of the live blocks' worth of places.)
  if (!pending_.empty() && 8 * pending_.size() >= 7 * live_.size()) flush_pending();
  // The bound is taken before the search: a rebuild during it indexes the pending blocks, and
  // then the search may have chosen before they were in the heaps.
  const bool had_pending = !pending_.empty();
  const double bound = had_pending ? pending_bound(now) : kNegInf;
  double best_p = 0.0;
  NodeId v = search_indexed(now, eligible, &best_p);
  if (had_pending && (v == kNoNode || !(bound < best_p))) {
    flush_pending();
    v = search_indexed(now, eligible, &best_p);
  }
  if (v != kNoNode) ++stats_.victims;
  return v;
}

NodeId LrfuIndex::search_indexed(uint64_t now, Eligible eligible, double *best_priority) noexcept {
  if (sat_steps_ != 0) {
    // The saturated heap holds blocks saturated at sat_now_; a search at an earlier step (time
    // does not go back in the runtime, but the index does not rely on it) places them again.
    if (now < sat_now_) {
      sat_now_ = now;
      rebuild(false, true);
    }
    sat_now_ = now;
  }
  // A refit for new levels waits for live/16 updates since the last rebuild: O(1) amortized
  // even when levels keep coming. Where upkeep() runs, it refits instead, in pieces (the
  // edges change which blocks a search reads first, never the victim).
  if (levels_dirty_ && !upkeep_refits() && ops_since_rebuild_ >= live_.size() / 16) {
    levels_dirty_ = false;
    ++stats_.level_refits;
    rebuild(nbuckets_ > 1);
  }
  Heap &sat = heaps_[sat_index()];
  while (!sat.empty() && stale(sat.top())) {
    sat.pop();
    --total_entries_;
  }
  // The buckets enter the search through their groups: a group is bounded from its record, a
  // bucket from its root's record, and a heap is read only when its bucket's bound can win
  // (most searches end after a bucket or two: the rest are never read, and of the 256 bucket
  // bounds about 32 are computed). The saturated heap's root is a candidate too.
  // Until the first eligible block is found there is no bound to prune by, and every candidate
  // is read: the search descends from the groups to the best bucket and its root without the
  // candidate heap (the candidate to read next is held, the others wait in deferred_), and the
  // waiting ones enter the heap once a best block can filter them. Most searches end after
  // that root with no heap operation at all. The order of reading does not change the victim:
  // a candidate is dropped only when its bound is below a block already found.
  cand_.clear();
  deferred_.clear();
  bool have_held = false;
  Candidate held{};
  if (groups_.size() <= 32) {
    // One candidate for all the groups, read first (no bound is needed for that).
    const uint32_t all = filled_groups_;
    if (all != 0) {
      held = Candidate::make(std::numeric_limits<double>::infinity(), 0, all, kSomeGroups);
      have_held = true;
    }
  } else {
    for (unsigned g = 0; g < groups_.size(); ++g)
      if (!groups_[g].empty) deferred_.push_back(Candidate::make(group_bound(g, now), g * kGroupBuckets, 0xffffu, kWholeGroup));
  }
  if (!sat.empty()) deferred_.push_back(Candidate::make(prio(sat.top().s, sat.top().t, now), sat_index(), 0, kEntry));

  bool have_best = false;
  double best_p = 0;
  Entry best{};
  size_t examined = 0;  // entries read
  // Where the best block's entry is (a heap and its place there), when it came from one.
  uint32_t best_heap = kNoBucket, best_at = 0;
  bool best_queued = false;  // ... in the bucket's queue rather than its heap
  const Less less = tie_break();
  // Offer a live block: it becomes the best when it would beat the best one found and is
  // eligible (asked only then). True when nothing its order puts after it can beat the best
  // (see `covers` below): it did not beat the best, or it became the best.
  auto offer = [&](const Entry &e, double p) {
    if (have_best && !(p > best_p || (p == best_p && less(e, best)))) return true;
    if (!eligible(e.id)) return false;
    have_best = true;
    best_p = p;
    best = e;
    return true;
  };
  // A candidate whose bound is below the best block found can never be read (the best only
  // gets better): it is not pushed at all. Before a best block, `descend` marks the one to read
  // next (the best of a set of groups or buckets, or a bucket's root).
  auto consider = [&](Candidate c, bool descend = false) __attribute__((always_inline)) {
    if (have_best) {
      if (!(c.bound < best_p)) push_candidate(c);
    } else if (descend && !have_held) {
      held = c;
      have_held = true;
    } else {
      deferred_.push_back(c);
    }
  };
  for (;;) {
    // A held candidate was made while no block was found, and is read at once (have_best is
    // still false): the bound tests below, which assume the heap's order, do not apply to it.
    Candidate c;
    if (have_held) {
      cxlt_assert_internal(!have_best);
      c = held;
      have_held = false;
    } else {
      for (const Candidate &d : deferred_)
        if (!have_best || !(d.bound < best_p)) push_candidate(d);
      deferred_.clear();
      if (cand_.empty()) break;
      c = pop_candidate();
    }
    if (c.kind() == kSomeGroups) {
      // As for a group's buckets below: the group of highest bound is taken, the rest goes back.
      if (have_best && c.bound < best_p) break;
      TopTwo best_group;
      for (uint32_t m = c.index; m != 0; m &= m - 1) {
        const unsigned g = static_cast<unsigned>(std::countr_zero(m));
        if (!groups_[g].empty) best_group.offer(g, kept_group_bound(g, now));
      }
      if (best_group.top == TopTwo::kNone) continue;
      const uint32_t rest = c.index & ~(1u << best_group.top);
      consider(Candidate::make(best_group.top_bound, best_group.top * kGroupBuckets, 0xffffu, kWholeGroup), true);
      if (rest != 0) consider(Candidate::make(best_group.next_bound, 0, rest, kSomeGroups));
      continue;
    }
    if (c.kind() == kWholeGroup) {
      // The group's buckets not yet taken (bit i: bucket c.bucket() + i): the one of highest bound
      // becomes a candidate, and the rest goes back bounded by the next highest, so a search
      // that ends within the first bucket pushes two candidates, not sixteen.
      if (have_best && c.bound < best_p) break;
      TopTwo best_bucket;
      uint32_t rest = 0;
      for (uint32_t m = c.index & groups_[c.bucket() / kGroupBuckets].filled; m != 0; m &= m - 1) {
        const unsigned b = c.bucket() + static_cast<unsigned>(std::countr_zero(m));
        rest |= m & -m;
        best_bucket.offer(b, kept_bucket_bound(b, now));
      }
      if (best_bucket.top == TopTwo::kNone) continue;
      rest &= ~(1u << (best_bucket.top - c.bucket()));
      consider(Candidate::make(best_bucket.top_bound, best_bucket.top, 0, kWholeBucket), true);
      if (rest != 0) consider(Candidate::make(best_bucket.next_bound, c.bucket(), rest, kWholeGroup));
      continue;
    }
    if (c.kind() == kWholeBucket) {
      if (have_best) {
        if (c.bound < best_p) break;
        // A tie at the bound: every block of the bucket comes after its root's t (s in score order).
        if (c.bound == best_p && (score_order_ ? best.s < roots_[c.bucket()].s : best.t < roots_[c.bucket()].t)) continue;
      }
      // The bucket's heap is read from here on: its stale roots go, its saturated roots (live,
      // priority exactly 1 - s) are offered now and join the saturated heap after the search.
      const size_t taken = sat_pending_.size();
      take_roots(c.bucket(), now);
      for (size_t i = taken; i < sat_pending_.size(); ++i) {
        offer(sat_pending_[i], prio(sat_pending_[i].s, sat_pending_[i].t, now));
        if (have_best && best.id == sat_pending_[i].id && best.version == sat_pending_[i].version) best_heap = kNoBucket;
      }
      // Two roots: the heap's and the queue's (its front step sorted by take_roots), the one of
      // higher bound read first.
      const Heap &h = heaps_[c.bucket()];
      const Queue &q = queues_[c.bucket()];
      Candidate first{}, second{};
      unsigned roots = 0;
      if (!h.empty()) {
        const Entry &r = h.top();
        first = Candidate::make(std::max(prio(r.s, r.t, now), score_order_ ? kNegInf : newer_bound(c.bucket(), r.t, now)),
                                c.bucket(), 0, kEntry);
        ++roots;
      }
      if (!q.empty()) {
        const Entry &r = q.front();
        const Candidate qc = Candidate::make(std::max(prio(r.s, r.t, now), newer_bound(c.bucket(), r.t, now)), c.bucket(),
                                             static_cast<uint32_t>(q.head()), kQueueEntry);
        if (roots == 0 || qc.bound > first.bound) {
          second = first;
          first = qc;
        } else {
          second = qc;
        }
        ++roots;
      }
      if (roots > 0) consider(first, true);
      if (roots > 1) consider(second, true);
      continue;
    }
    if (c.kind() == kQueueRun) {
      // The queue's next step, read for the first time: sorted now. The only candidate that
      // refers to it is this one, and the entries before it do not move.
      cxlt_assert_internal(c.index == queues_[c.bucket()].sorted_end());
      queues_[c.bucket()].sort_run(c.index);
      c = Candidate::make(c.bound, c.bucket(), c.index, kQueueEntry);
    }
    const bool queued = c.kind() == kQueueEntry || c.kind() == kQueueEntryDominated;
    const bool dominated = c.kind() == kEntryDominated || c.kind() == kQueueEntryDominated;
    const Heap &h = heaps_[c.bucket()];
    const Queue &q = queues_[c.bucket()];
    const Entry &e = queued ? q[c.index] : h[c.index];
    if (have_best) {
      if (c.bound < best_p) break;  // every remaining bound is <= this one
      if (c.bound == best_p) {
        // A tie at the bound can only matter if some block below could come first in order.
        bool best_first = dominated ? best.t <= e.t : less(best, e);
        if (best_first) continue;
      }
    }
    ++stats_.entries_examined;
    ++examined;
    // A stale entry in a queue waits until it reaches the front: before it in the queue are
    // blocks no later in order, which a search reads first.
    if (stale(e) && !queued) {
      if (stale_seen_.size() < stale_seen_.capacity())  // no allocation here: the rest wait for the next search
        stale_seen_.push_back(StaleAt{c.bucket(), c.index, e.id, e.version});
    }
    // covers: every block below e that e's order puts after it (its step's, or all of them in
    // score order) cannot come first. True when a live, eligible block of e's step was
    // evaluated above; when e, live or stale, does not beat the best block (what comes after e
    // and is no higher in priority does not beat it either); or when e becomes the best. So
    // eligibility, a read of the caller's state, is asked only of a block that would win.
    bool covers = dominated;
    if (!covers && !stale(e)) {
      const bool was_best = have_best && best.id == e.id && best.version == e.version;
      covers = offer(e, prio(e.s, e.t, now));
      if (!was_best && have_best && best.id == e.id && best.version == e.version) {
        best_heap = c.bucket();
        best_at = c.index;
        best_queued = queued;
      }
    }
    if (queued) {
      // In a queue the entry behind e is its only child, and what follows it is no earlier in
      // order (run_queue.hpp): the same bounds as a heap child's subtree.
      const uint32_t ch = c.index + 1;
      if (ch < q.end()) {
        const Entry &ce = q[ch];
        if (ch == q.sorted_end()) {
          // A step not sorted yet: every entry from ch on is of ce's step or later.
          consider(Candidate::make(from_bound(c.bucket(), ce.t, now), c.bucket(), ch, kQueueRun));
        } else if (covers && ce.t == e.t) {
          double nb = newer_bound(c.bucket(), ce.t, now);
          if (nb != kNegInf) consider(Candidate::make(nb, c.bucket(), ch, kQueueEntryDominated));
        } else {
          consider(Candidate::make(std::max(prio(ce.s, ce.t, now), newer_bound(c.bucket(), ce.t, now)), c.bucket(), ch,
                                   kQueueEntry));
        }
      }
      continue;
    }
    for (uint32_t ch = 2 * c.index + 1; ch <= 2 * c.index + 2 && ch < h.size(); ++ch) {
      const Entry &ce = h[ch];
      if (score_order_ || c.bucket() == sat_index()) {
        // Everything below a covering node comes after it in the decision's order: dominated.
        if (covers) continue;
        consider(Candidate::make(prio(ce.s, ce.t, now), c.bucket(), ch, kEntry));
      } else if (covers && ce.t == e.t) {
        double nb = newer_bound(c.bucket(), ce.t, now);
        if (nb != kNegInf) consider(Candidate::make(nb, c.bucket(), ch, kEntryDominated));
      } else {
        consider(Candidate::make(std::max(prio(ce.s, ce.t, now), newer_bound(c.bucket(), ce.t, now)), c.bucket(), ch, kEntry));
      }
    }
  }
  // Stale entries keep the bounds of their subtrees, so a search descends through every stale
  // entry whose bound beats the best block: in a tie-heavy workload (large beta) those are the
  // old ones, saturated at the highest priority, and without removal every later search would
  // walk them again. So each stale entry a search visits is removed after the search (O(log n)
  // each; a stale entry is visited once, unless a removal moved it or more than 4,096 were seen,
  // so this is about O(log n) per access, amortized).
  // Searches that examine many entries mean that the buckets no longer fit the live scores (a
  // bucket mixes scores, so its lowest one bounds old blocks above the best): once searches
  // have examined more than twice as many entries as there are live blocks since the last
  // rebuild, beyond the one entry each search reads at the least, the heaps are rebuilt and the
  // edges refitted (O(n), paid for by those entries). Counting that first entry too rebuilt
  // well-fitted buckets once per 2n victims, for nothing. The victim is already chosen and
  // does not change.
  if (examined > 1) examined_since_rebuild_ += examined - 1;
  remove_stale_seen();
  for (const Entry &e : sat_pending_) {
    sat.push(e);
    ids_[e.id].bucket = sat_index();
    ++live_in_bucket_[sat_index()];
    ++stats_.saturated_moves;
  }
  sat_pending_.clear();
  if (examined_since_rebuild_ > 2 * live_.size() + 64) {
    ++stats_.search_compactions;
    rebuild(nbuckets_ > 1);
  }
  if (!have_best) return kNoNode;
  // The next search in this step most likely takes one of the entries behind the victim (its
  // children: one of them rises to its place once the victim's entry is dropped), and asks for
  // its eligibility then: a state line that is seldom cached, as the blocks waited longest. Its
  // record, which the victim's erase reads and writes, is warmed too (its stamp, which the next
  // search reads to see whether the entry is stale, is in that state line in a runtime).
  auto warm_next = [this](NodeId id, Eligible &el) {
    prefetch(id);
    el.warm(id);
  };
  if (best_heap != kNoBucket && best_queued) {
    const Queue &q = queues_[best_heap];
    if (best_at + size_t{1} < q.end() && best_at >= q.head() && q[best_at].id == best.id && q[best_at].version == best.version)
      warm_next(q[best_at + 1].id, eligible);
  } else if (best_heap != kNoBucket) {
    const Heap &h = heaps_[best_heap];
    if (best_at < h.size() && h[best_at].id == best.id && h[best_at].version == best.version)
      for (size_t ch = 2 * size_t{best_at} + 1; ch <= 2 * size_t{best_at} + 2 && ch < h.size(); ++ch)
        warm_next(h[ch].id, eligible);
  }
  *best_priority = best_p;
  return best.id;
}

void LrfuIndex::remove_stale_seen() noexcept {
  // Highest index first within a bucket: a removal moves entries only on the path above its
  // index and below it, so the recorded lower indices mostly still hold what was recorded. An
  // entry that moved is found by the check and left for a later search or compaction.
  std::sort(stale_seen_.begin(), stale_seen_.end(), [](const StaleAt &a, const StaleAt &b) {
    return a.bucket != b.bucket ? a.bucket < b.bucket : a.index > b.index;
  });
  for (const StaleAt &s : stale_seen_) {
    Heap &h = heaps_[s.bucket];
    if (s.index >= h.size()) continue;
    const Entry &e = h[s.index];
    if (e.id != s.id || e.version != s.version || !stale(e)) continue;
    h.remove_at(s.index);
    if (s.bucket < nbuckets_) refresh_root(s.bucket);  // the entry that fills the place may rise to the root
    --total_entries_;
  }
  stale_seen_.clear();
}

NodeId LrfuIndex::victim(uint64_t now, Eligible eligible) noexcept {
  finish_rebuild();  // upkeep's, if one is part-way: the heaps hold only part of the blocks
  NodeId fast = search(now, eligible);
  if (!audit_) return fast;
  NodeId slow = victim_bruteforce(now, eligible);
  ++stats_.audits;
  if (fast != slow) {
    ++stats_.audit_disagreements;
    std::fprintf(stderr,
                 "cxltier: LRFU audit: index chose %u, brute force chose %u at step %llu (using the brute-force choice)\n",
                 fast, slow, static_cast<unsigned long long>(now));
    return slow;
  }
  return fast;
}

}  // namespace cxltier
