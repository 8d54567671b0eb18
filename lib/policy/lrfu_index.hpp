// SPDX-License-Identifier: Apache-2.0
// The exact LRFU eviction index, and the brute-force auditor it is checked against.
//
// The decision: among resident, eligible blocks, evict the one with the highest
// lrfu_priority(score, now - last_access); ties go to the block that comes first in the
// mode's order:
//   recency order (beta > 0, or decay mode): older last access, then lower score, then the
//       smaller key;
//   score order (touch mode with beta = 0, where priority = 1 - score): lower score, then older
//       last access, then the smaller key.
//
// Why not a heap of priorities: priorities decay with time at different rates (the order of
// two blocks flips as `now` advances), so any structure keyed on a priority computed at some
// earlier step picks the wrong victim. That was the defect that inverted an earlier simulation
// of this very policy. Instead:
//   - blocks are kept in B score buckets (bucket b holds stored scores in [edge_b, edge_b+1));
//     the edges start uniform over [0, 1] and are moved to quantiles of the live scores at
//     each rebuild, so buckets are narrow where scores crowd (real attention masses are
//     small: most scores sit below 0.01) and a value shared by many blocks gets a bucket of
//     its own;
//   - each bucket is a min-heap in the mode's order, so a node's subtree holds only blocks that
//     are no older (recency order) or no lower-scored (score order) than the node. In recency
//     order a bucket also has a queue (run_queue.hpp) for the entries that arrive no earlier
//     than its newest one, nearly every admission: read from its front it is in the same order,
//     and what follows an entry is no older than it, so a search bounds it as a heap's subtree
//     and a victim leaves its front without a sift-down (one sort per step's entries instead);
//   - priority is monotone: higher with more idle steps, lower with a higher score. So the
//     priority of any block in a subtree is bounded by the priority at (bucket's lowest score,
//     the subtree root's idle steps), and blocks of the root's own step by the root itself;
//   - victim(): best-first branch and bound over all bucket heaps, visiting subtrees in order of
//     their bound and stopping when no bound can beat the best block found. Where the recency
//     and decay tables are monotone as computed (checked at construction; the recency table
//     runs to where recency is exactly 1.0 for beta >= ~7.6e-5), the computed priority is monotone too, so bounds are exact and a subtree whose
//     bound only ties the best block is pruned by the tie-break instead of being visited (many
//     blocks of one score whose recency rounds to 1.0 tie exactly). Past the tables, bounds are
//     inflated by a relative 1e-12 so that rounding in exp/pow can never prune the true victim.
//     Every candidate is compared with the same lrfu_priority() the auditor uses.
//   - saturated blocks leave the buckets: in touch mode with beta > 0, a block idle for at
//     least sat_steps_ (where 1 - exp(-beta d) is exactly 1.0 from then on) has priority
//     exactly 1 - score, whatever its age. Such blocks all tie on recency, so a bucket that
//     mixes scores would bound each old block by the bucket's lowest score and a search would
//     visit them one by one. A search moves each bucket's saturated roots (the oldest entries)
//     into one more heap, ordered by the decision itself (priority 1 - score, then the
//     tie-break), whose top is the best saturated block. A bucket of one score keeps its
//     saturated blocks: its order is the saturated heap's among blocks of one score, and where
//     the recency table is monotone (the bounds are exact) its bound is its root's priority
//     exactly, so moving them would only cost a push and a pop of that heap. (Past an exact
//     table, a bound carries the slack, and a search would read such a bucket's tied blocks one
//     by one, as a mixed bucket's: glibc's expm1 gave monotone tables for 3,000 betas from 0.001
//     to 10.)
// Updates are lazy, in two ways. An access records the block's new state (in the array beside
// the records, or, in a runtime, where the store has written it already: lrfu_id_records.hpp),
// makes its heap entry stale (version check) and, the first time since it was last indexed,
// notes the block as pending, keeping the lowest score and oldest step of any pending block. A
// victim search searches the indexed blocks first (unless 7/8 or more of the live blocks are
// pending: then one rebuild gives them their entries before it); only when the pending blocks'
// bound (the priority at that score and step) is not below the victim found are they given
// their entries (a push each, or one rebuild when most blocks are pending) and the search run
// again. So an access is O(1) with no heap work, a block accessed many times between
// searches costs at most one entry, and recently accessed blocks, which a search for the
// longest-waiting block rarely needs, often cost none. Stale entries still bound their subtrees correctly and are dropped at
// the root and by a compaction when they outnumber the live ones; a stale entry a victim search
// visits is removed after that search (O(log n)), so no search walks it twice (one in a queue
// waits until it reaches the front, as what is before it is read first). Insert is O(1)
// amortized when the block becomes the newest (it joins the queue); victim() examines the
// blocks whose priority is within the bucket width of the victim's, typically a few dozen, plus
// the pending blocks' pushes when they are needed. A search reaches its first block without the
// candidate heap, and the group and bucket bounds it computes are kept for the other searches
// of the same step, until the record they came from changes: a replayed request evicts for
// each of its misses at one step, and most of those searches then read one entry and compute
// two bounds.
#pragma once

