// SPDX-License-Identifier: Apache-2.0
// Per-layer KV layouts and the copy plans that gather or scatter them. Pure arithmetic, no
// driver: the same plans run on host memory in the tests (memcpy per segment) and on the GPU
// (one cuMemcpyAsync per segment, or one launch of the gather/scatter kernel in kv_copy.cu).
//
// A block is N segments of E bytes: N = 2 x layers (segment i = 2*layer + 0 for K, 1 for V),
// or N = layers for a latent cache with one tensor per layer (BlockGeometry::k_and_v false).
// The canonical (contiguous) block, as host and CXL tiers hold it:
//   [segment 0][segment 1] ... [segment N-1]   ([layer 0 K][layer 0 V][layer 1 K] ...),
// so block bytes = N * E (the geometry's 2 x layers x kv_heads x head_dim x bytes x tokens).
// A per-layer arena of S blocks, as engines keep KV on the GPU (one tensor per layer for K and
// one for V, each indexed by block): segment i of block s is at
//   arena_base + (i * S + s) * E.
// So segment i of all S blocks is one contiguous array of S*E bytes: the per-layer tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cxltier::cuda {

// One copy: `bytes` from src to dst. Addresses are integers so that device addresses
// (CUdeviceptr) and host pointers travel alike.
struct CopySeg {
  uint64_t dst = 0;
  uint64_t src = 0;
  uint64_t bytes = 0;
};

struct KvLayout {
  uint32_t segment_count = 0;  // N: 2 x layers, or layers for a latent cache
  uint64_t extent_bytes = 0;   // E: one layer's K (or V) of one block

  uint32_t segments() const noexcept { return segment_count; }
  uint64_t block_bytes() const noexcept { return uint64_t{segment_count} * extent_bytes; }
  // Offset of segment `segment` of block `slot` in an arena of `slots` blocks.
  uint64_t arena_offset(uint64_t slots, uint64_t slot, uint32_t segment) const noexcept {
    return (uint64_t{segment} * slots + slot) * extent_bytes;
  }
  // Offset of segment `segment` in the canonical contiguous block.
  uint64_t block_offset(uint32_t segment) const noexcept { return uint64_t{segment} * extent_bytes; }
  // "160 segments x 32 KiB = 5 MiB per block; ..."
  std::string describe() const;
};

// The layout of blocks of `block_bytes` in `segments` equal segments (2 x layers, or layers).
// Throws Error(CXLT_ERROR_INVALID_ARGUMENT) naming the values when segments is 0 or
// block_bytes is not a multiple of it.
KvLayout kv_layout_for_block(uint64_t block_bytes, uint32_t segments);

// Gather block `slot` of a per-layer arena (`slots` blocks at arena_base) into a contiguous
// block at dst. N segments; coalesced where consecutive (an arena of one block is contiguous).
std::vector<CopySeg> plan_gather(const KvLayout &layout, uint64_t arena_base, uint64_t slots, uint64_t slot,
                                 uint64_t dst);
// The inverse: contiguous block at src into block `slot` of the arena.
std::vector<CopySeg> plan_scatter(const KvLayout &layout, uint64_t src, uint64_t arena_base, uint64_t slots,
                                  uint64_t slot);
// Block to block between two per-layer arenas of the same layout (different slot counts allowed).
std::vector<CopySeg> plan_arena_to_arena(const KvLayout &layout, uint64_t dst_base, uint64_t dst_slots,
                                         uint64_t dst_slot, uint64_t src_base, uint64_t src_slots, uint64_t src_slot);
// Merge neighbours whose source and destination both continue where the previous one ended.
void coalesce(std::vector<CopySeg> &segs);

}  // namespace cxltier::cuda
