// SPDX-License-Identifier: Apache-2.0
// Baseline eviction policies behind the EvictionPolicy contract, for comparison in replay and
// as runtime options: LRU, FIFO, LFU (ties by recency), Belady's OPT (offline) and ARC
// (Megiddo and Modha, FAST 2003, as published).
//
// LRU, FIFO, LFU and OPT share one shape: a lazy min-heap keyed by what the policy orders by
// (updates push a fresh entry and leave the old one stale), so that a block moved into a lower
// tier with an old recency lands at its true place in that tier's order, not at the front. In
// the common case (the touched block becomes the newest) a push costs O(1): such entries go to a
// sorted queue beside the heap, so that dropping them when stale costs O(1) too.
#include "lib/policy/eviction.hpp"
#include "lib/policy/lazy_heap.hpp"
#include "lib/policy/lrfu_index.hpp"

#include "lib/core/assert.hpp"

#include <cxltier/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

namespace cxltier {

namespace {

// --- Lazy-heap policies -------------------------------------------------------------------
// Order key: (k1, k2) ascending, evicted first. Tie-breaks are stated per policy.
struct KeyedEntry {
  uint64_t k1;
  uint64_t k2;
  NodeId id;
  uint32_t version;
};
struct KeyedLess {
  bool operator()(const KeyedEntry &a, const KeyedEntry &b) const noexcept {
    if (a.k1 != b.k1) return a.k1 < b.k1;
    if (a.k2 != b.k2) return a.k2 < b.k2;
    return a.id < b.id;
  }
};

class KeyedPolicy : public EvictionPolicy {
public:
  void reserve_ids(size_t n) override {
    if (n <= version_.size()) return;
    version_.resize(n, 0);
    live_.resize(n, 0);
    k1_.resize(n, 0);
    k2_.resize(n, 0);
  }
  void plan_ids(size_t n) override {
    version_.reserve(n);
    live_.reserve(n);
    k1_.reserve(n);
    k2_.reserve(n);
  }
  size_t bytes_per_id() const noexcept override {
    return sizeof(version_[0]) + sizeof(live_[0]) + sizeof(k1_[0]) + sizeof(k2_[0]);
  }
  void insert(NodeId id, const Key &, const PolicyState &st) noexcept override {
    cxlt_assert(id < live_.size() && !live_[id]);
    live_[id] = 1;
    ++size_;
    push(id, st, true);
  }
  void erase(NodeId id, EraseReason) noexcept override {
    cxlt_assert(id < live_.size() && live_[id]);
    live_[id] = 0;
    ++version_[id];
    --size_;
  }
  void access(NodeId id, const PolicyState &st) noexcept override {
    cxlt_assert(id < live_.size() && live_[id]);
    push(id, st, false);
  }
  NodeId victim(uint64_t, Eligible eligible) noexcept override {
    drop_stale_fronts();
    const KeyedEntry *best = front();
    if (best == nullptr) return kNoNode;
    if (eligible(best->id)) {
      // The entry behind a queue front is next in line (Eligible::warm); a heap's is not known
      // without a search.
      if (qhead_ + 1 < queue_.size() && best == &queue_[qhead_]) eligible.warm(queue_[qhead_ + 1].id);
      return best->id;
    }
    // Some blocks are pinned: walk both orders best-first, merged, until an eligible one. The
    // queue is sorted, so it is read in place; the heap is walked as a tree with a small
    // best-first frontier.
    KeyedLess less;
    auto cmp = [&](uint32_t a, uint32_t b) { return less(heap_[b], heap_[a]); };
    walk_.clear();
    if (!heap_.empty()) walk_.push_back(0);
    size_t j = qhead_;
    while (!walk_.empty() || j < queue_.size()) {
      const bool from_queue = walk_.empty() || (j < queue_.size() && less(queue_[j], heap_[walk_.front()]));
      if (from_queue) {
        const KeyedEntry &e = queue_[j++];
        if (!stale(e) && eligible(e.id)) return e.id;
        continue;
      }
      std::pop_heap(walk_.begin(), walk_.end(), cmp);
      uint32_t i = walk_.back();
      walk_.pop_back();
      const KeyedEntry &e = heap_[i];
      if (!stale(e) && eligible(e.id)) return e.id;
      for (uint32_t c = 2 * i + 1; c <= 2 * i + 2 && c < heap_.size(); ++c) {
        walk_.push_back(c);
        std::push_heap(walk_.begin(), walk_.end(), cmp);
      }
    }
    return kNoNode;
  }
  size_t size() const noexcept override { return size_; }
  std::string validate() const override {
    std::ostringstream err;
    if (!heap_.is_heap()) err << name() << ": heap order violated; ";
    KeyedLess less;
    for (size_t i = qhead_ + 1; i < queue_.size(); ++i)
      if (less(queue_[i], queue_[i - 1])) {
        err << name() << ": queue out of order at " << i << "; ";
        break;
      }
    size_t live_entries = 0;
    for (size_t i = 0; i < heap_.size(); ++i)
      if (!stale(heap_[i])) ++live_entries;
    for (size_t i = qhead_; i < queue_.size(); ++i)
      if (!stale(queue_[i])) ++live_entries;
    if (live_entries != size_) err << name() << ": " << live_entries << " live entries for " << size_ << " blocks; ";
    return err.str();
  }

protected:
  // The policy's order key for a block in state st (insert: just became resident here).
  virtual void keys(NodeId id, const PolicyState &st, bool inserting, uint64_t &k1, uint64_t &k2) noexcept = 0;
  // Whether an access changes the order at all (FIFO: no).
  virtual bool access_reorders() const noexcept { return true; }