#include "lib/core/pod_vector.hpp"
#include "lib/policy/eviction.hpp"
#include "lib/policy/lazy_heap.hpp"
#include "lib/policy/lrfu_id_records.hpp"
#include "lib/policy/run_queue.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace cxltier {

class LrfuIndex final : public EvictionPolicy {
public:
  // `shared`: the per-id records of a runtime's other tiers (lrfu_id_records.hpp); null: its own.
  LrfuIndex(const LrfuParams &params, unsigned buckets, bool audit, std::shared_ptr<LrfuIdRecords> shared = nullptr);
  ~LrfuIndex() override { records_->detach(&ids_); }
  LrfuIndex(const LrfuIndex &) = delete;
  LrfuIndex &operator=(const LrfuIndex &) = delete;

  const char *name() const noexcept override { return "lrfu"; }
  void reserve_ids(size_t n) override;
  void plan_ids(size_t n) override;
  // Its pending list's place (reserved for every id). The live list and its keys grow with the
  // blocks live here; the records are shared (LrfuIdRecords::bytes_per_id).
  size_t bytes_per_id() const noexcept override { return sizeof(NodeId); }
  // Whether the per-id records ask for huge pages as they grow (by default they do).
  void set_huge_pages(bool on) noexcept {
    records_->set_huge_pages(on);
    live_keys_.set_huge_pages(on);
  }
  void insert(NodeId id, const Key &key, const PolicyState &st) noexcept override;
  void erase(NodeId id, EraseReason why) noexcept override;
  void access(NodeId id, const PolicyState &st) noexcept override;
  bool splits_access() const noexcept override { return true; }
  void prepare_access_own(size_t n) noexcept override;
  bool access_own(NodeId id, const PolicyState &st) noexcept override;  // inline (below), as access()
  void note_pending(NodeId id) noexcept override;
  // access_own where the owner keeps the states and stamps (external_states), called with the
  // id's stamp, which the owner has at hand (a runtime: in the store line the access writes):
  // no address to compute, and no state to copy.
  [[gnu::always_inline]] bool access_own_external([[maybe_unused]] NodeId id, uint32_t &stamp) noexcept {
    cxlt_assert_internal(id < ids_.size() && ids_[id].bucket != kNoBucket && ids_[id].owner == tag_ &&
                         ids_.own_states == nullptr && &stamp == &ids_.stamps[size_t{id} << ids_.stamp_shift]);
    const uint32_t w = stamp;
    stamp = lrfu_stamp::accessed(w);
    return !lrfu_stamp::pending(w);
  }
  // note_pending for an id whose access_own returned true, in the thread that called
  // prepare_access_own for the round, which made room: the id joins the list, no flush needed.
  void note_pending_prepared(NodeId id) noexcept {
    cxlt_assert_internal(pending_.size() < pending_.capacity() && lrfu_stamp::pending(ids_.stamp(id)));
    pending_.push_back(id);
  }
  void note_pending_bound(double s, uint64_t t) noexcept override;
  NodeId victim(uint64_t now, Eligible eligible) noexcept override;
  // The rebuild a search would make (most live blocks pending, stale entries near twice the
  // live ones, or lopsided buckets), begun early and made in pieces: `budget` live blocks
  // placed, or heaps put in order until about that many entries are (at least one heap: a
  // crowded bucket's heap is ordered in one piece), per call. Only from kUpkeepMinLive
  // live blocks on: below that a rebuild in one piece takes about a millisecond (about 70 ns
  // a live block, measured at 620K).
  bool upkeep(size_t budget) noexcept override;
  static constexpr size_t kUpkeepMinLive = size_t{1} << 14;
  // Tests: upkeep from this many live blocks on instead.
  void set_upkeep_min_live(size_t n) noexcept { upkeep_min_live_ = n; }
  // Inline (below): the record, for an insert, erase or search of the id soon (an access
  // writes the stamp only: in a runtime, in the store line its owner prefetches).
  void prefetch(NodeId id) const noexcept override;
  size_t size() const noexcept override { return live_.size(); }
  std::string validate() const override;

