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
constexpr uint32_t kNoBucket = 0xffffffffu;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// Relative slack on bounds that compare blocks of different idle times: exp/expm1/pow are not
// guaranteed monotone to the last bit, so a bound computed at a different point could be a
// few ULPs (1e-16 relative) below a true priority. 1e-12 covers that with room to spare and
// costs nothing but the occasional extra visit.
constexpr double kBoundSlack = 1e-12;

bool is_pow2(unsigned v) { return v != 0 && (v & (v - 1)) == 0; }

// The highest of the bounds offered, whose it was, and the next highest: a search takes the
// best of a set of buckets or groups and puts the rest back bounded by the runner-up.
struct TopTwo {
  unsigned top = kNoBucket;
  double top_bound = kNegInf, next_bound = kNegInf;
  void offer(unsigned i, double bound) noexcept {
    if (top == kNoBucket || bound > top_bound) {
      if (top != kNoBucket) next_bound = top_bound;
      top = i;
      top_bound = bound;
    } else if (bound > next_bound) {
      next_bound = bound;
    }
  }
};
}  // namespace

LrfuIndex::LrfuIndex(const LrfuParams &params, unsigned buckets, bool audit)
    : params_(params),
      nbuckets_(buckets),
      score_order_(params.mode == ScoreMode::touch && params.beta == 0.0),
      audit_(audit) {
  params_.validate();
  if (!is_pow2(nbuckets_) || nbuckets_ > 65536)
    fail(CXLT_ERROR_INVALID_ARGUMENT, "policy.index_buckets = ", buckets, " must be a power of two in [1, 65536]");
  heaps_.reserve(nbuckets_ + 1);
  levels_.reserve(nbuckets_ / 2);
  stale_seen_.reserve(4096);  // stale entries removed per search at most (more wait for the next one)
  for (unsigned b = 0; b < nbuckets_; ++b) heaps_.emplace_back(tie_break());
  heaps_.emplace_back(Less{Order::saturated});
  groups_.assign((nbuckets_ + kGroupBuckets - 1) / kGroupBuckets, Group{0, 0.0, true});
  deferred_.reserve(groups_.size() + 64);
  roots_.assign(nbuckets_, Root{0, 0.0, true});
  live_in_bucket_.assign(nbuckets_ + 1, 0);
  min_score_.assign(nbuckets_ + 1, 2.0);
  edges_.resize(nbuckets_ + 1);
  for (unsigned b = 0; b < nbuckets_; ++b) edges_[b] = static_cast<double>(b) / static_cast<double>(nbuckets_);
  edges_[nbuckets_] = std::numeric_limits<double>::infinity();
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
  heaps_[b].push(e);
  // A new root has the lowest t (recency order) or s (score order): only then is roots_[b] read.
  const bool lower = e.s < min_score_[b];
  if (lower) {
    min_score_[b] = e.s;
    roots_[b].bound_kept = false;  // its bound used the old lowest score
  }
  if (roots_[b].empty || (score_order_ ? e.s <= roots_[b].s : e.t <= roots_[b].t)) {
    refresh_root(b);  // and its group
  } else if (lower) {
    refresh_group(b / kGroupBuckets);
  }
  ++total_entries_;
}

void LrfuIndex::reserve_ids(size_t n) {
  if (n <= ids_.size()) return;
  ids_.resize(n, PerId{0.0, 0, 0, kNoBucket, 0, 0});
  keys_.resize(n);
  live_.reserve(n);
  pending_.reserve(n);
}

void LrfuIndex::plan_ids(size_t n) {
  ids_.reserve(n);
  keys_.reserve(n);
  live_.reserve(n);
  pending_.reserve(n);
}

// Identical, bit for bit, to lrfu_priority(s, d, params_): the tables hold the values of the
// same expressions (see the constructor), and the arithmetic after them is the same.
inline double LrfuIndex::prio_d(double s, uint64_t d) const noexcept {
  double se = s;
  if (params_.mode == ScoreMode::decay && d != 0)
    se = s * (d < decay_table_.size() ? decay_table_[d] : std::pow(1.0 - params_.alpha, static_cast<double>(d)));
  if (params_.beta == 0.0) return 1.0 - se;
  if (d >= recency_table_.size()) return (1.0 - se) * (recency_saturated_ ? 1.0 : lrfu_recency_decay(d, params_.beta));
  return (1.0 - se) * recency_table_[d];
}

