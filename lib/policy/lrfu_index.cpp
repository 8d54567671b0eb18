// SPDX-License-Identifier: Apache-2.0
// The exact LRFU eviction index (see lrfu_index.hpp for the decision and why it is exact).
#include "lib/policy/lrfu_index.hpp"

#include "lib/core/assert.hpp"

#include <cxltier/error.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>

namespace cxltier {

namespace {
bool is_pow2(unsigned v) { return v != 0 && (v & (v - 1)) == 0; }
}  // namespace

LrfuIndex::LrfuIndex(const LrfuParams &params, unsigned buckets, bool audit, std::shared_ptr<LrfuIdRecords> shared)
    : params_(params),
      nbuckets_(buckets),
      score_order_(params.mode == ScoreMode::touch && params.beta == 0.0),
      audit_(audit),
      records_(shared ? std::move(shared) : std::make_shared<LrfuIdRecords>()) {
  params_.validate();
  static_assert(LrfuIdRecord::kNoBucket > 65536, "a record holds every bucket's number, the saturated one's too");
  if (!is_pow2(nbuckets_) || nbuckets_ > 65536)
    fail(CXLT_ERROR_INVALID_ARGUMENT, "policy.index_buckets = ", buckets, " must be a power of two in [1, 65536]");
  heaps_.reserve(nbuckets_ + 1);
  levels_.reserve(nbuckets_ / 2);
  stale_seen_.reserve(4096);  // stale entries removed per search at most (more wait for the next one)
  for (unsigned b = 0; b < nbuckets_; ++b) heaps_.emplace_back(tie_break());
  queues_.reserve(nbuckets_);
  for (unsigned b = 0; b < nbuckets_; ++b) queues_.emplace_back(tie_break());
  heaps_.emplace_back(Less{Order::saturated});
  groups_.assign((nbuckets_ + kGroupBuckets - 1) / kGroupBuckets, Group{0, 0.0, true});
  deferred_.reserve(groups_.size() + 64);
  roots_.assign(nbuckets_, Root{0, 0.0, true});
  kept_bounds_.assign(groups_.size(), KeptBounds{});
  bucket_bounds_.assign(nbuckets_, 0.0);
  live_in_bucket_.assign(nbuckets_ + 1, 0);
  min_score_.assign(nbuckets_ + 1, 2.0);
  edges_.resize(nbuckets_ + 1);
  for (unsigned b = 0; b < nbuckets_; ++b) edges_[b] = static_cast<double>(b) / static_cast<double>(nbuckets_);
  edges_[nbuckets_] = std::numeric_limits<double>::infinity();
  pad_edges();
  refresh_bucket_hints();
  constexpr size_t kTable = 1u << 15;
  // The recency table runs to where 1 - exp(-beta d) is exactly 1.0 (lrfu_recency_decay says so
  // from kRecencySaturation / beta on) when that is within kMaxRecencyTable entries (beta >=
  // about 7.6e-5; 320 KiB at the default 0.001): past its end recency is then the constant 1.0,
  // and priorities are monotone in d without limit.
  constexpr size_t kMaxRecencyTable = 1u << 19;
  if (params_.beta != 0.0) {
    size_t n = kTable;
    const double saturation = kRecencySaturation / params_.beta;
    if (saturation + 2.0 <= static_cast<double>(kMaxRecencyTable))
      n = std::max(n, static_cast<size_t>(std::ceil(saturation)) + 2);
    recency_table_.resize(n);
    for (size_t d = 0; d < n; ++d) recency_table_[d] = lrfu_recency_decay(d, params_.beta);
    recency_saturated_ = recency_table_.back() == 1.0;
  }
  // Saturation: from the first idle step of the table's final run of exact 1.0 values, recency
  // is 1.0 for good (past the table too), so a touch-mode priority is exactly 1 - s.
  if (!score_order_ && params_.mode == ScoreMode::touch && recency_saturated_) {
    size_t d = recency_table_.size();
    while (d > 0 && recency_table_[d - 1] == 1.0) --d;
    sat_steps_ = std::max<size_t>(d, 1);
  }
  if (params_.mode == ScoreMode::decay) {
    decay_table_.resize(kTable);
    for (size_t d = 0; d < kTable; ++d) decay_table_[d] = std::pow(1.0 - params_.alpha, static_cast<double>(d));
  }
  // Where both tables are monotone as computed (recency non-decreasing, decay non-increasing in
  // d), the priority prio_d() computes is monotone in d and in s too: 1 - s, s * decay and
  // (1 - s) * recency are single correctly rounded operations, which preserve order. A bound
  // at idle steps inside the tables is then exact and needs no slack, and a tie at the bound
  // can be settled by the tie-break instead of a visit (without it, many blocks of the same
  // score and saturated recency, 1 - exp(-beta d) = 1.0, were visited one by one).
  exact_bound_steps_ = kTable;
  if (recency_saturated_ && params_.mode == ScoreMode::touch) exact_bound_steps_ = std::numeric_limits<size_t>::max();
  for (size_t d = 1; d < recency_table_.size(); ++d)
    if (recency_table_[d] < recency_table_[d - 1]) exact_bound_steps_ = std::min(exact_bound_steps_, d - 1);
  for (size_t d = 1; d < decay_table_.size(); ++d)
    if (decay_table_[d] > decay_table_[d - 1]) exact_bound_steps_ = std::min(exact_bound_steps_, d - 1);
  // Last: from here on the records keep ids_ current, and a constructor that threw before
  // this left them nothing to update (no destructor runs to detach it).
  tag_ = records_->attach(&ids_);
}

// A score outside every one-value bucket while the edges follow levels: remembered, and the
// next search refits the edges (at most nbuckets_ / 2 levels; past that, quantiles).
void LrfuIndex::note_level(unsigned b, double s) noexcept {
  if (levels_.empty() || one_value_[b]) return;
  const auto at = std::lower_bound(levels_.begin(), levels_.end(), s);
  if (at != levels_.end() && *at == s) return;  // noted already; the refit is pending
  if (2 * levels_.size() + 3 <= nbuckets_) {
    levels_.insert(at, s);  // within its reserved capacity
  } else {
    // More levels than buckets (a small alpha takes hundreds of accesses to reach 1.0): the
    // edges are quantiles from the next refit on, for good, so that levels do not keep
    // switching the mode and refitting.
    levels_.clear();
    levels_off_ = true;
  }
  levels_dirty_ = true;
}

void LrfuIndex::push_entry(unsigned b, const Entry &e) {
  // In recency order an entry no earlier than its bucket's newest joins the queue (an admission
  // nearly always does: not one of a step a search has sorted already that comes before the
  // step's last entry); the rest, and every entry in score order, go to the heap.
  if (score_order_ || !queues_[b].push(e)) heaps_[b].push(e);
  // A new root has the lowest t (recency order) or s (score order): only then is roots_[b] read.
  const bool lower = e.s < min_score_[b];
  if (lower) {
    min_score_[b] = e.s;
    drop_kept_bound(b);  // its bound used the old lowest score
  }
  if (roots_[b].empty || (score_order_ ? e.s <= roots_[b].s : e.t <= roots_[b].t)) {
    refresh_root(b);  // and its group
  } else if (lower) {
    // Only the bucket's share of its group's lowest score can change, and only down (its root
    // stays, so the group is not empty): a min, as refresh_root's, not a pass over the group.
    Group &g = groups_[b / kGroupBuckets];
    const double low = group_score(b);
    if (low < g.s) {
      g.s = low;
      g.bound_kept = false;
    }
  }
  ++total_entries_;
}

void LrfuIndex::reserve_ids(size_t n) {
  if (n <= reserved_ids_) return;
  if (n > ids_.size()) records_->resize(n, PerId{0, kNoBucket, 0});  // the first of the sharing tiers
  live_.reserve(n);
  live_keys_.reserve(n);
  pending_.reserve(n);
  reserved_ids_ = n;
}

void LrfuIndex::plan_ids(size_t n) {
  records_->reserve(n);
  live_.reserve(n);
  live_keys_.reserve(n);
  pending_.reserve(n);
}

bool LrfuIndex::evicts_before(double pa, uint64_t ta, double sa, const Key &ka, double pb, uint64_t tb, double sb,
                              const Key &kb) const noexcept {
  if (pa != pb) return pa > pb;
  const Less less = tie_break();
  return less(Entry{ta, sa, ka, 0, 0}, Entry{tb, sb, kb, 0, 0});
}

void LrfuIndex::insert(NodeId id, const Key &key, const PolicyState &st) noexcept {
  cxlt_assert(id < ids_.size());
  cxlt_assert(ids_[id].bucket == kNoBucket);  // live in no tier's index
  cxlt_assert(!lrfu_stamp::pending(ids_.stamp(id)));
  const uint32_t w = ids_.stamp(id) + lrfu_stamp::kVersionStep;
  ids_.set_stamp(id, w);
  const uint32_t v = lrfu_stamp::version(w);
  ids_[id].owner = tag_;
  unsigned b = bucket_of(st.score);
  note_level(b, st.score);
  set_state(id, st);
  ids_[id].bucket = b;
  // Part-way through upkeep's rebuild (the mover's, with the lock handed over: a migration
  // worker finishing a move inserts here): while it places live_ by position, the block joins
  // the unplaced end and is placed with the rest; once it orders the heaps, the block gets its
  // entry now, in a heap ordered already (a push) or in one still to order (appended).
  const bool placing = rebuilding_ && place_at_ < live_.size();
  ids_[id].live_pos = static_cast<uint32_t>(live_.size());
  live_.push_back(id);
  live_keys_.push_back(key);  // within the capacity reserve_ids gave it
  if (placing) return;
  const Entry e{st.last_access, st.score, key, id, v};
  ++live_in_bucket_[b];
  if (rebuilding_) {
    place_at_ = live_.size();
    if (b < order_at_) {
      push_entry(b, e);
      ++rebuilt_entries_;
    } else if (score_order_ || !queues_[b].push(e)) {
      heaps_[b].push_unordered(e);  // order_heaps orders and counts it
    }
    return;
  }
  push_entry(b, e);
  maybe_compact();
}

void LrfuIndex::erase(NodeId id, EraseReason) noexcept {
  cxlt_assert(id < ids_.size() && ids_[id].bucket != kNoBucket && ids_[id].owner == tag_);
  // A new version, and not pending: its place in pending_ is skipped, its entry (if it has
  // one) is stale.
  ids_.set_stamp(id, (ids_.stamp(id) & ~lrfu_stamp::kPending) + lrfu_stamp::kVersionStep);
  uint32_t pos = ids_[id].live_pos;
  // Part-way through upkeep's rebuild, while it places live_ by position (a migration worker
  // finishing a move erases here): live_[0, place_at_) stays the placed blocks. A placed block
  // is counted in its bucket already; the last placed block takes its place, and the
  // position it leaves is filled from the back as below, with an unplaced block.
  const bool placing = rebuilding_ && place_at_ < live_.size();
  const bool placed = !placing || pos < place_at_;
  if (placed) --live_in_bucket_[ids_[id].bucket];
  ids_[id].bucket = kNoBucket;
  if (placing && placed) {
    const uint32_t q = static_cast<uint32_t>(place_at_ - 1);
    const NodeId moved = live_[q];
    live_[pos] = moved;
    live_keys_[pos] = live_keys_[q];
    ids_[moved].live_pos = pos;
    pos = q;
    --place_at_;
  }
  NodeId last = live_.back();
  live_[pos] = last;
  live_keys_[pos] = live_keys_[live_.size() - 1];
  ids_[last].live_pos = pos;
  live_.pop_back();
  live_keys_.pop_back();
  if (place_at_ > live_.size()) place_at_ = live_.size();  // the ordering part: every block placed
}

// The split access (eviction.hpp): access_own (lrfu_index.hpp) is access() without the list and
// the bounds.
void LrfuIndex::prepare_access_own(size_t n) noexcept {
  // At most one new place per live id in a round (no erase runs inside it).
  n = std::min(n, live_.size());
  if (pending_.size() + n > pending_.capacity() && !pending_.empty()) flush_pending();
}

void LrfuIndex::note_pending(NodeId id) noexcept {
  // prepare_access_own made room; were the list full all the same, a flush gives every block
  // pending so far its entry, and this one joins the list after it.
  if (pending_.size() == pending_.capacity() && !pending_.empty()) flush_pending();
  // Level 2: in a runtime the record is not otherwise read here (the drain writes stamps only).
  cxlt_assert_internal(ids_[id].owner == tag_);
  if (!lrfu_stamp::pending(ids_.stamp(id))) return;  // a rebuild in that flush placed it
  pending_.push_back(id);
}

void LrfuIndex::note_pending_bound(double s, uint64_t t) noexcept {
  pending_min_s_ = std::min(pending_min_s_, s);
  pending_min_t_ = std::min(pending_min_t_, t);
}

void LrfuIndex::flush_pending() {
  finish_rebuild();  // upkeep's, if one is part-way: its pending list is the one to flush
  if (pending_.empty()) return;
  // Most blocks pending (every resident block accessed since the last search, as in a decode
  // step that touches all of them): one O(n) rebuild of every heap, which also drops the stale
  // entries the accesses left, costs less than a push each and a compaction later.
  if (2 * pending_.size() >= live_.size()) {
    ++rebuilds_since_edges_;  // a compaction too: the edges move as maybe_compact() would move them
    rebuild(edges_due(), true);
    return;
  }
  size_t pushed = 0;
  for (NodeId id : pending_) pushed += index_pending(id) ? 1 : 0;
  clear_pending();
  maybe_compact(pushed);
}

bool LrfuIndex::index_pending(NodeId id) {
  PerId &r = ids_[id];
  // Erased since, or placed again by a rebuild; or erased, and pending in another tier's
  // index now (the records are shared).
  const uint32_t w = ids_.stamp(id);
  if (!lrfu_stamp::pending(w) || r.owner != tag_) return false;
  ids_.set_stamp(id, w & ~lrfu_stamp::kPending);
  const double s = ids_.s(id);
  const unsigned b = bucket_of(s);
  note_level(b, s);
  --live_in_bucket_[r.bucket];
  ++live_in_bucket_[b];
  r.bucket = b;
  push_entry(b, Entry{ids_.t(id), s, live_keys_[r.live_pos], id, lrfu_stamp::version(w)});
  return true;
}

void LrfuIndex::clear_pending() noexcept {
  pending_.clear();
  pending_min_s_ = std::numeric_limits<double>::infinity();
  pending_min_t_ = std::numeric_limits<uint64_t>::max();
}

void LrfuIndex::maybe_compact(size_t ops) {
  // Stale entries may outnumber live ones by a constant factor before an O(n) rebuild, so the
  // rebuild costs O(1) amortized per update. The edges move when the live scores crowd into a
  // few buckets (edges that no longer fit the score distribution), checked at every fourth
  // such rebuild and once per max(4096, live/2) updates, so that too is O(1) amortized.
  const uint64_t before = ops_since_rebuild_;
  ops_since_rebuild_ += ops;
  if (total_entries_ > 2 * live_.size() + 64) {
    ++rebuilds_since_edges_;
    rebuild(edges_due());
    return;
  }
  // Where upkeep() runs, it moves the edges instead, in pieces.
  if (nbuckets_ > 1 && !upkeep_refits() && (before >> 12) != (ops_since_rebuild_ >> 12) && ops_since_rebuild_ >= live_.size() / 2 &&
      buckets_lopsided())
    rebuild(true);
}

// Whether a compaction moves the edges: at the first one (the uniform starting edges fit no
// real scores, and until the edges are fitted once no score level is noted), then at every
// fourth one while the buckets are lopsided.
bool LrfuIndex::edges_due() const noexcept {
  if (nbuckets_ <= 1) return false;
  return stats_.edge_moves == 0 || (rebuilds_since_edges_ >= 4 && buckets_lopsided());
}

// The edges no longer fit the scores: one bucket of a range of scores holds over 4x its share of
// the live blocks in such buckets. Never while each level has a bucket of its own: a crowded
// level is one value, which no refit would split (new levels refit through note_level). For the
// same reason the buckets of one value are not counted, neither as the fullest nor in the
// shares: they keep their saturated blocks, which may be most of the live ones.
bool LrfuIndex::buckets_lopsided() const noexcept {
  if (!levels_.empty()) return false;
  uint32_t fullest = 0;
  size_t in_ranges = 0;
  unsigned ranges = 0;
  for (unsigned b = 0; b < nbuckets_; ++b) {
    if (one_value_[b]) continue;
    fullest = std::max(fullest, live_in_bucket_[b]);
    in_ranges += live_in_bucket_[b];
    ++ranges;
  }
  return ranges != 0 && fullest > 4 * in_ranges / ranges + 64;
}

void LrfuIndex::rebuild(bool move_edges, bool replace) {
  cxlt_assert_internal(!rebuilding_);  // every caller completed upkeep's first
  if (move_edges || replace) {
    begin_replace(move_edges);
    place_live(live_.size());
    order_heaps(std::numeric_limits<size_t>::max(), true);
    end_rebuild();
    return;
  }
  // A compaction: the queues' entries join their heaps, whose order order_heaps restores in
  // O(n) over all of a bucket's entries (dropping the stale ones); the queues then take the
  // admissions that follow.
  examined_since_rebuild_ = 0;
  for (unsigned b = 0; b < nbuckets_; ++b) {
    Queue &q = queues_[b];
    for (size_t i = q.head(); i < q.end(); ++i) heaps_[b].push_unordered(q[i]);
    q.clear();
  }
  rebuilding_ = true;
  place_at_ = live_.size();  // nothing to place: every entry stays where it is
  order_at_ = 0;
  rebuilt_entries_ = 0;
  order_heaps(std::numeric_limits<size_t>::max(), false);
  end_rebuild();
}

void LrfuIndex::move_edges_to_live_scores() {
  // Quantiles of a deterministic sample of live scores: 16 a bucket, at least 16,384 (64 a
  // bucket at the default 256). The sort is the costly part of a rebuild that moves the edges
  // (65,536 scores took most of the time at 64K resident); more samples would not move the
  // edges by more than a bucket's share.
  std::vector<double> sample;
  const size_t want = std::max<size_t>(16384, size_t{16} * nbuckets_);
  size_t stride = std::max<size_t>(1, live_.size() / want);
  sample.reserve(live_.size() / stride + 1);
  // The buckets hold the blocks that are not saturated: their scores place the edges.
  for (size_t i = 0; i < live_.size(); i += stride)
    if (!saturated_at(ids_.t(live_[i]), sat_now_)) sample.push_back(ids_.s(live_[i]));
  std::sort(sample.begin(), sample.end());
  // Few distinct scores (an access without attention counts 1.0, so scores are the levels
  // 1 - (1-alpha)^k): each gets a bucket of its own, [v, next representable). A bucket that
  // held two levels bounded the higher level's blocks by the lower one, and a search walked
  // them (seen at alpha 0.5, where 0.875 and 0.9375 shared one). The levels are those of the
  // sample and every level seen since (note_level), which a sample of the live blocks misses
  // when its blocks are the ones evicted first.
  std::vector<double> levels;
  levels.reserve(nbuckets_);
  std::set_union(sample.begin(), sample.end(), levels_.begin(), levels_.end(), std::back_inserter(levels));
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  levels_.clear();
  const bool use_levels = !levels_off_ && !levels.empty() && 2 * levels.size() + 1 <= nbuckets_;
  if (use_levels || !sample.empty()) {
    std::vector<double> e;
    e.reserve(nbuckets_ + kEdgeWindow);  // room for pad_edges() below
    e.push_back(0.0);
    if (use_levels) {
      for (double v : levels) {
        if (v > e.back()) e.push_back(v);
        e.push_back(std::nextafter(v, 2.0));
      }
      levels_.assign(levels.begin(), levels.end());
    } else {
      const size_t share = std::max<size_t>(1, sample.size() / nbuckets_);
      for (unsigned k = 1; k < nbuckets_; ++k) {
        double q = sample[k * sample.size() / nbuckets_];
        if (q > e.back()) {
          e.push_back(q);
          // A value shared by at least a bucket's share of the sample gets a bucket of its own,
          // [q, next representable), so that a bucket's lowest score bounds its other blocks
          // tightly. Only then: a one-value bucket for every quantile of scores that rarely
          // repeat would spend two edges a quantile, leaving the upper half of the scores in
          // the last bucket.
          const auto run = std::equal_range(sample.begin(), sample.end(), q);
          if (static_cast<size_t>(run.second - run.first) >= share && e.size() < nbuckets_)
            e.push_back(std::nextafter(q, 2.0));
        }
      }
    }
    while (e.size() > nbuckets_) e.pop_back();
    // Fewer distinct quantiles than buckets: the unused buckets get +inf edges and stay empty;
    // the last used bucket runs to +inf.
    while (e.size() < nbuckets_ + 1) e.push_back(std::numeric_limits<double>::infinity());
    edges_ = std::move(e);
    pad_edges();
    refresh_bucket_hints();
    ++stats_.edge_moves;
  }
  rebuilds_since_edges_ = 0;
}

void LrfuIndex::begin_replace(bool move_edges) {
  examined_since_rebuild_ = 0;
  if (move_edges) move_edges_to_live_scores();
  // Every live block goes to its (new) bucket or the saturated heap, pending ones included;
  // stale entries are dropped. The pending list starts afresh here, not after the last block
  // is placed: a block accessed between two of upkeep's pieces after it was placed has a stale
  // entry and must stay listed, and one accessed before it is placed is placed as it is then
  // (its listing, if it got one, is skipped by flush_pending: its pending bit is clear).
  for (Heap &h : heaps_) h.clear();
  for (Queue &q : queues_) q.clear();
  std::fill(live_in_bucket_.begin(), live_in_bucket_.end(), 0);
  clear_pending();
  rebuilding_ = true;
  place_at_ = 0;
  order_at_ = 0;
  rebuilt_entries_ = 0;
}

void LrfuIndex::place_live(size_t budget) {
  const size_t end = live_.size() - place_at_ <= budget ? live_.size() : place_at_ + budget;
  // Each block's state and stamp are at a random place (its store line, in a runtime): fetched
  // kAhead blocks early, which took a third off the placement at 620K live blocks.
  constexpr size_t kAhead = 16;
  for (size_t i = place_at_; i < end; ++i) {
    if (i + kAhead < live_.size()) {
      const NodeId ahead = live_[i + kAhead];
      __builtin_prefetch(ids_.states + size_t{ahead} * ids_.stride, 1);
      __builtin_prefetch(&ids_.stamps[size_t{ahead} << ids_.stamp_shift], 1);
      __builtin_prefetch(&ids_[ahead], 1);
    }
    const NodeId id = live_[i];
    const double s = ids_.s(id);
    const uint64_t t = ids_.t(id);
    const unsigned own = bucket_of(s);
    const unsigned b = !one_value_[own] && saturated_at(t, sat_now_) ? sat_index() : own;
    const uint32_t w = ids_.stamp(id);
    if (b != sat_index() && lrfu_stamp::pending(w)) note_level(b, s);  // as flush_pending() would
    ids_[id].bucket = b;
    ids_.set_stamp(id, w & ~lrfu_stamp::kPending);
    ++live_in_bucket_[b];
    // In recency order an entry no earlier than the last in its bucket's queue joins the
    // queue, unsorted: after a step that accessed every block (an engine's decode step) nearly
    // all do, and a queue orders a step's entries only when a search reaches them, where a
    // heap would be ordered whole below.
    const Entry e{t, s, live_keys_[i], id, lrfu_stamp::version(w)};
    if (score_order_ || b == sat_index() || !queues_[b].push(e)) heaps_[b].push_unordered(e);
  }
  place_at_ = end;
}

bool LrfuIndex::order_heaps(size_t budget, bool all_current) {
  // Placed entries were of their block's current version when placed (all_current): no stale
  // check. Some may be stale since, accessed between two pieces; a search drops those as any.
  size_t done = 0;
  while (order_at_ < heaps_.size() && done < budget) {
    const unsigned b = order_at_++;
    Heap &h = heaps_[b];
    if (all_current)
      h.compact([](const Entry &) { return true; });
    else
      h.compact([this](const Entry &e) { return !stale(e); });
    done += h.size() + (b < nbuckets_ ? queues_[b].size() : 0);
    rebuilt_entries_ += h.size();
    if (b == sat_index()) break;  // the saturated heap's bounds are its entries' own priorities
    double m = 2.0;
    for (size_t i = 0; i < h.size(); ++i) m = std::min(m, h[i].s);
    if (!score_order_) {
      const Queue &q = queues_[b];
      rebuilt_entries_ += q.size();
      for (size_t i = q.head(); i < q.end(); ++i) m = std::min(m, q[i].s);
    }
    min_score_[b] = m;
    set_root(b);  // each group once, in end_rebuild, rather than once a bucket
  }
  return order_at_ == heaps_.size();
}

void LrfuIndex::end_rebuild() {
  cxlt_assert_internal(rebuilding_ && place_at_ >= live_.size() && order_at_ == heaps_.size());
  total_entries_ = rebuilt_entries_;
  for (unsigned g = 0; g < groups_.size(); ++g) refresh_group(g);
  ops_since_rebuild_ = 0;
  ++stats_.compactions;
  rebuilding_ = false;
}

bool LrfuIndex::upkeep(size_t budget) noexcept {
  upkept_ = true;
  budget = std::max<size_t>(budget, 1);  // every call makes progress
  if (!rebuilding_) {
    if (live_.empty() || live_.size() < upkeep_min_live_) return false;
    // A search would rebuild (its rule: 7/8 of the live blocks pending), or an insert or a
    // flush would (maybe_compact's rules: stale entries twice the live ones, or the edges no
    // longer fitting the scores after live/2 updates, begun earlier here, at one and a half and
    // at live/4, so that they come here first). Not at flush_pending's rule (half pending, when
    // a search needs the pending blocks): begun there, the rebuilds of a tier whose blocks an
    // engine touches at random came twice as often, and so did the steps that waited for a
    // piece (the median step 1.2x-1.3x longer), for no shorter stall.
    const bool most_pending = 8 * pending_.size() >= 7 * live_.size();
    const bool stale_many = total_entries_ > live_.size() + live_.size() / 2 + 64;
    const bool lopsided = nbuckets_ > 1 && ops_since_rebuild_ >= live_.size() / 4 && buckets_lopsided();
    // And a search's refit for new score levels (search_indexed's rule, begun at live/32).
    const bool levels = levels_dirty_ && ops_since_rebuild_ >= live_.size() / 32;
    // The pending blocks are not pushed here a piece at a time: that work, which a search
    // needs rarely, made the steps wait more often (the 99th percentile 1.2x-1.5x longer).
    if (!most_pending && !stale_many && !lopsided && !levels) return false;
    if (levels) {
      levels_dirty_ = false;
      ++stats_.level_refits;
    } else {
      ++rebuilds_since_edges_;
    }
    begin_replace(levels || lopsided || edges_due());
    ++stats_.upkeep_rebuilds;
  }
  if (place_at_ < live_.size()) {
    place_live(budget);
    return true;
  }
  if (!order_heaps(budget, true)) return true;
  end_rebuild();
  return false;
}

}  // namespace cxltier