  // The auditor: the same decision by a full scan of every resident block.
  NodeId victim_bruteforce(uint64_t now, Eligible eligible) const noexcept;

  // True if a evicts before b (the decision order above). Public for the tests.
  bool evicts_before(double pa, uint64_t ta, double sa, const Key &ka, double pb, uint64_t tb, double sb,
                     const Key &kb) const noexcept;

  struct Stats {
    uint64_t victims = 0;           // victim() calls that found a block
    uint64_t entries_examined = 0;  // heap entries visited by victim()
    uint64_t compactions = 0;
    uint64_t search_compactions = 0;  // rebuilds because searches examined many entries
    uint64_t edge_moves = 0;
    uint64_t saturated_moves = 0;   // blocks moved from a bucket to the saturated heap
    uint64_t saturated_kept = 0;    // saturated roots a bucket of one score kept, as searches read them
    uint64_t level_refits = 0;      // edge refits for a score level not seen before
    uint64_t upkeep_rebuilds = 0;   // rebuilds upkeep() began
    uint64_t upkeep_completed = 0;  // of those, completed by another call (a search, an update)
    uint64_t audits = 0;
    uint64_t audit_disagreements = 0;  // must stay 0
  };
  const Stats &stats() const noexcept { return stats_; }
  bool score_order() const noexcept { return score_order_; }

private:
  static constexpr uint32_t kNoBucket = LrfuIdRecord::kNoBucket;  // above every bucket's number
  static constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  // Relative slack on bounds that compare blocks of different idle times: exp/expm1/pow are not
  // guaranteed monotone to the last bit, so a bound computed at a different point could be a
  // few ULPs (1e-16 relative) below a true priority. 1e-12 covers that with room to spare and
  // costs nothing but the occasional extra visit.
  static constexpr double kBoundSlack = 1e-12;
  struct Entry {
    uint64_t t;        // last access
    double s;          // stored score
    Key key;
    NodeId id;
    uint32_t version;
  };
  // recency and score: the decision's tie-break orders (see the top of this file); saturated:
  // the decision itself for blocks whose recency is exactly 1.0 (higher 1 - s first, then the
  // recency tie-break).
  enum class Order : uint8_t { recency, score, saturated };
  struct Less {
    Order order = Order::recency;
    bool operator()(const Entry &a, const Entry &b) const noexcept {
      if (order == Order::saturated) {
        const double pa = 1.0 - a.s, pb = 1.0 - b.s;
        if (pa != pb) return pa > pb;
      }
      if (order == Order::score) {
        if (a.s != b.s) return a.s < b.s;
        if (a.t != b.t) return a.t < b.t;
      } else {
        if (a.t != b.t) return a.t < b.t;
        if (a.s != b.s) return a.s < b.s;
      }
      return a.key < b.key;
    }
  };
  Less tie_break() const noexcept { return Less{score_order_ ? Order::score : Order::recency}; }
  using Heap = LazyHeap<Entry, Less>;
  // Beside each bucket's heap (recency order only): the entries that arrived in step order,
  // which leave from the front without a sift-down (run_queue.hpp).
  using Queue = RunQueue<Entry, Less>;
  // 16 bytes, written whole: the candidate heap moves them as two 8-byte words.
  enum CandidateKind : uint32_t {
    kEntry = 0,          // heap entry `index` of `bucket`
    kEntryDominated = 1, // the same, its parent of the same step and covering it (see `covers`)
    kWholeBucket = 2,    // the bucket itself, bounded from roots_ (its heap not yet read)
    kWholeGroup = 3,     // buckets from `bucket` on in `index`'s bits (a group's), not yet read
    kSomeGroups = 4,     // the groups in `index`'s bits (when there are at most 32), not yet read
    kQueueEntry = 5,     // entry `index` of `bucket`'s queue (sorted that far)
    kQueueEntryDominated = 6,  // the same, the entry before it of the same step and covering it
    kQueueRun = 7,       // the queue's entries from `index` on, whose step is not sorted yet
  };
  struct Candidate {
    double bound;
    uint32_t index;
    uint32_t bucket_kind;  // bucket << 3 | kind
    uint32_t bucket() const noexcept { return bucket_kind >> 3; }
    CandidateKind kind() const noexcept { return static_cast<CandidateKind>(bucket_kind & 7u); }
    static Candidate make(double bound, uint32_t bucket, uint32_t index, CandidateKind kind) noexcept {
      return Candidate{bound, index, bucket << 3 | kind};
    }
  };
  static_assert(sizeof(Candidate) == 16);
  struct CandidateLess {
    bool operator()(const Candidate &a, const Candidate &b) const noexcept { return a.bound < b.bound; }
  };

