// SPDX-License-Identifier: Apache-2.0
// A flat hash table from trace block ids (any 64-bit value) to a value, for the replay's own
// bookkeeping (the unique-block count, the OPT pre-pass's latest reference of each id): open
// addressing with linear probing in one array, at most half full, so a lookup touches one
// cache line in the common case and nothing is allocated per id. Not the runtime's index: the
// policy decisions go through the runtime's store as ever.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace cxltier::replay::detail {

struct Nothing {};

template <typename V>
class IdTable {
public:
  explicit IdTable(size_t expected = 1024) { rehash(capacity_for(expected)); }

  // The value of `id`, inserted as `init` when absent; `fresh` says which.
  V &find_or_insert(uint64_t id, const V &init, bool &fresh) {
    if (id == kEmpty) {
      fresh = !has_empty_key_;
      if (fresh) {
        has_empty_key_ = true;
        empty_key_value_ = init;
        ++size_;
      }
      return empty_key_value_;
    }
    size_t i = home(id);
    for (;;) {
      Slot &s = slots_[i];
      if (s.id == id) {
        fresh = false;
        return s.value;
      }
      if (s.id == kEmpty) break;
      i = (i + 1) & mask_;
    }
    if (2 * (used_ + 1) > slots_.size()) {
      rehash(slots_.size() * 2);
      return find_or_insert(id, init, fresh);
    }
    fresh = true;
    ++used_;
    ++size_;
    slots_[i] = Slot{id, init};
    return slots_[i].value;
  }
  // Inserts `id`; true when it was not there before.
  bool insert(uint64_t id) {
    bool fresh = false;
    (void)find_or_insert(id, V{}, fresh);
    return fresh;
  }
  size_t size() const noexcept { return size_; }
  // A hint that `id` is looked up soon: its home slot's line is fetched meanwhile.
  void prefetch(uint64_t id) const noexcept { __builtin_prefetch(&slots_[home(id)]); }

private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // that id itself lives beside the array
  struct Slot {
    uint64_t id;
    [[no_unique_address]] V value;  // a set (V = Nothing) takes 8 bytes a slot
  };

  static size_t capacity_for(size_t n) {
    size_t c = 64;
    while (c < 2 * n) c *= 2;
    return c;
  }
  // Fibonacci hashing: trace ids are often small consecutive integers, which this spreads.
  size_t home(uint64_t id) const noexcept { return static_cast<size_t>((id * 0x9E3779B97F4A7C15ull) >> shift_); }

  void rehash(size_t n) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(n, Slot{kEmpty, V{}});
    mask_ = n - 1;
    shift_ = 64;
    for (size_t c = n; c > 1; c >>= 1) --shift_;
    for (const Slot &s : old) {
      if (s.id == kEmpty) continue;
      size_t i = home(s.id);
      while (slots_[i].id != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t used_ = 0;  // ids in the array
  size_t size_ = 0;  // ids in all, the empty-marker id included
  bool has_empty_key_ = false;
  V empty_key_value_{};
};

using IdSet = IdTable<Nothing>;

}  // namespace cxltier::replay::detail
