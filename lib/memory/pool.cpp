// SPDX-License-Identifier: Apache-2.0
// BlockPool: fixed-size slots over backend extents, O(1) allocate/free on a stack of slot
// indices (see pool.hpp). Growth is the only path that allocates, and it reserves every
// vector it will touch before asking the backend, so a failure leaves the pool as it was.
#include "pool.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <algorithm>
#include <new>
#include <string>

namespace cxltier {

BlockPool::BlockPool(TierBackend &backend, const BlockPoolConfig &config)
    : backend_(backend),
      name_(config.name.empty() ? backend.name() : config.name),
      block_bytes_(config.block_bytes),
      budget_bytes_(config.budget_bytes),
      blocks_per_extent_(config.blocks_per_extent),
      extent_of_(config.blocks_per_extent),
      max_slots_(0) {
  const std::string who = "block pool '" + name_ + "'";
  if (block_bytes_ == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, who, ": block_bytes is 0");
  if (budget_bytes_ < block_bytes_) {
    fail(CXLT_ERROR_INVALID_ARGUMENT, who, ": budget_bytes ", budget_bytes_, " (", format_bytes(budget_bytes_),
         ") is smaller than one block of ", block_bytes_, " bytes: the tier would hold no block");
  }
  if (blocks_per_extent_ == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, who, ": blocks_per_extent is 0");
  const uint64_t slots = budget_bytes_ / block_bytes_;
  if (slots >= kInvalidSlot) {
    fail(CXLT_ERROR_INVALID_ARGUMENT, who, ": budget ", format_bytes(budget_bytes_), " / block ",
         format_bytes(block_bytes_), " = ", slots, " slots, more than a pool indexes (", kInvalidSlot - 1, ")");
  }
  if (block_bytes_ > SIZE_MAX / blocks_per_extent_) {
    fail(CXLT_ERROR_INVALID_ARGUMENT, who, ": blocks_per_extent ", blocks_per_extent_, " x block_bytes ",
         block_bytes_, " overflows an extent size");
  }
  max_slots_ = static_cast<uint32_t>(slots);
  extents_.reserve((max_slots_ + blocks_per_extent_ - 1) / blocks_per_extent_);
  if (config.reserve_all) {
    if (!reserve_metadata(max_slots_)) fail(CXLT_ERROR_OUT_OF_HOST_MEMORY, who, ": out of host memory for slot metadata");
    while (mapped_ < max_slots_) {
      cxlt_result_t r = grow_locked();
      if (r != CXLT_OK) {
        std::string msg = backend_last_error();
        for (const Extent &e : extents_) backend_.try_free_extent(TierExtent{e.base, e.bytes, e.flags});
        extents_.clear();
        fail(r, who, ": reserving the whole budget (", max_slots_, " blocks) failed: ", msg);
      }
    }
  }
}

BlockPool::~BlockPool() {
  for (const Extent &e : extents_) backend_.try_free_extent(TierExtent{e.base, e.bytes, e.flags});
}

cxlt_result_t BlockPool::grow() noexcept { return grow_locked(); }

cxlt_result_t BlockPool::grow_locked() noexcept {
  if (mapped_ >= max_slots_) return CXLT_ERROR_OUT_OF_TIER_MEMORY;
  const uint32_t n = std::min(blocks_per_extent_, max_slots_ - mapped_);
  const size_t want = static_cast<size_t>(n) * block_bytes_;
  // Metadata first (geometrically, capped at the budget's slot count): after this nothing
  // below allocates, and allocate/free never need to.
  if (!reserve_metadata(size_t{mapped_} + n)) {
    backend_set_error("block pool '" + name_ + "': out of host memory for slot metadata");
    return CXLT_ERROR_OUT_OF_HOST_MEMORY;
  }
  TierExtent e;
  backend_set_error("");
  cxlt_result_t r = backend_.try_alloc_extent(want, &e);
  if (r != CXLT_OK) {
    try {
      std::string inner = backend_last_error();
      backend_set_error("block pool '" + name_ + "': growing by " + std::to_string(n) + " blocks (" +
                        format_bytes(want) + ") failed: " + (inner.empty() ? cxlt_result_string(r) : inner));
    } catch (...) {
    }
    return r;
  }
  if (e.bytes < want) {
    backend_.try_free_extent(e);
    backend_set_error("block pool '" + name_ + "': backend '" + backend_.name() + "' returned " +
                      std::to_string(e.bytes) + " bytes for an extent of " + std::to_string(want));
    return CXLT_ERROR_BACKEND;
  }
  extents_.push_back(Extent{static_cast<char *>(e.base), e.bytes, e.flags, n});  // capacity reserved
  for (uint32_t i = 0; i < n; ++i) in_use_[mapped_ + i] = 0;
  for (uint32_t i = n; i-- > 0;) free_stack_[free_top_++] = mapped_ + i;  // lowest index on top
  mapped_ += n;
  cxlt_assert_expensive(is_valid());
  return CXLT_OK;
}

bool BlockPool::reserve_metadata(size_t need) noexcept {
  if (need <= capacity_) return true;
  size_t cap = std::min<size_t>(max_slots_, std::max<size_t>(need, 2 * size_t{capacity_}));
  std::unique_ptr<SlotId[]> stack(new (std::nothrow) SlotId[cap]);
  std::unique_ptr<uint8_t[]> flags(new (std::nothrow) uint8_t[cap]);
  if (!stack || !flags) return false;
  std::copy(free_stack_.get(), free_stack_.get() + free_top_, stack.get());
  std::copy(in_use_.get(), in_use_.get() + mapped_, flags.get());
  free_stack_ = std::move(stack);
  in_use_ = std::move(flags);
  capacity_ = static_cast<uint32_t>(cap);
  return true;
}

cxlt_result_t BlockPool::allocate_slow(SlotId *out) noexcept {
  cxlt_result_t r = grow_locked();
  if (r != CXLT_OK) return r;
  return allocate(out);
}

cxlt_result_t BlockPool::free_invalid(SlotId slot) noexcept {
  try {
    std::string msg = "block pool '" + name_ + "': free of slot " + std::to_string(slot) + ", ";
    msg += slot >= mapped_ ? "which this pool never handed out (it has " + std::to_string(mapped_) + " slots)"
                           : "which is not allocated (a double free?)";
    backend_set_error(msg);
  } catch (...) {
  }
  return CXLT_ERROR_INVALID_ARGUMENT;
}

uint64_t BlockPool::bytes_mapped() const noexcept {
  uint64_t b = 0;
  for (const Extent &e : extents_) b += e.bytes;
  return b;
}

TierExtent BlockPool::extent(size_t i) const noexcept {
  if (i >= extents_.size()) return {};
  const Extent &e = extents_[i];
  return TierExtent{e.base, e.bytes, e.flags};
}

BlockPool::PageCounts BlockPool::page_counts() const noexcept {
  PageCounts c;
  for (const Extent &e : extents_) {
    if (e.base == nullptr) ++c.none;
    else if (e.flags & CXLT_EXTENT_HUGETLB) ++c.hugetlb;
    else if (e.flags & CXLT_EXTENT_THP) ++c.thp;
    else ++c.small;
  }
  return c;
}

bool BlockPool::is_valid(std::string *why) const {
  auto bad = [&](const std::string &m) {
    if (why) *why = "block pool '" + name_ + "': " + m;
    return false;
  };
  if (uint64_t{max_slots_} != budget_bytes_ / block_bytes_) return bad("max_slots is not floor(budget / block)");
  if (mapped_ > max_slots_) return bad("more slots mapped than the budget allows");
  if (capacity_ < mapped_) return bad("slot metadata is shorter than the mapped slots");
  if (free_top_ > mapped_) {
    return bad("free stack holds " + std::to_string(free_top_) + " slots, more than the " + std::to_string(mapped_) + " mapped");
  }
  const uint32_t used = mapped_ - free_top_;
  size_t flagged = 0;
  for (uint32_t i = 0; i < mapped_; ++i) flagged += in_use_[i] != 0;
  if (flagged != used) {
    return bad("in-use flags count " + std::to_string(flagged) + ", the free stack implies " + std::to_string(used));
  }
  std::vector<bool> seen(mapped_, false);
  for (uint32_t i = 0; i < free_top_; ++i) {
    const SlotId s = free_stack_[i];
    if (s >= mapped_) return bad("free stack holds unmapped slot " + std::to_string(s));
    if (in_use_[s]) return bad("slot " + std::to_string(s) + " is both free and in use");
    if (seen[s]) return bad("slot " + std::to_string(s) + " is on the free stack twice");
    seen[s] = true;
  }
  uint64_t slots = 0;
  for (size_t i = 0; i < extents_.size(); ++i) {
    const Extent &e = extents_[i];
    if (i + 1 < extents_.size() && e.slots != blocks_per_extent_) {
      return bad("extent " + std::to_string(i) + " holds " + std::to_string(e.slots) + " slots, not " +
                 std::to_string(blocks_per_extent_));
    }
    if (e.slots == 0 || e.slots > blocks_per_extent_) return bad("extent " + std::to_string(i) + " has a bad slot count");
    if (e.bytes < uint64_t{e.slots} * block_bytes_) return bad("extent " + std::to_string(i) + " is too short");
    slots += e.slots;
  }
  if (slots != mapped_) return bad("extents hold " + std::to_string(slots) + " slots, mapped says " + std::to_string(mapped_));
  if (why) why->clear();
  return true;
}

}  // namespace cxltier