  unsigned bucket_of(double s) const noexcept;      // through the cell hints below
  unsigned bucket_search(double s) const noexcept;  // binary search over the edges: the reference
  // Score cells for bucket_of: 64 mantissa steps in each of the 65 binades below 2 (scores
  // under 2^-64 share the first cell, those from 2 - 2^-6 on the last); bucket_hint_[c] is the
  // bucket of cell c's lowest score.
  static constexpr unsigned kCellMantissaBits = 6, kCellExponents = 65;
  static constexpr unsigned kCells = kCellExponents << kCellMantissaBits;
  // A score's top bits (exponent, kCellMantissaBits of mantissa) at and below which it is in cell 0.
  static constexpr uint64_t kFirstCellTop = uint64_t{1023 - (kCellExponents - 1)} << kCellMantissaBits;
  static unsigned cell_of(double s) noexcept;
  static double cell_low(unsigned c) noexcept;
  void refresh_bucket_hints();  // after every change of the edges
  double bucket_low(unsigned b) const noexcept { return edges_[b]; }
  // Move the bucket edges to quantiles of the live scores and rebuild every heap (O(n log n)
  // over a sample, O(n) for the rebuild); called from maybe_compact().
  // With `replace` (or move_edges) every live block is placed again, saturated or not as of
  // sat_now_.
  void rebuild(bool move_edges, bool replace = false);
  // A rebuild that places every live block again, in three parts so that upkeep() can make it
  // in pieces: begin_replace (the edges, if they move, and empty heaps), place_live (the next
  // `budget` live blocks into their buckets, unordered), order_heaps (the next heaps into heap
  // order, about `budget` entries' worth; true when all are), then end_rebuild. Between the
  // parts rebuilding_ is set; the heaps hold only the blocks placed so far and are not in
  // order: the access calls, insert and erase keep to that (live_[0, place_at_) are the placed
  // blocks), and a search or a flush completes the rebuild first (finish_rebuild).
  void begin_replace(bool move_edges);
  void place_live(size_t budget);
  bool order_heaps(size_t budget, bool all_current);
  void end_rebuild();
  void finish_rebuild() {
    if (!rebuilding_) return;
    ++stats_.upkeep_completed;
    place_live(live_.size());
    order_heaps(std::numeric_limits<size_t>::max(), true);
    end_rebuild();
  }
  void move_edges_to_live_scores();
  bool rebuilding_ = false;
  // upkeep() has been called once: from then on, while the index holds upkeep_min_live_
  // blocks or more, the refits of the edges for lopsided buckets and new levels, which only
  // speed searches, are left to it (maybe_compact and search_indexed skip them), whether or
  // not the mover still calls it for this tier.
  bool upkept_ = false;
  bool upkeep_refits() const noexcept { return upkept_ && live_.size() >= upkeep_min_live_; }
  size_t upkeep_min_live_ = kUpkeepMinLive;
  size_t place_at_ = 0;   // the next live_ position to place
  unsigned order_at_ = 0;  // the next heap to order
  size_t rebuilt_entries_ = 0;  // entries the ordered heaps and queues hold
  // The saturated heap is heaps_[nbuckets_]; a live block there has ids_[id].bucket == nbuckets_.
  unsigned sat_index() const noexcept { return nbuckets_; }
  bool saturated_at(uint64_t t, uint64_t now) const noexcept {
    return sat_steps_ != 0 && now > t && now - t >= sat_steps_;
  }
  // Drop bucket b's stale roots and take its saturated ones into sat_pending_, then refresh
  // roots_[b]. Only while no candidate refers into bucket b's heap.
  void take_roots(unsigned b, uint64_t now);
  // Each bucket heap's root (lowest t in recency order, lowest s in score order): what a search
  // bounds a whole bucket by without reading its heap. Refreshed whenever a root may change.
  struct Root {
    uint64_t t;
    double s;
    bool empty;
  };
  void refresh_root(unsigned b) noexcept {
    const Root old = roots_[b];
    set_root(b);
    const Root &r = roots_[b];
    Group &g = groups_[b / kGroupBuckets];
    // The group's record is a minimum over its buckets. A root no later than the one it
    // replaces (in score order, no higher-scored either), or one in a bucket that was empty,
    // can only lower it: no pass over the group's buckets (a victim's successor is of the same
    // step, an admission's bucket often empty: 95 % of the refreshes in three 40-copy replays
    // with beta > 0). This relies on a bucket's lowest score and edge never rising between
    // group refreshes: only a rebuild raises them, and end_rebuild refreshes every group.
    if (!r.empty && !g.empty && (old.empty || (r.t <= old.t && (!score_order_ || r.s <= old.s)))) {
      const double low = group_score(b);
      if (old.empty || r.t < g.t || low < g.s) {
        g.t = std::min(g.t, r.t);
        g.s = std::min(g.s, low);
        g.filled = static_cast<uint16_t>(g.filled | (1u << (b % kGroupBuckets)));
        g.bound_kept = false;
      }
      return;
    }
    refresh_group(b / kGroupBuckets);
  }
  // The same without the group (a rebuild refreshes each group once, after all its buckets).
  void set_root(unsigned b) noexcept {
    const Entry *r = root_entry(b);
    roots_[b] = r == nullptr ? Root{0, 0.0, true} : Root{r->t, r->s, false};
    drop_kept_bound(b);
  }
  // The entry of bucket b with the oldest step (lowest score in score order), heap or queue;
  // null when the bucket has none.
  const Entry *root_entry(unsigned b) const noexcept {
    const Heap &h = heaps_[b];
    const Entry *r = h.empty() ? nullptr : &h.top();
    const Queue &q = queues_[b];
    if (!q.empty() && (r == nullptr || q.front().t < r->t)) r = &q.front();
    return r;
  }
  double bucket_bound(unsigned b, uint64_t now) const noexcept;
  // Bucket b's share of its group's lowest score (Group::s): its root's score in score order, else
  // the lowest score its bound uses. For a non-empty bucket.
  double group_score(unsigned b) const noexcept {
    return score_order_ ? roots_[b].s : std::max(bucket_low(b), min_score_[b]);
  }
  // A search keeps each bound it computes with the step it was computed at: a runtime evicts
  // for all the misses of a step at one `now`, and between those searches only the records the
  // victims and new entries changed are refreshed, which drops their kept bounds. Per group of
  // buckets: the step and which of its buckets' bounds are kept, in kept_bounds_; the bounds
  // themselves side by side in bucket_bounds_ (a search reads a group's 16 in two lines).
  struct KeptBounds {
    uint64_t now = 0;
    uint32_t valid = 0;  // bit i: bucket_bounds_[kGroupBuckets * g + i] is the bound at `now`
  };
  double kept_bucket_bound(unsigned b, uint64_t now) noexcept {
    KeptBounds &k = kept_bounds_[b / kGroupBuckets];
    const uint32_t bit = 1u << (b % kGroupBuckets);
    if (k.now != now) {
      k.now = now;
      k.valid = 0;
    }
    if ((k.valid & bit) == 0) {
      bucket_bounds_[b] = bucket_bound(b, now);
      k.valid |= bit;
    }
    return bucket_bounds_[b];
  }
  void drop_kept_bound(unsigned b) noexcept { kept_bounds_[b / kGroupBuckets].valid &= ~(1u << (b % kGroupBuckets)); }
  // Buckets in groups of kGroupBuckets, each bounded from the oldest root and lowest score of
  // its buckets: a search starts from the groups and reads the bucket records of a group only
  // when its bound can win, so it computes about B / 16 + 16 bounds instead of B.
  static constexpr unsigned kGroupBuckets = 16;
  struct Group {
    uint64_t t;  // oldest root t of its non-empty buckets (recency order)
    double s;    // lowest score a bucket bound uses (score order: lowest root s)
    bool empty;
    uint16_t filled = 0;  // bit i: bucket kGroupBuckets * g + i is not empty
    bool bound_kept = false;  // the group's own bound, kept as the buckets' are
    uint64_t bound_now = 0;
    double bound = 0.0;
  };
  Group group_of_buckets(unsigned g) const noexcept;
  void refresh_group(unsigned g) noexcept {
    groups_[g] = group_of_buckets(g);
    if (g < 32) filled_groups_ = groups_[g].empty ? filled_groups_ & ~(1u << g) : filled_groups_ | (1u << g);
  }
  uint32_t filled_groups_ = 0;  // bit g: group g (of the first 32) is not empty
  double group_bound(unsigned g, uint64_t now) const noexcept;
  double kept_group_bound(unsigned g, uint64_t now) noexcept {
    Group &gr = groups_[g];
    if (!gr.bound_kept || gr.bound_now != now) {
      gr.bound = group_bound(g, now);
      gr.bound_now = now;
      gr.bound_kept = true;
    }
    return gr.bound;
  }
  bool stale(const Entry &e) const noexcept { return e.version != lrfu_stamp::version(ids_.stamp(e.id)); }
  double prio(double s, uint64_t t, uint64_t now) const noexcept;
  double prio_d(double s, uint64_t d) const noexcept;
  double newer_bound(unsigned bucket, uint64_t t, uint64_t now) const noexcept;
  // The same for blocks whose last access is step t or later.
  double from_bound(unsigned bucket, uint64_t t, uint64_t now) const noexcept;
  double idle_bound(unsigned bucket, uint64_t d) const noexcept;
  double slack_bound(double s, uint64_t d) const noexcept;
  void push_entry(unsigned b, const Entry &e);
  void push_candidate(Candidate c);
  Candidate pop_candidate() noexcept;
  void maybe_compact(size_t ops = 1);
  // Give every pending block its entry (when a search needs them, or the list is full).
  void flush_pending();
  // A listed block's entry (flush_pending's push); false for a place to skip.
  bool index_pending(NodeId id);
  void clear_pending() noexcept;
  double pending_bound(uint64_t now) const noexcept;
  NodeId search_indexed(uint64_t now, Eligible eligible, double *best_priority) noexcept;
  bool buckets_lopsided() const noexcept;
  bool edges_due() const noexcept;
  NodeId search(uint64_t now, Eligible eligible) noexcept;

