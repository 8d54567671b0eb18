// SPDX-License-Identifier: Apache-2.0
// A binary min-heap over a vector, with the sift operations exposed so that the policies can
// walk it as a tree (child(i) = 2i+1, 2i+2) for branch-and-bound searches. Entries carry a
// version; the owner decides staleness (lazy deletion: an updated or removed block leaves its
// old entry behind, skipped when found and dropped by pop_stale_roots() and compact()).
// The entries are in a PodVector: a bucket heap of the LRFU index that outgrows every size it
// had (edges that crowd most blocks into one bucket) grows from 1 MiB on by mremap, which moves
// its pages without copying them, and has its pages populated ahead in a few calls; a
// std::vector always copied it and faulted its new pages one by one (7-56 ms under the
// runtime's lock for heaps of 65,536-524,288 entries). Below 1 MiB a growth still copies
// (docs/runtime.md, "Placement quality").
#pragma once

#include "lib/core/pod_vector.hpp"

#include <cstddef>
#include <utility>

namespace cxltier {

template <typename Entry, typename Less>
class LazyHeap {
public:
  explicit LazyHeap(Less less = Less{}) : less_(less) {}

  size_t size() const noexcept { return h_.size(); }
  bool empty() const noexcept { return h_.empty(); }
  const Entry &operator[](size_t i) const noexcept { return h_[i]; }
  const Entry &top() const noexcept { return h_.front(); }
  void reserve(size_t n) { h_.reserve(n); }
  void clear() noexcept { h_.clear(); }

  // May allocate when the heap outgrows every size it had before (amortized, then never).
  void push(const Entry &e) {
    h_.push_back(e);
    sift_up(h_.size() - 1);
  }

  // Append without restoring the order; the caller must call compact() before using the heap.
  void push_unordered(const Entry &e) { h_.push_back(e); }

  void pop() noexcept {
    h_.front() = h_.back();
    h_.pop_back();
    if (!h_.empty()) sift_down(0);
  }

  // Remove the entry at index i in O(log n): the last entry takes its place and moves up or down
  // to where the order wants it. Entries at other indices may move (the path above i and the
  // subtree below it).
  void remove_at(size_t i) noexcept {
    h_[i] = h_.back();
    h_.pop_back();
    if (i < h_.size()) {
      sift_up(i);
      sift_down(i);
    }
  }

  // Drop entries for which keep(e) is false and restore the heap order in O(n).
  template <typename Keep>
  void compact(Keep keep) noexcept {
    size_t w = 0;
    for (size_t r = 0; r < h_.size(); ++r)
      if (keep(h_[r])) h_[w++] = h_[r];
    h_.resize(w);
    if (w > 1)
      for (size_t i = w / 2; i-- > 0;) sift_down(i);
  }

  // Heap property check for tests.
  bool is_heap() const noexcept {
    for (size_t i = 1; i < h_.size(); ++i)
      if (less_(h_[i], h_[(i - 1) / 2])) return false;
    return true;
  }

  const Less &less() const noexcept { return less_; }

private:
  void sift_up(size_t i) noexcept {
    Entry e = h_[i];
    while (i > 0) {
      size_t p = (i - 1) / 2;
      if (!less_(e, h_[p])) break;
      h_[i] = h_[p];
      i = p;
    }
    h_[i] = e;
  }

  void sift_down(size_t i) noexcept {
    const size_t n = h_.size();
    Entry e = h_[i];
    while (true) {
      size_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && less_(h_[c + 1], h_[c])) ++c;
      if (!less_(h_[c], e)) break;
      h_[i] = h_[c];
      i = c;
    }
    h_[i] = e;
  }

  PodVector<Entry> h_;
  Less less_;
};

}  // namespace cxltier