  void push(NodeId id, const PolicyState &st, bool inserting) noexcept {
    if (!inserting && !access_reorders()) return;
    uint64_t k1 = 0, k2 = 0;
    keys(id, st, inserting, k1, k2);
    uint32_t v = ++version_[id];
    k1_[id] = k1;
    k2_[id] = k2;
    const KeyedEntry e{k1, k2, id, v};
    // An entry that sorts at or after the newest queued one joins the queue in O(1): under LRU
    // and FIFO that is nearly every push. Only the others (a block demoted with an old
    // recency, LFU counts) pay a heap sift.
    if (queue_.size() == qhead_ || !KeyedLess{}(e, queue_.back()))
      queue_.push_back(e);
    else
      heap_.push(e);
    if (heap_.size() + queue_.size() - qhead_ > 2 * size_ + 4096) compact();
  }
  bool stale(const KeyedEntry &e) const noexcept { return e.version != version_[e.id] || !live_[e.id]; }

  // Stale entries at the fronts go first, so that front() is a live block (or there is none).
  void drop_stale_fronts() noexcept {
    while (qhead_ < queue_.size() && stale(queue_[qhead_])) ++qhead_;
    if (qhead_ == queue_.size()) {
      queue_.clear();
      qhead_ = 0;
    } else if (qhead_ >= 4096 && 2 * qhead_ >= queue_.size()) {
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(qhead_));
      qhead_ = 0;
    }
    while (!heap_.empty() && stale(heap_.top())) heap_.pop();
  }
  // The least entry of the two orders, or null when both are empty.
  const KeyedEntry *front() const noexcept {
    const KeyedEntry *q = qhead_ < queue_.size() ? &queue_[qhead_] : nullptr;
    if (heap_.empty()) return q;
    if (q == nullptr || KeyedLess{}(heap_.top(), *q)) return &heap_.top();
    return q;
  }
  // Drop every stale entry from both orders; the queue keeps its order, the heap is rebuilt.
  void compact() noexcept {
    size_t w = 0;
    for (size_t r = qhead_; r < queue_.size(); ++r)
      if (!stale(queue_[r])) queue_[w++] = queue_[r];
    queue_.resize(w);
    qhead_ = 0;
    heap_.compact([this](const KeyedEntry &x) { return !stale(x); });
  }