  LrfuParams params_;
  unsigned nbuckets_;
  bool score_order_;
  bool audit_;
  // Idle steps from which recency is exactly 1.0 (touch mode, beta > 0, table saturated); 0:
  // no saturated heap.
  uint64_t sat_steps_ = 0;
  // The step of the latest search: the saturated heap holds blocks saturated at this step.
  uint64_t sat_now_ = 0;
  std::vector<Heap> heaps_;  // nbuckets_ bucket heaps, then the saturated heap
  std::vector<Queue> queues_;  // per bucket; empty in score order
  std::vector<Root> roots_;  // per bucket heap
  std::vector<KeptBounds> kept_bounds_;  // per group
  std::vector<double> bucket_bounds_;    // per bucket
  std::vector<Group> groups_;  // per kGroupBuckets buckets
  std::vector<Entry> sat_pending_;  // saturated roots a search took, pushed to the saturated heap after it
  std::vector<uint32_t> live_in_bucket_;  // per heap: the buckets, then the saturated heap
  // Lowest stored score of any entry (live or stale) in each bucket since its last compaction:
  // a tighter lower bound than the bucket's edge when a bucket holds few distinct scores (with
  // attention 1.0 every score is one of the levels 1-(1-alpha)^k).
  std::vector<double> min_score_;
  std::vector<double> edges_;      // nbuckets_ + 1 ascending lower edges; edges_[nbuckets_] = +inf
  // Past edges_[nbuckets_], kEdgeWindow - 1 more +inf edges, so that bucket_of may read a whole
  // window of kEdgeWindow edges from any bucket on.
  static constexpr unsigned kEdgeWindow = 16;
  void pad_edges() { edges_.resize(nbuckets_ + kEdgeWindow, std::numeric_limits<double>::infinity()); }
  std::vector<uint16_t> bucket_hint_;  // kCells entries (8 KiB)
  std::vector<uint8_t> one_value_;     // per bucket: its edges admit one score, [v, next double)
  // While the edges give each score level a bucket of its own (few distinct scores): the
  // levels, ascending, and whether a score outside them was seen since the last refit.
  std::vector<double> levels_;
  bool levels_dirty_ = false;
  bool levels_off_ = false;  // more levels than buckets were seen: quantile edges from then on
  void note_level(unsigned b, double s) noexcept;
  uint64_t rebuilds_since_edges_ = 0;
  uint64_t ops_since_rebuild_ = 0;
  // f(d) = 1 - exp(-beta d) and (1-alpha)^d for small d, computed with the very expressions
  // of lrfu_priority() so that prio() is bit-identical to it (the auditor checks).
  std::vector<double> recency_table_;
  std::vector<double> decay_table_;
  // Bounds at idle steps up to this many are exact (the tables are monotone up to there); past
  // it they carry a relative slack (exp/pow need not be monotone to the last bit).
  size_t exact_bound_steps_ = 0;
  bool recency_saturated_ = false;  // the recency table ends at 1.0: recency past it is 1.0
  size_t total_entries_ = 0;
  size_t examined_since_rebuild_ = 0;  // entries victim searches examined since the last rebuild

