// SPDX-License-Identifier: Apache-2.0
// Per-layer KV layouts: validation, description and the gather/scatter copy plans (see
// kv_layout.hpp for the byte order). Built in every configuration: it needs no driver.
#include "tiers/cuda/kv_layout.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

namespace cxltier::cuda {

std::string KvLayout::describe() const {
  return std::to_string(segment_count) + " segments x " + format_bytes(extent_bytes) + " = " +
         format_bytes(block_bytes()) + " per block; contiguous blocks hold segment 0, 1, ... ([layer 0 K][layer 0 V]...); "
         "per-layer arenas of S blocks hold segment i of block s at (i*S + s) x " + format_bytes(extent_bytes);
}

KvLayout kv_layout_for_block(uint64_t block_bytes, uint32_t segments) {
  if (segments == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "per-layer layout: 0 segments per block");
  if (block_bytes == 0 || block_bytes % segments != 0)
    fail(CXLT_ERROR_INVALID_ARGUMENT, "per-layer layout: a block of ", block_bytes, " bytes does not split into ",
         segments, " equal segments");
  KvLayout l;
  l.segment_count = segments;
  l.extent_bytes = block_bytes / segments;
  return l;
}

void coalesce(std::vector<CopySeg> &segs) {
  if (segs.empty()) return;
  size_t out = 0;
  for (size_t i = 1; i < segs.size(); ++i) {
    CopySeg &last = segs[out];
    if (segs[i].src == last.src + last.bytes && segs[i].dst == last.dst + last.bytes) {
      last.bytes += segs[i].bytes;
    } else {
      segs[++out] = segs[i];
    }
  }
  segs.resize(out + 1);
}

std::vector<CopySeg> plan_gather(const KvLayout &layout, uint64_t arena_base, uint64_t slots, uint64_t slot,
                                 uint64_t dst) {
  std::vector<CopySeg> segs;
  segs.reserve(layout.segments());
  for (uint32_t i = 0; i < layout.segments(); ++i)
    segs.push_back({dst + layout.block_offset(i), arena_base + layout.arena_offset(slots, slot, i), layout.extent_bytes});
  coalesce(segs);
  return segs;
}

std::vector<CopySeg> plan_scatter(const KvLayout &layout, uint64_t src, uint64_t arena_base, uint64_t slots,
                                  uint64_t slot) {
  std::vector<CopySeg> segs;
  segs.reserve(layout.segments());
  for (uint32_t i = 0; i < layout.segments(); ++i)
    segs.push_back({arena_base + layout.arena_offset(slots, slot, i), src + layout.block_offset(i), layout.extent_bytes});
  coalesce(segs);
  return segs;
}

std::vector<CopySeg> plan_arena_to_arena(const KvLayout &layout, uint64_t dst_base, uint64_t dst_slots,
                                         uint64_t dst_slot, uint64_t src_base, uint64_t src_slots, uint64_t src_slot) {
  std::vector<CopySeg> segs;
  segs.reserve(layout.segments());
  for (uint32_t i = 0; i < layout.segments(); ++i)
    segs.push_back({dst_base + layout.arena_offset(dst_slots, dst_slot, i),
                    src_base + layout.arena_offset(src_slots, src_slot, i), layout.extent_bytes});
  coalesce(segs);
  return segs;
}

}  // namespace cxltier::cuda