double LrfuIndex::prio(double s, uint64_t t, uint64_t now) const noexcept { return prio_d(s, now >= t ? now - t : 0); }

// Upper bound on the priority of blocks in `bucket` whose last access is after step t.
double LrfuIndex::newer_bound(unsigned bucket, uint64_t t, uint64_t now) const noexcept {
  if (t >= now) return kNegInf;  // nothing can be newer than the current step
  const uint64_t d = now - t - 1;
  double p = prio_d(std::max(bucket_low(bucket), min_score_[bucket]), d);
  if (d <= exact_bound_steps_) return p;  // monotone there: exact (see the constructor)
  return p > 0.0 ? p * (1.0 + kBoundSlack) : p;
}

bool LrfuIndex::evicts_before(double pa, uint64_t ta, double sa, const Key &ka, double pb, uint64_t tb, double sb,
                              const Key &kb) const noexcept {
  if (pa != pb) return pa > pb;
  const Less less = tie_break();
  return less(Entry{ta, sa, ka, 0, 0}, Entry{tb, sb, kb, 0, 0});
}

void LrfuIndex::insert(NodeId id, const Key &key, const PolicyState &st) noexcept {
  cxlt_assert(id < ids_.size());
  cxlt_assert(ids_[id].bucket == kNoBucket);
  uint32_t v = ++ids_[id].version;
  unsigned b = bucket_of(st.score);
  note_level(b, st.score);
  ids_[id].s = st.score;
  ids_[id].t = st.last_access;
  keys_[id] = key;
  ids_[id].bucket = b;
  ids_[id].live_pos = static_cast<uint32_t>(live_.size());
  live_.push_back(id);
  push_entry(b, Entry{st.last_access, st.score, key, id, v});
  ++live_in_bucket_[b];
  maybe_compact();
}

void LrfuIndex::erase(NodeId id, EraseReason) noexcept {
  cxlt_assert(id < ids_.size() && ids_[id].bucket != kNoBucket);
  ++ids_[id].version;
  ids_[id].pending = 0;  // its place in pending_ is skipped
  --live_in_bucket_[ids_[id].bucket];
  ids_[id].bucket = kNoBucket;
  uint32_t pos = ids_[id].live_pos;
  NodeId last = live_.back();
  live_[pos] = last;
  ids_[last].live_pos = pos;
  live_.pop_back();
}

void LrfuIndex::access(NodeId id, const PolicyState &st) noexcept {
  cxlt_assert(id < ids_.size() && ids_[id].bucket != kNoBucket);
  PerId &r = ids_[id];
  // One place per id within the capacity reserve_ids/plan_ids gave the list; an id erased and
  // accessed again before a search takes a second one, and a full list is flushed rather than
  // grown. The flush comes first: a rebuild gives every live block an entry of its current
  // version (this one's too) and ends pending, so this access then stales that entry, joins
  // the list afresh and sets the bounds the flush cleared.
  if (r.pending == 0 && pending_.size() == pending_.capacity() && !pending_.empty()) flush_pending();
  ++r.version;  // its entry is stale from here; flush_pending() gives it a new one
  r.s = st.score;
  r.t = st.last_access;
  pending_min_s_ = std::min(pending_min_s_, st.score);
  pending_min_t_ = std::min(pending_min_t_, st.last_access);
  if (r.pending == 0) {
    r.pending = 1;
    pending_.push_back(id);
  }
}

// The split access (eviction.hpp): access_own is access() without the list and the bounds.
void LrfuIndex::prepare_access_own(size_t n) noexcept {
  // At most one new place per live id in a round (no erase runs inside it).
  n = std::min(n, live_.size());
  if (pending_.size() + n > pending_.capacity() && !pending_.empty()) flush_pending();
}