  // The per-id records (lrfu_id_records.hpp), shared with the other tiers' indexes of a
  // runtime or this index's own. The key, needed only when an entry is made and by the
  // auditor, is in live_keys_ at the same place as the id in live_: kept for the live blocks
  // only, not for every id.
  using PerId = LrfuIdRecord;
  std::shared_ptr<LrfuIdRecords> records_;
  LrfuIdView ids_;        // records_'s array, kept current by it (attach)
  uint16_t tag_ = 0;      // this index's owner tag in the records (set once, by attach)
  size_t reserved_ids_ = 0;  // reserve_ids() made room in this index's lists for ids below this
  std::vector<NodeId> live_;
  PodVector<Key> live_keys_;  // the key of live_[i] at i
  const Key &key_of(NodeId id) const noexcept { return live_keys_[ids_[id].live_pos]; }
  // An insert's or access's state, where the records keep the states (else their owner wrote
  // it already: ids_.s(id) == st.score and ids_.t(id) == st.last_access).
  void set_state(NodeId id, const PolicyState &st) noexcept {
    if (ids_.own_states != nullptr) ids_.own_states[id] = LrfuStateAt{st.score, st.last_access};
    cxlt_assert_internal(ids_.s(id) == st.score && ids_.t(id) == st.last_access);
  }
  std::vector<NodeId> pending_;  // live blocks accessed since they were last indexed, each once
  // The lowest score and oldest access any pending block had since the list was last emptied.
  double pending_min_s_ = std::numeric_limits<double>::infinity();
  uint64_t pending_min_t_ = std::numeric_limits<uint64_t>::max();