  // Two orders whose union holds every live block's current entry (and stale ones): a queue of
  // entries pushed in non-decreasing key order, read from qhead_, and a lazy heap for the rest.
  std::vector<KeyedEntry> queue_;
  size_t qhead_ = 0;
  LazyHeap<KeyedEntry, KeyedLess> heap_;
  std::vector<uint32_t> version_;
  std::vector<uint8_t> live_;
  std::vector<uint64_t> k1_, k2_;
  std::vector<uint32_t> walk_;
  size_t size_ = 0;
};

// LRU: least recent reference first (the reference tick orders references within a step).
class LruPolicy final : public KeyedPolicy {
public:
  const char *name() const noexcept override { return "lru"; }

protected:
  void keys(NodeId, const PolicyState &st, bool, uint64_t &k1, uint64_t &k2) noexcept override {
    k1 = st.tick;
    k2 = 0;
  }
};

// FIFO: first in, first out, by the order blocks entered this tier; references do not reorder.
class FifoPolicy final : public KeyedPolicy {
public:
  const char *name() const noexcept override { return "fifo"; }

protected:
  void keys(NodeId, const PolicyState &, bool, uint64_t &k1, uint64_t &k2) noexcept override {
    k1 = ++arrivals_;
    k2 = 0;
  }
  bool access_reorders() const noexcept override { return false; }

private:
  uint64_t arrivals_ = 0;
};

// LFU: fewest accesses first; ties by recency (least recently referenced first).
class LfuPolicy final : public KeyedPolicy {
public:
  const char *name() const noexcept override { return "lfu"; }

protected:
  void keys(NodeId, const PolicyState &st, bool, uint64_t &k1, uint64_t &k2) noexcept override {
    k1 = st.accesses;
    k2 = st.tick;
  }
};

// OPT (Belady): the block referenced farthest in the future first (never again: first of all,
// ties by older reference). The caller (offline replay) supplies each block's next use.
class OptPolicy final : public KeyedPolicy {
public:
  const char *name() const noexcept override { return "opt"; }
  void reserve_ids(size_t n) override {
    KeyedPolicy::reserve_ids(n);
    if (n > next_.size()) next_.resize(n, std::numeric_limits<uint64_t>::max());
  }
  void plan_ids(size_t n) override {
    KeyedPolicy::plan_ids(n);
    next_.reserve(n);
  }
  size_t bytes_per_id() const noexcept override { return KeyedPolicy::bytes_per_id() + sizeof(next_[0]); }
  void set_next_use(NodeId id, uint64_t next) noexcept override { next_[id] = next; }
  // The incoming block goes when its next use is farther than the victim's, or when neither is
  // used again.
  bool bypass(NodeId id, uint64_t now, Eligible eligible) noexcept override {
    const NodeId v = victim(now, eligible);
    if (v == kNoNode) return false;
    constexpr uint64_t never = std::numeric_limits<uint64_t>::max();
    return next_[id] > next_[v] || (next_[id] == never && next_[v] == never);
  }

protected:
  void keys(NodeId id, const PolicyState &st, bool, uint64_t &k1, uint64_t &k2) noexcept override {
    k1 = std::numeric_limits<uint64_t>::max() - next_[id];
    k2 = st.tick;
  }

private:
  std::vector<uint64_t> next_;
};

// --- ARC --------------------------------------------------------------------------------------
// ARC as published (Megiddo and Modha, "ARC: A Self-Tuning, Low Overhead Replacement Cache",
// FAST 2003, Fig. 4), mapped onto the contract:
//   before_admit(x) runs the miss cases II, III and IV (adapting p, trimming the ghost lists
//   B1/B2) and remembers what REPLACE must do; victim() is REPLACE (or, in case IV-A with B1
//   empty, the LRU page of T1, which leaves without a ghost); erase(evicted) moves the victim
//   to the MRU end of its ghost list; insert(x) puts x at the MRU end of T2 after a ghost hit,
//   of T1 otherwise. A hit (access) moves x to the MRU end of T2.
// Deviations, only where the runtime does what the paper's cache cannot: pinned blocks are
// skipped by REPLACE (the next block from the LRU end of the same list); blocks moved in from
// another tier (no before_admit) enter T1; a block released by the engine leaves without a
// ghost. With none of these (single-tier replay), the behaviour is the paper's.
class ArcPolicy final : public EvictionPolicy {
public:
  explicit ArcPolicy(uint64_t c) : c_(static_cast<double>(c)) {
    if (c == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "ARC needs a capacity in blocks > 0");
  }
  const char *name() const noexcept override { return "arc"; }
  void reserve_ids(size_t n) override {
    if (n <= list_.size()) return;
    list_.resize(n, kNone);
    prev_.resize(n, kNoNode);
    next_.resize(n, kNoNode);
  }
  void plan_ids(size_t n) override {
    list_.reserve(n);
    prev_.reserve(n);
    next_.reserve(n);
  }
  size_t bytes_per_id() const noexcept override { return sizeof(list_[0]) + sizeof(prev_[0]) + sizeof(next_[0]); }
  void before_admit(NodeId x, const Key &) noexcept override {
    pending_ = Pending{};
    pending_.id = x;
    const double b1 = static_cast<double>(len_[kB1]), b2 = static_cast<double>(len_[kB2]);
    if (list_[x] == kB1) {  // Case II
      p_ = std::min(c_, p_ + std::max(b1 >= b2 ? 1.0 : b2 / b1, 1.0));
      unlink(x);
      pending_.ghost_hit = true;
      pending_.replace = true;
    } else if (list_[x] == kB2) {  // Case III
      p_ = std::max(0.0, p_ - std::max(b2 >= b1 ? 1.0 : b1 / b2, 1.0));
      unlink(x);
      pending_.ghost_hit = true;
      pending_.in_b2 = true;
      pending_.replace = true;
    } else {  // Case IV
      const double t1 = static_cast<double>(len_[kT1]), t2 = static_cast<double>(len_[kT2]);
      if (t1 + b1 == c_) {  // Case A
        if (t1 < c_) {
          drop_lru(kB1);
          pending_.replace = true;
        } else {
          pending_.evict_t1_no_ghost = true;
        }
      } else if (t1 + t2 + b1 + b2 >= c_) {  // Case B
        if (t1 + t2 + b1 + b2 >= 2 * c_) drop_lru(kB2);
        pending_.replace = true;
      }
    }
  }
  NodeId victim(uint64_t, Eligible eligible) noexcept override {
    if (pending_.evict_t1_no_ghost) {
      NodeId v = lru_eligible(kT1, eligible);
      if (v != kNoNode) {
        no_ghost_ = v;
        return v;
      }
    }
    // REPLACE(x, p)
    const double t1 = static_cast<double>(len_[kT1]);
    bool from_t1 = len_[kT1] >= 1 && ((pending_.in_b2 && t1 == p_) || t1 > p_);
    NodeId v = lru_eligible(from_t1 ? kT1 : kT2, eligible);
    if (v == kNoNode) v = lru_eligible(from_t1 ? kT2 : kT1, eligible);
    return v;
  }
  void erase(NodeId id, EraseReason why) noexcept override {
    uint8_t l = list_[id];
    cxlt_assert(l == kT1 || l == kT2);
    unlink(id);
    if (why == EraseReason::evicted && id != no_ghost_) push_mru(l == kT1 ? kB1 : kB2, id);
    if (id == no_ghost_) no_ghost_ = kNoNode;
  }
  void insert(NodeId id, const Key &, const PolicyState &) noexcept override {
    if (list_[id] == kB1 || list_[id] == kB2) unlink(id);  // moved in while a ghost here
    bool to_t2 = pending_.id == id && pending_.ghost_hit;
    push_mru(to_t2 ? kT2 : kT1, id);
    pending_ = Pending{};
  }
  void access(NodeId id, const PolicyState &) noexcept override {
    cxlt_assert(list_[id] == kT1 || list_[id] == kT2);
    unlink(id);
    push_mru(kT2, id);
  }
  void forget(NodeId id) noexcept override {
    if (id < list_.size() && (list_[id] == kB1 || list_[id] == kB2)) unlink(id);
  }
  size_t size() const noexcept override { return len_[kT1] + len_[kT2]; }
  std::string validate() const override {
    std::ostringstream err;
    for (uint8_t l = 0; l < 4; ++l) {
      size_t n = 0;
      NodeId prev = kNoNode;
      for (NodeId i = head_[l]; i != kNoNode; i = next_[i]) {
        if (list_[i] != l) err << "arc: id " << i << " in list " << int(l) << " tagged " << int(list_[i]) << "; ";
        if (prev_[i] != prev) err << "arc: broken back link at " << i << "; ";
        prev = i;
        if (++n > list_.size()) { err << "arc: cycle; "; break; }
      }
      if (n != len_[l]) err << "arc: list " << int(l) << " has " << n << " entries, length says " << len_[l] << "; ";
    }
    if (static_cast<double>(len_[kT1] + len_[kB1]) > c_ + 0.5 && pending_.id == kNoNode)
      err << "arc: |T1|+|B1| exceeds c; ";
    if (p_ < 0 || p_ > c_) err << "arc: p out of [0, c]; ";
    return err.str();
  }
  double target_p() const noexcept { return p_; }

private:
  enum : uint8_t { kT1 = 0, kT2 = 1, kB1 = 2, kB2 = 3, kNone = 255 };
  struct Pending {
    NodeId id = kNoNode;
    bool ghost_hit = false;
    bool in_b2 = false;
    bool replace = false;
    bool evict_t1_no_ghost = false;
  };
  // Lists run from head (LRU) to tail (MRU).
  void push_mru(uint8_t l, NodeId id) noexcept {
    list_[id] = l;
    prev_[id] = tail_[l];
    next_[id] = kNoNode;
    if (tail_[l] != kNoNode) next_[tail_[l]] = id; else head_[l] = id;
    tail_[l] = id;
    ++len_[l];
  }
  void unlink(NodeId id) noexcept {
    uint8_t l = list_[id];
    if (prev_[id] != kNoNode) next_[prev_[id]] = next_[id]; else head_[l] = next_[id];
    if (next_[id] != kNoNode) prev_[next_[id]] = prev_[id]; else tail_[l] = prev_[id];
    prev_[id] = next_[id] = kNoNode;
    list_[id] = kNone;
    --len_[l];
  }
  void drop_lru(uint8_t l) noexcept {
    if (head_[l] != kNoNode) unlink(head_[l]);
  }
  NodeId lru_eligible(uint8_t l, Eligible eligible) const noexcept {
    for (NodeId i = head_[l]; i != kNoNode; i = next_[i])
      if (eligible(i)) {
        if (next_[i] != kNoNode) eligible.warm(next_[i]);  // next in line (Eligible::warm)
        return i;
      }
    return kNoNode;
  }