bool LrfuIndex::access_own(NodeId id, const PolicyState &st) noexcept {
  cxlt_assert(id < ids_.size() && ids_[id].bucket != kNoBucket);
  PerId &r = ids_[id];
  ++r.version;
  r.s = st.score;
  r.t = st.last_access;
  if (r.pending != 0) return false;
  r.pending = 1;
  return true;
}

void LrfuIndex::note_pending(NodeId id) noexcept {
  // prepare_access_own made room; were the list full all the same, a flush gives every block
  // pending so far its entry, and this one joins the list after it.
  if (pending_.size() == pending_.capacity() && !pending_.empty()) flush_pending();
  if (ids_[id].pending == 0) return;  // a rebuild in that flush placed it
  pending_.push_back(id);
}

void LrfuIndex::note_pending_bound(double s, uint64_t t) noexcept {
  pending_min_s_ = std::min(pending_min_s_, s);
  pending_min_t_ = std::min(pending_min_t_, t);
}

void LrfuIndex::flush_pending() {
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
  for (NodeId id : pending_) {
    PerId &r = ids_[id];
    if (r.pending == 0) continue;  // erased since, or placed again by a rebuild
    r.pending = 0;
    const unsigned b = bucket_of(r.s);
    note_level(b, r.s);
    --live_in_bucket_[r.bucket];
    ++live_in_bucket_[b];
    r.bucket = b;
    push_entry(b, Entry{r.t, r.s, keys_[id], id, r.version});
    ++pushed;
  }
  clear_pending();
  maybe_compact(pushed);
}

void LrfuIndex::clear_pending() noexcept {
  pending_.clear();
  pending_min_s_ = std::numeric_limits<double>::infinity();
  pending_min_t_ = std::numeric_limits<uint64_t>::max();
}

