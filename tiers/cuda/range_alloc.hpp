// SPDX-License-Identifier: Apache-2.0
// RangeAllocator: best-fit allocation of byte ranges inside one segment, with coalescing of
// neighbours on free. Offsets only (no memory is touched), so it carves device memory it never
// dereferences. Used by the PyTorch allocator (torch_allocator.cpp) to carve large cuMemAlloc
// segments; pure, and tested without a GPU (tests/gpu). Not thread-safe: callers lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace cxltier::cuda {

class RangeAllocator {
public:
  explicit RangeAllocator(uint64_t size);

  // The offset of a free range of exactly `bytes` (> 0): the smallest free range that fits,
  // lowest offset among equals. nullopt when none fits.
  std::optional<uint64_t> allocate(uint64_t bytes);
  // Give [offset, offset+bytes) back, merged with free neighbours. False (nothing changed) if
  // the range is empty, leaves the segment, or overlaps a free range (a double free).
  bool free(uint64_t offset, uint64_t bytes);

  uint64_t size() const noexcept { return size_; }
  uint64_t free_bytes() const noexcept { return free_bytes_; }
  uint64_t largest_free() const noexcept;
  bool all_free() const noexcept { return free_bytes_ == size_; }
  // Every invariant (both indexes agree, no two free ranges touch, the sum): false with the
  // first broken one in *why.
  bool is_valid(std::string *why = nullptr) const;

private:
  void insert(uint64_t offset, uint64_t bytes);
  void erase(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t size_;
  uint64_t free_bytes_;
  std::map<uint64_t, uint64_t> by_offset_;           // offset -> length
  std::set<std::pair<uint64_t, uint64_t>> by_size_;  // (length, offset)
};

}  // namespace cxltier::cuda
