// SPDX-License-Identifier: Apache-2.0
// RangeAllocator: best-fit ranges with coalescing (see range_alloc.hpp). Built in every
// configuration (the tests run it); the PyTorch allocator compiles it in as well.
#include "tiers/cuda/range_alloc.hpp"

namespace cxltier::cuda {

RangeAllocator::RangeAllocator(uint64_t size) : size_(size), free_bytes_(0) {
  if (size > 0) insert(0, size);
}

void RangeAllocator::insert(uint64_t offset, uint64_t bytes) {
  by_offset_.emplace(offset, bytes);
  by_size_.emplace(bytes, offset);
  free_bytes_ += bytes;
}

void RangeAllocator::erase(std::map<uint64_t, uint64_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  free_bytes_ -= it->second;
  by_offset_.erase(it);
}

std::optional<uint64_t> RangeAllocator::allocate(uint64_t bytes) {
  if (bytes == 0) return std::nullopt;
  auto fit = by_size_.lower_bound({bytes, 0});
  if (fit == by_size_.end()) return std::nullopt;
  const uint64_t off = fit->second, len = fit->first;
  erase(by_offset_.find(off));
  if (len > bytes) insert(off + bytes, len - bytes);
  return off;
}

bool RangeAllocator::free(uint64_t offset, uint64_t bytes) {
  if (bytes == 0 || offset > size_ || bytes > size_ - offset) return false;
  const uint64_t end = offset + bytes;
  auto next = by_offset_.lower_bound(offset);
  if (next != by_offset_.end() && next->first < end) return false;  // overlaps the next free range
  if (next != by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second > offset) return false;  // overlaps the previous one
  }
  uint64_t start = offset, stop = end;
  if (next != by_offset_.end() && next->first == end) {
    stop = next->first + next->second;
    auto after = std::next(next);
    erase(next);
    next = after;
  }
  if (next != by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      start = prev->first;
      erase(prev);
    }
  }
  insert(start, stop - start);
  return true;
}

uint64_t RangeAllocator::largest_free() const noexcept { return by_size_.empty() ? 0 : by_size_.rbegin()->first; }

bool RangeAllocator::is_valid(std::string *why) const {
  auto bad = [&](const std::string &s) {
    if (why) *why = s;
    return false;
  };
  if (by_offset_.size() != by_size_.size()) return bad("the two indexes hold different counts");
  uint64_t sum = 0, last_end = 0;
  bool first = true;
  for (const auto &[off, len] : by_offset_) {
    if (len == 0) return bad("an empty free range at " + std::to_string(off));
    if (off + len > size_) return bad("a free range leaves the segment at " + std::to_string(off));
    if (!first && off <= last_end) return bad("free ranges touch or overlap at " + std::to_string(off));
    if (!by_size_.count({len, off})) return bad("the size index lacks the range at " + std::to_string(off));
    sum += len;
    last_end = off + len;
    first = false;
  }
  if (sum != free_bytes_) return bad("free bytes " + std::to_string(free_bytes_) + " != sum " + std::to_string(sum));
  return true;
}

}  // namespace cxltier::cuda