  std::vector<Candidate> cand_;  // scratch for victim(), keeps its capacity
  std::vector<Candidate> deferred_;  // candidates made before victim() found a block (scratch)
  // Stale entries a search visited (bucket, index, and what was there), removed after it.
  struct StaleAt {
    uint32_t bucket;
    uint32_t index;
    NodeId id;
    uint32_t version;
  };
  std::vector<StaleAt> stale_seen_;
  void remove_stale_seen() noexcept;
  Stats stats_;
};

// Identical, bit for bit, to lrfu_priority(s, d, params_): the tables hold the values of the
// same expressions (see the constructor), and the arithmetic after them is the same. Inline:
// a search computes one for every bound it reads.
inline double LrfuIndex::prio_d(double s, uint64_t d) const noexcept {
  double se = s;
  if (params_.mode == ScoreMode::decay && d != 0)
    se = s * (d < decay_table_.size() ? decay_table_[d] : std::pow(1.0 - params_.alpha, static_cast<double>(d)));
  if (params_.beta == 0.0) return 1.0 - se;
  if (d >= recency_table_.size()) return (1.0 - se) * (recency_saturated_ ? 1.0 : lrfu_recency_decay(d, params_.beta));
  return (1.0 - se) * recency_table_[d];
}

inline double LrfuIndex::prio(double s, uint64_t t, uint64_t now) const noexcept { return prio_d(s, now >= t ? now - t : 0); }

