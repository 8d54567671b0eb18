// SPDX-License-Identifier: Apache-2.0
// BlockPool: one tier's fixed-size block slots, carved from extents that the tier's backend
// hands out (as CacheLib carves slabs). Allocate and free are O(1) pops and pushes on a stack of
// slot indices; all metadata lives outside the blocks; the hot path never allocates (only
// growing by a new extent does). The budget is exact: never more than floor(budget / block).
//
// NOT thread-safe: the runtime serialises every call on one pool under its own lock (a pool
// call is a few nanoseconds; a lock of its own would double that for nothing). address() is
// a pure read and may run concurrently with other address() calls.
#pragma once

#include "lib/core/assert.hpp"
#include "lib/core/fast_div.hpp"
#include "lib/memory/backend.hpp"

#include <cxltier/cxltier.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cxltier {

using SlotId = uint32_t;
inline constexpr SlotId kInvalidSlot = UINT32_MAX;

struct BlockPoolConfig {
  std::string name;                // for messages (the tier's name)
  uint64_t block_bytes = 0;        // slot size, bytes (> 0)
  uint64_t budget_bytes = 0;       // the tier's budget, bytes (>= block_bytes)
  uint32_t blocks_per_extent = 64; // grow granularity: slots per backend extent (the last may hold fewer)
  bool reserve_all = false;        // take every extent up to the budget at construction
};

class BlockPool {
public:
  // Throws Error(CXLT_ERROR_INVALID_ARGUMENT) naming the bad field, or (reserve_all) the
  // backend's error, with nothing left allocated. `backend` must outlive the pool.
  BlockPool(TierBackend &backend, const BlockPoolConfig &config);
  ~BlockPool();  // returns every extent to the backend (slots still allocated or not)
  BlockPool(const BlockPool &) = delete;
  BlockPool &operator=(const BlockPool &) = delete;

  // A free slot into *out. Grows by one extent when every mapped slot is in use and the budget
  // allows. CXLT_ERROR_OUT_OF_TIER_MEMORY: the budget is in use (no message is formatted: this
  // is the ordinary "tier full" answer). Any other error: growing failed, the message is in
  // backend_last_error(), and the pool is exactly as before. *out is written only on success.
  cxlt_result_t allocate(SlotId *out) noexcept {
    if (free_top_ == 0) [[unlikely]] return allocate_slow(out);
    const SlotId s = free_stack_[--free_top_];
    in_use_[s] = 1;
    *out = s;
    cxlt_assert_expensive(is_valid());
    return CXLT_OK;
  }
  // Return a slot. CXLT_ERROR_INVALID_ARGUMENT (message set) for a slot this pool never mapped
  // or one that is not allocated (a double free); the pool is unchanged then. Always checked:
  // one byte per slot, cheaper than the bug it catches.
  cxlt_result_t free(SlotId slot) noexcept {
    if (slot >= mapped_ || in_use_[slot] == 0) [[unlikely]] return free_invalid(slot);
    in_use_[slot] = 0;
    free_stack_[free_top_++] = slot;  // capacity >= mapped_: never overflows
    cxlt_assert_expensive(is_valid());
    return CXLT_OK;
  }
  // Grow by one extent now (off the hot path, ahead of need). OUT_OF_TIER_MEMORY at budget.
  cxlt_result_t grow() noexcept;

  // Where slot's bytes are: O(1), extent table lookup. nullptr on the null backend. The slot
  // must be mapped (contains()); allocation state is not checked.
  void *address(SlotId slot) const noexcept {
    const uint32_t x = extent_of_.quotient(slot);
    const Extent &e = extents_[x];
    if (e.base == nullptr) return nullptr;
    return e.base + static_cast<size_t>(slot - x * blocks_per_extent_) * block_bytes_;
  }
  bool contains(SlotId slot) const noexcept { return slot < mapped_; }
  bool is_allocated(SlotId slot) const noexcept { return slot < mapped_ && in_use_[slot] != 0; }

  const std::string &name() const noexcept { return name_; }
  TierBackend &backend() const noexcept { return backend_; }
  uint64_t block_bytes() const noexcept { return block_bytes_; }
  uint64_t budget_bytes() const noexcept { return budget_bytes_; }
  uint32_t blocks_per_extent() const noexcept { return blocks_per_extent_; }
  uint32_t max_slots() const noexcept { return max_slots_; }        // floor(budget / block)
  uint32_t slots_mapped() const noexcept { return mapped_; }        // carved from extents so far
  // In use = mapped - free: derived, so the hot path keeps no counter of its own.
  uint32_t slots_used() const noexcept { return mapped_ - free_top_; }
  uint32_t slots_free() const noexcept { return max_slots_ - slots_used(); }  // incl. not yet mapped
  bool full() const noexcept { return slots_used() == max_slots_; }
  uint64_t bytes_used() const noexcept { return uint64_t{slots_used()} * block_bytes_; }
  uint64_t bytes_mapped() const noexcept;
  size_t extent_count() const noexcept { return extents_.size(); }
  TierExtent extent(size_t i) const noexcept;
  // Extents by page kind: {hugetlb, thp, 4 KiB (neither), no memory (null)}.
  struct PageCounts {
    size_t hugetlb = 0, thp = 0, small = 0, none = 0;
  };
  PageCounts page_counts() const noexcept;

  // Debug validator: every internal invariant (free stack and in-use flags agree, counts,
  // extent sizes, budget). Returns false with the first broken one in *why. O(slots).
  bool is_valid(std::string *why = nullptr) const;

private:
  struct Extent {
    char *base;
    size_t bytes;
    uint32_t flags;
    uint32_t slots;
  };

  cxlt_result_t grow_locked() noexcept;
  cxlt_result_t allocate_slow(SlotId *out) noexcept;
  cxlt_result_t free_invalid(SlotId slot) noexcept;
  bool reserve_metadata(size_t need) noexcept;

  TierBackend &backend_;
  std::string name_;
  uint64_t block_bytes_;
  uint64_t budget_bytes_;
  uint32_t blocks_per_extent_;
  FastDivU32 extent_of_;  // slot -> extent, without a divide (address() is on every lookup)
  uint32_t max_slots_;
  uint32_t mapped_ = 0;
  // Plain arrays rather than vectors: the hot path is a load, two stores and a counter, with
  // no capacity checks (capacity_ >= mapped_ always; growth reallocates before mapping).
  std::vector<Extent> extents_;            // reserved for every extent at construction
  std::unique_ptr<SlotId[]> free_stack_;   // free mapped slots, [0, free_top_)
  std::unique_ptr<uint8_t[]> in_use_;      // per mapped slot: 1 allocated, 0 free
  uint32_t free_top_ = 0;
  uint32_t capacity_ = 0;                  // length of free_stack_ and in_use_
};

}  // namespace cxltier
