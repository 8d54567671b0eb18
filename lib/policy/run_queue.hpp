// SPDX-License-Identifier: Apache-2.0
// A queue of entries that arrive step by step, for the LRFU index's buckets: beside a bucket's
// heap, it takes the entries that come no earlier than the last one it holds (an admission is
// the newest block of its bucket), and keeps them in the heap's order at the cost of one sort
// per step's worth of entries instead of a sift-down per removal.
//
// Entries carry a step `t`, and the order Less compares t first (the LRFU index's recency
// order). The queue is v[head, end): steps never decrease along it. Its front part
// v[head, sorted_end) is in Less order; past it, each step's entries wait unsorted, and a step
// past sorted_end is later than every step before it. sort_run() orders the next step when a
// reader reaches it. So a reader that walks the queue from the front sees it in Less order, and
// everything from position i on is no earlier than v[i] in that order (as a heap's subtree is
// no earlier than its root): the victim search bounds it the same way.
//
// An entry that comes earlier than the last one, or of the last one's step but before it in
// order once that step is sorted, is refused: the caller puts it in the heap.
#pragma once

#include "lib/core/assert.hpp"

#include "lib/core/pod_vector.hpp"

#include <algorithm>
#include <cstddef>

namespace cxltier {

template <typename Entry, typename Less>
class RunQueue {
public:
  explicit RunQueue(Less less = Less{}) : less_(less) {}

  bool empty() const noexcept { return head_ == v_.size(); }
  size_t size() const noexcept { return v_.size() - head_; }
  size_t head() const noexcept { return head_; }
  size_t end() const noexcept { return v_.size(); }
  size_t sorted_end() const noexcept { return sorted_end_; }
  const Entry &operator[](size_t i) const noexcept { return v_[i]; }
  // The first entry in order (after sort_front()).
  const Entry &front() const noexcept { return v_[head_]; }

  // Appends e when it keeps the order above; false (and nothing changed) when it does not. May
  // allocate when the queue outgrows every size it had before.
  bool push(const Entry &e) {
    if (empty()) {
      clear();
      v_.push_back(e);
      return true;
    }
    const Entry &last = v_.back();
    if (e.t < last.t) return false;
    if (e.t == last.t && sorted_end_ == v_.size()) {
      // The last step is sorted already: e may only extend it at its end.
      if (less_(e, last)) return false;
      v_.push_back(e);
      ++sorted_end_;
      return true;
    }
    v_.push_back(e);
    return true;
  }

  // Sorts the step that starts at i, which must be sorted_end(): the entries from i on that
  // share v[i]'s step.
  void sort_run(size_t i) noexcept {
    size_t run_end = i + 1;
    while (run_end < v_.size() && v_[run_end].t == v_[i].t) ++run_end;
    std::sort(v_.begin() + static_cast<std::ptrdiff_t>(i), v_.begin() + static_cast<std::ptrdiff_t>(run_end), less_);
    sorted_end_ = run_end;
  }
  // Makes front() the first entry in order.
  void sort_front() noexcept {
    if (!empty() && head_ == sorted_end_) sort_run(head_);
  }

  // Drops front() (sorted first). The consumed part is reclaimed once it is half the array, so
  // positions change only here and in clear().
  void pop_front() noexcept {
    cxlt_assert_internal(head_ < sorted_end_);
    ++head_;
    if (empty()) {
      clear();
    } else if (head_ >= kReclaim && 2 * head_ >= v_.size()) {
      v_.erase_front(head_);
      sorted_end_ -= head_;
      head_ = 0;
    }
  }

  void clear() noexcept {
    v_.clear();
    head_ = sorted_end_ = 0;
  }

  // The order above, checked entry by entry (for the index's validate()).
  bool is_ordered() const noexcept {
    if (head_ > sorted_end_ || sorted_end_ > v_.size()) return false;
    for (size_t i = head_ + 1; i < v_.size(); ++i) {
      if (v_[i].t < v_[i - 1].t) return false;
      if (i < sorted_end_ && less_(v_[i], v_[i - 1])) return false;
      if (i == sorted_end_ && v_[i].t == v_[i - 1].t) return false;
    }
    return true;
  }

private:
  static constexpr size_t kReclaim = 4096;
  PodVector<Entry> v_;  // as LazyHeap's (lazy_heap.hpp)
  size_t head_ = 0;
  size_t sorted_end_ = 0;
  Less less_;
};

}  // namespace cxltier
