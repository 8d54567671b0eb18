// SPDX-License-Identifier: Apache-2.0
// The LRFU index checked: the auditor (the same decision by a scan of every resident block)
// and the structure check the tests run after every operation.
#include "lib/policy/lrfu_index.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace cxltier {

NodeId LrfuIndex::victim_bruteforce(uint64_t now, Eligible eligible) const noexcept {
  NodeId best = kNoNode;
  double best_p = 0;
  for (NodeId id : live_) {
    if (!eligible(id)) continue;
    double p = prio(ids_.s(id), ids_.t(id), now);
    if (best == kNoNode ||
        evicts_before(p, ids_.t(id), ids_.s(id), key_of(id), best_p, ids_.t(best), ids_.s(best), key_of(best))) {
      best = id;
      best_p = p;
    }
  }
  return best;
}

std::string LrfuIndex::validate() const {
  std::ostringstream err;
  if (stats_.audit_disagreements != 0)
    err << "the auditor disagreed with " << stats_.audit_disagreements << " of " << stats_.audits << " victim choices; ";
  // Part-way through upkeep's rebuild the heaps hold only the blocks placed so far, unordered:
  // the structure is checked once it is whole (any other call completes it).
  if (rebuilding_) return err.str();
  std::vector<uint32_t> live_count(heaps_.size(), 0);
  std::vector<uint32_t> found(ids_.size(), 0);
  size_t entries = 0;
  for (unsigned b = 0; b < heaps_.size(); ++b) {
    const Heap &h = heaps_[b];
    entries += h.size();
    if (!h.is_heap()) err << "bucket " << b << " violates the heap order; ";
    for (size_t i = 0; i < h.size(); ++i) {
      const Entry &e = h[i];
      if (stale(e)) continue;
      if (ids_[e.id].bucket != b) err << "id " << e.id << " live in bucket " << b << " but recorded in " << ids_[e.id].bucket << "; ";
      if (e.s != ids_.s(e.id) || e.t != ids_.t(e.id)) err << "id " << e.id << " entry disagrees with its state; ";
      if (!(e.key == key_of(e.id))) err << "id " << e.id << " entry's key is not the live list's; ";
      if (b == sat_index()) {
        if (!saturated_at(e.t, sat_now_)) err << "id " << e.id << " in the saturated heap is not saturated; ";
      } else if (bucket_search(e.s) != b || bucket_of(e.s) != b) {
        err << "id " << e.id << " score " << e.s << " in wrong bucket " << b << "; ";
      }
      ++live_count[b];
      ++found[e.id];
    }
  }
  for (unsigned b = 0; b < nbuckets_; ++b) {
    const Queue &q = queues_[b];
    entries += q.size();
    if (!q.is_ordered()) err << "bucket " << b << "'s queue is out of order; ";
    if (score_order_ && !q.empty()) err << "bucket " << b << " has a queue in score order; ";
    for (size_t i = q.head(); i < q.end(); ++i) {
      const Entry &e = q[i];
      if (stale(e)) continue;
      if (ids_[e.id].bucket != b) err << "id " << e.id << " queued in bucket " << b << " but recorded in " << ids_[e.id].bucket << "; ";
      if (e.s != ids_.s(e.id) || e.t != ids_.t(e.id)) err << "id " << e.id << " queue entry disagrees with its state; ";
      if (!(e.key == key_of(e.id))) err << "id " << e.id << " queue entry's key is not the live list's; ";
      if (bucket_search(e.s) != b || bucket_of(e.s) != b) err << "id " << e.id << " score " << e.s << " queued in wrong bucket " << b << "; ";
      ++live_count[b];
      ++found[e.id];
    }
    const Entry *r = root_entry(b);
    if (roots_[b].empty != (r == nullptr) || (r != nullptr && (roots_[b].t != r->t || roots_[b].s != r->s)))
      err << "bucket " << b << "'s root record disagrees with its heap and queue; ";
  }
  for (unsigned g = 0; g < groups_.size(); ++g) {
    const Group want = group_of_buckets(g);
    if (want.empty != groups_[g].empty || want.filled != groups_[g].filled ||
        (!want.empty && (want.t != groups_[g].t || want.s != groups_[g].s)))
      err << "group " << g << "'s record disagrees with its buckets; ";
    if (g < 32 && ((filled_groups_ >> g) & 1u) != (want.empty ? 0u : 1u)) err << "group " << g << "'s filled bit is wrong; ";
  }
  // Every bound depends on the lowest score kept per bucket, and a kept bound must be what the
  // bucket's or group's record gives at the step it was kept for.
  for (unsigned b = 0; b < nbuckets_; ++b) {
    double lowest = 2.0;
    for (size_t i = 0; i < heaps_[b].size(); ++i) lowest = std::min(lowest, heaps_[b][i].s);
    for (size_t i = queues_[b].head(); i < queues_[b].end(); ++i) lowest = std::min(lowest, queues_[b][i].s);
    if (min_score_[b] > lowest) err << "bucket " << b << "'s lowest score " << min_score_[b] << " is above an entry's " << lowest << "; ";
    const KeptBounds &k = kept_bounds_[b / kGroupBuckets];
    if (((k.valid >> (b % kGroupBuckets)) & 1u) && !roots_[b].empty && bucket_bounds_[b] != bucket_bound(b, k.now))
      err << "bucket " << b << "'s kept bound is not its bound at step " << k.now << "; ";
  }
  for (unsigned g = 0; g < groups_.size(); ++g)
    if (groups_[g].bound_kept && !groups_[g].empty && groups_[g].bound != group_bound(g, groups_[g].bound_now))
      err << "group " << g << "'s kept bound is not its bound at step " << groups_[g].bound_now << "; ";
  for (unsigned c = 0; c < kCells; ++c)
    if (bucket_hint_[c] != bucket_search(cell_low(c))) err << "bucket hint of cell " << c << " is wrong; ";
  // bucket_of against the plain binary search at every edge, just below it and halfway to the
  // next, and at the lowest score of every cell: where an answer changes, and where the window
  // count and the search part ways if either is wrong.
  for (size_t k = nbuckets_ + 1; k < edges_.size(); ++k)
    if (edges_[k] != std::numeric_limits<double>::infinity()) err << "edge padding " << k << " is not +inf; ";
  auto check_at = [&](double s) {
    if (bucket_of(s) != bucket_search(s))
      err << "bucket_of(" << s << ") = " << bucket_of(s) << ", the search says " << bucket_search(s) << "; ";
  };
  for (unsigned b = 0; b < nbuckets_ && edges_[b] != std::numeric_limits<double>::infinity(); ++b) {
    check_at(edges_[b]);
    check_at(std::nextafter(edges_[b], 0.0));
    if (edges_[b + 1] != std::numeric_limits<double>::infinity()) check_at(edges_[b] + (edges_[b + 1] - edges_[b]) / 2);
  }
  for (unsigned c = 0; c < kCells; ++c) check_at(cell_low(c));
  check_at(-0.0);  // a restored score may be -0.0, whose sign bit alone would pick the last cell
  if (entries != total_entries_) err << "entry count " << entries << " != " << total_entries_ << "; ";
  for (NodeId id : live_)  // a pending block is counted in the bucket of its stale entry
    if (lrfu_stamp::pending(ids_.stamp(id))) ++live_count[ids_[id].bucket];
  for (unsigned b = 0; b < heaps_.size(); ++b)
    if (live_count[b] != live_in_bucket_[b]) err << "bucket " << b << " live count mismatch; ";
  for (NodeId id : live_)
    if (found[id] != (lrfu_stamp::pending(ids_.stamp(id)) ? 0u : 1u))
      err << "live id " << id << (lrfu_stamp::pending(ids_.stamp(id)) ? " (pending)" : "") << " has " << found[id] << " live entries; ";
  std::vector<uint8_t> listed(ids_.size(), 0);
  for (NodeId id : pending_) listed[id] = 1;
  for (NodeId id : live_)
    if (lrfu_stamp::pending(ids_.stamp(id)) && !listed[id]) err << "pending id " << id << " is not in the pending list; ";
  for (size_t i = 0; i < live_.size(); ++i)
    if (ids_[live_[i]].live_pos != i) err << "live list position of " << live_[i] << " is wrong; ";
  if (live_keys_.size() != live_.size()) err << live_keys_.size() << " keys for " << live_.size() << " live blocks; ";
  return err.str();
}

}  // namespace cxltier