// Inline: the runtime calls it for every access it applies by key or reference (its drains use
// the split access, access_own_external),
// through a pointer of this (final) type, so that the common case costs no call at all; only a
// full pending list calls out (flush_pending).
[[gnu::always_inline]] inline void LrfuIndex::access(NodeId id, const PolicyState &st) noexcept {
  cxlt_assert_internal(id < ids_.size() && ids_[id].bucket != kNoBucket && ids_[id].owner == tag_);
  const uint32_t w = ids_.stamp(id);
  // One place per id within the capacity reserve_ids/plan_ids gave the list; an id erased and
  // accessed again before a search takes a second one, and a full list is flushed rather than
  // grown. The flush comes first: a rebuild gives every live block an entry of its current
  // version (this one's too) and ends pending, so this access then stales that entry, joins
  // the list afresh and sets the bounds the flush cleared. A flush changes no version, and the
  // pending bit only of pending ids: w stays this id's stamp.
  if (!lrfu_stamp::pending(w) && pending_.size() == pending_.capacity() && !pending_.empty()) flush_pending();
  // Its entry is stale from here (flush_pending() gives it a new one), and it is pending.
  ids_.set_stamp(id, lrfu_stamp::accessed(w));
  set_state(id, st);
  pending_min_s_ = std::min(pending_min_s_, st.score);
  pending_min_t_ = std::min(pending_min_t_, st.last_access);
  if (!lrfu_stamp::pending(w)) pending_.push_back(id);
}

// access() without the pending list and the bounds (lrfu_index.cpp has the rest of the split
// access); a runtime's drains call access_own_external, which takes the stamp directly.
[[gnu::always_inline]] inline bool LrfuIndex::access_own(NodeId id, const PolicyState &st) noexcept {
  cxlt_assert_internal(id < ids_.size() && ids_[id].bucket != kNoBucket && ids_[id].owner == tag_);
  const uint32_t w = ids_.stamp(id);
  ids_.set_stamp(id, lrfu_stamp::accessed(w));
  set_state(id, st);
  return !lrfu_stamp::pending(w);
}

// Always inline: a plain inline call of this function, which writes no memory, can be removed
// whole as a call without effect before it is inlined (GCC 12 did, and the drain at 1M
// resident blocks lost its record prefetch: half its speed).
[[gnu::always_inline]] inline void LrfuIndex::prefetch(NodeId id) const noexcept {
  if (id < ids_.size()) __builtin_prefetch(&ids_[id], 1);
}

}  // namespace cxltier