  double c_;
  double p_ = 0;
  std::vector<uint8_t> list_;
  std::vector<NodeId> prev_, next_;
  NodeId head_[4] = {kNoNode, kNoNode, kNoNode, kNoNode};
  NodeId tail_[4] = {kNoNode, kNoNode, kNoNode, kNoNode};
  size_t len_[4] = {0, 0, 0, 0};
  Pending pending_;
  NodeId no_ghost_ = kNoNode;
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_policy(const PolicyConfig &cfg) {
  switch (cfg.kind) {
    case PolicyKind::lrfu: {
      auto p = std::make_unique<LrfuIndex>(cfg.lrfu, cfg.index_buckets, cfg.audit, cfg.lrfu_records);
      p->set_huge_pages(cfg.huge_pages);
      return p;
    }
    case PolicyKind::lru: return std::make_unique<LruPolicy>();
    case PolicyKind::fifo: return std::make_unique<FifoPolicy>();
    case PolicyKind::lfu: return std::make_unique<LfuPolicy>();
    case PolicyKind::opt: return std::make_unique<OptPolicy>();
    case PolicyKind::arc: return std::make_unique<ArcPolicy>(cfg.capacity_blocks);
  }
  fail(CXLT_ERROR_INVALID_ARGUMENT, "unknown policy kind");
}

}  // namespace cxltier