void LrfuIndex::prefetch(NodeId id) const noexcept {
  if (id >= ids_.size()) return;
  __builtin_prefetch(&ids_[id], 1);
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
  if (nbuckets_ > 1 && (before >> 12) != (ops_since_rebuild_ >> 12) && ops_since_rebuild_ >= live_.size() / 2 &&
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

// The edges no longer fit the scores: one bucket holds over 4x its share of the live blocks.
// Never while each level has a bucket of its own: a crowded level is one value, which no
// refit would split (new levels refit through note_level).
bool LrfuIndex::buckets_lopsided() const noexcept {
  if (!levels_.empty()) return false;
  const uint32_t fullest = *std::max_element(live_in_bucket_.begin(), live_in_bucket_.begin() + nbuckets_);
  const size_t in_buckets = live_.size() - live_in_bucket_[sat_index()];
  return fullest > 4 * in_buckets / nbuckets_ + 64;
}

void LrfuIndex::rebuild(bool move_edges, bool replace) {
  examined_since_rebuild_ = 0;
  if (move_edges) {
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
      if (!saturated_at(ids_[live_[i]].t, sat_now_)) sample.push_back(ids_[live_[i]].s);
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
      e.reserve(nbuckets_ + 1);
      e.push_back(0.0);
      if (use_levels) {
        for (double v : levels) {
          if (v > e.back()) e.push_back(v);
          e.push_back(std::nextafter(v, 2.0));
        }
        levels_.assign(levels.begin(), levels.end());
      } else {
        for (unsigned k = 1; k < nbuckets_; ++k) {
          double q = sample[k * sample.size() / nbuckets_];
          if (q > e.back()) {
            // A value shared by many blocks gets a bucket of its own: [q, next representable).
            e.push_back(q);
            if (e.size() < nbuckets_) e.push_back(std::nextafter(q, 2.0));
          }
        }
      }
      while (e.size() > nbuckets_) e.pop_back();
      // Fewer distinct quantiles than buckets: the unused buckets get +inf edges and stay empty;
      // the last used bucket runs to +inf.
      while (e.size() < nbuckets_ + 1) e.push_back(std::numeric_limits<double>::infinity());
      edges_ = std::move(e);
      refresh_bucket_hints();
      ++stats_.edge_moves;
    }
    rebuilds_since_edges_ = 0;
  }
  if (move_edges || replace) {
    // Every live block goes to its (new) bucket or the saturated heap, pending ones included;
    // stale entries are dropped.
    for (Heap &h : heaps_) h.clear();
    std::fill(live_in_bucket_.begin(), live_in_bucket_.end(), 0);
    for (NodeId id : live_) {
      const unsigned b = saturated_at(ids_[id].t, sat_now_) ? sat_index() : bucket_of(ids_[id].s);
      if (b != sat_index() && ids_[id].pending) note_level(b, ids_[id].s);  // as flush_pending() would
      ids_[id].bucket = b;
      ids_[id].pending = 0;
      ++live_in_bucket_[b];
      heaps_[b].push_unordered(Entry{ids_[id].t, ids_[id].s, keys_[id], id, ids_[id].version});
    }
    clear_pending();
  }
  total_entries_ = 0;
  for (unsigned b = 0; b < heaps_.size(); ++b) {
    Heap &h = heaps_[b];
    h.compact([this](const Entry &e) { return !stale(e); });
    total_entries_ += h.size();
    if (b == sat_index()) break;  // the saturated heap's bounds are its entries' own priorities
    double m = 2.0;
    for (size_t i = 0; i < h.size(); ++i) m = std::min(m, h[i].s);
    min_score_[b] = m;
    refresh_root(b);
  }
  ops_since_rebuild_ = 0;
  ++stats_.compactions;
}

void LrfuIndex::push_candidate(const Candidate &c) {
  cand_.push_back(c);
  std::push_heap(cand_.begin(), cand_.end(), CandidateLess{});
}

LrfuIndex::Candidate LrfuIndex::pop_candidate() noexcept {
  std::pop_heap(cand_.begin(), cand_.end(), CandidateLess{});
  Candidate c = cand_.back();
  cand_.pop_back();
  return c;
}

void LrfuIndex::take_roots(unsigned b, uint64_t now) {
  Heap &h = heaps_[b];
  while (!h.empty()) {
    const Entry &r = h.top();
    if (stale(r)) {
      h.pop();
      --total_entries_;
    } else if (saturated_at(r.t, now)) {
      sat_pending_.push_back(r);
      h.pop();
      --live_in_bucket_[b];
    } else {
      break;
    }
  }
  refresh_root(b);
}

// An upper bound on every block in bucket b: its scores are >= the bucket's lowest, its last
// accesses no older than its root's.
double LrfuIndex::bucket_bound(unsigned b, uint64_t now) const noexcept {
  if (score_order_) return prio_d(roots_[b].s, 0);
  const uint64_t d = now > roots_[b].t ? now - roots_[b].t : 0;
  const double p = prio_d(std::max(bucket_low(b), min_score_[b]), d);
  if (d <= exact_bound_steps_) return p;
  return p > 0.0 ? p * (1.0 + kBoundSlack) : p;
}

LrfuIndex::Group LrfuIndex::group_of_buckets(unsigned g) const noexcept {
  Group r{std::numeric_limits<uint64_t>::max(), std::numeric_limits<double>::infinity(), true};
  const unsigned end = std::min(nbuckets_, (g + 1) * kGroupBuckets);
  for (unsigned b = g * kGroupBuckets; b < end; ++b) {
    if (roots_[b].empty) continue;
    r.empty = false;
    r.t = std::min(r.t, roots_[b].t);
    r.s = std::min(r.s, score_order_ ? roots_[b].s : std::max(bucket_low(b), min_score_[b]));
  }
  return r;
}

// An upper bound on every block in group g: every bucket_bound() of its buckets is computed at
// a score no lower and idle steps no more than these (priority is monotone; the slack as there).
double LrfuIndex::group_bound(unsigned g, uint64_t now) const noexcept {
  const Group &gr = groups_[g];
  if (score_order_) return prio_d(gr.s, 0);
  const uint64_t d = now > gr.t ? now - gr.t : 0;
  const double p = prio_d(gr.s, d);
  if (d <= exact_bound_steps_) return p;
  return p > 0.0 ? p * (1.0 + kBoundSlack) : p;
}

// Upper bound on the priority of every pending block: priority is monotone (higher with more
// idle steps, lower with a higher score), so the oldest access and the lowest score among
// them bound it; exact where the tables are monotone, with the slack of newer_bound past them.
double LrfuIndex::pending_bound(uint64_t now) const noexcept {
  const uint64_t d = now > pending_min_t_ ? now - pending_min_t_ : 0;
  const double p = prio_d(pending_min_s_, d);
  if (d <= exact_bound_steps_) return p;
  return p > 0.0 ? p * (1.0 + kBoundSlack) : p;
}

// The victim among the indexed blocks; the pending ones (accessed since they were last
// indexed) are indexed first only when their bound could match it: they were accessed
// recently, so in a search for the block that has waited longest they rarely can, and then
// they stay pending (an access that is never needed by a search costs no heap work at all).
NodeId LrfuIndex::search(uint64_t now, Eligible eligible) noexcept {
  // The bound is taken first: a rebuild during the search indexes the pending blocks, and then
  // the search may have chosen before they were in the heaps.
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
  // even when levels keep coming.
  if (levels_dirty_ && ops_since_rebuild_ >= live_.size() / 16) {
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
    uint32_t all = 0;
    for (unsigned g = 0; g < groups_.size(); ++g)
      if (!groups_[g].empty) all |= 1u << g;
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
  auto consider = [&](const Candidate &c, bool descend = false) {
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
      if (best_group.top == kNoBucket) continue;
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
      const unsigned end = std::min(nbuckets_, c.bucket() + kGroupBuckets);
      TopTwo best_bucket;
      uint32_t rest = 0;
      for (unsigned b = c.bucket(); b < end; ++b) {
        const uint32_t bit = 1u << (b - c.bucket());
        if ((c.index & bit) == 0 || roots_[b].empty) continue;
        rest |= bit;
        best_bucket.offer(b, kept_bucket_bound(b, now));
      }
      if (best_bucket.top == kNoBucket) continue;
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
      const Heap &h = heaps_[c.bucket()];
      if (h.empty()) continue;
      const Entry &r = h.top();
      consider(Candidate::make(std::max(prio(r.s, r.t, now), score_order_ ? kNegInf : newer_bound(c.bucket(), r.t, now)),
                               c.bucket(), 0, kEntry),
               true);
      continue;
    }
    const Heap &h = heaps_[c.bucket()];
    const Entry &e = h[c.index];
    if (have_best) {
      if (c.bound < best_p) break;  // every remaining bound is <= this one
      if (c.bound == best_p) {
        // A tie at the bound can only matter if some block below could come first in order.
        bool best_first = (c.kind() == kEntryDominated) ? best.t <= e.t : less(best, e);
        if (best_first) continue;
      }
    }
    ++stats_.entries_examined;
    ++examined;
    if (stale(e)) {
      if (stale_seen_.size() < stale_seen_.capacity())  // no allocation here: the rest wait for the next search
        stale_seen_.push_back(StaleAt{c.bucket(), c.index, e.id, e.version});
    }
    // covers: every block below e that e's order puts after it (its step's, or all of them in
    // score order) cannot come first. True when a live, eligible block of e's step was
    // evaluated above; when e, live or stale, does not beat the best block (what comes after e
    // and is no higher in priority does not beat it either); or when e becomes the best. So
    // eligibility, a read of the caller's state, is asked only of a block that would win.
    bool covers = (c.kind() == kEntryDominated);
    if (!covers && !stale(e)) {
      const bool was_best = have_best && best.id == e.id && best.version == e.version;
      covers = offer(e, prio(e.s, e.t, now));
      if (!was_best && have_best && best.id == e.id && best.version == e.version) {
        best_heap = c.bucket();
        best_at = c.index;
      }
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
  // its eligibility then: a state line that is seldom cached, as the blocks waited longest.
  if (best_heap != kNoBucket) {
    const Heap &h = heaps_[best_heap];
    if (best_at < h.size() && h[best_at].id == best.id && h[best_at].version == best.version)
      for (size_t ch = 2 * size_t{best_at} + 1; ch <= 2 * size_t{best_at} + 2 && ch < h.size(); ++ch)
        eligible.warm(h[ch].id);
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
