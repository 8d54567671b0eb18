// SPDX-License-Identifier: Apache-2.0
// Block identity keys (128-bit) and block geometry: the units everything else counts in.
#pragma once

#include <cxltier/cxltier.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace cxltier {

// A 128-bit identity. Layout-compatible with cxlt_key_t.
struct Key {
  uint64_t hi = 0;
  uint64_t lo = 0;
  friend constexpr bool operator==(const Key &, const Key &) = default;
  friend constexpr auto operator<=>(const Key &, const Key &) = default;
  constexpr cxlt_key_t c() const noexcept { return {hi, lo}; }
  static constexpr Key from(cxlt_key_t k) noexcept { return {k.hi, k.lo}; }
  std::string hex() const;  // 32 lowercase hex digits, hi first
};
static_assert(sizeof(Key) == sizeof(cxlt_key_t));

// Key of block `block_index` of sequence `sequence_id` (XXH3-128 with a domain tag, so that
// sequence keys and content keys never share a value by construction).
CXLT_API Key key_from_sequence(uint64_t sequence_id, uint64_t block_index) noexcept;
// Content key chained over the token prefix: XXH3-128(tag, parent, tokens). The root parent is {0,0}.
CXLT_API Key key_from_tokens(Key parent, const int32_t *tokens, size_t n_tokens) noexcept;
// Key for an opaque 64-bit block id from a trace (hash_ids): XXH3-128(tag, id).
CXLT_API Key key_from_trace_id(uint64_t id) noexcept;

// A cheap 64-bit mix of a key for hash tables (the key is already a good hash: fold it).
constexpr uint64_t key_hash(Key k) noexcept { return k.hi ^ (k.lo * 0x9e3779b97f4a7c15ull); }

struct KeyHash {
  size_t operator()(const Key &k) const noexcept { return static_cast<size_t>(key_hash(k)); }
};

// The shape of one KV block: every layer and head of `tokens_per_block` tokens of one sequence.
struct BlockGeometry {
  uint32_t layers = 80;
  uint32_t kv_heads = 8;
  uint32_t head_dim = 128;
  uint32_t bytes_per_element = 2;  // bf16
  uint32_t tokens_per_block = 16;
  bool k_and_v = true;             // false: one tensor per layer (MLA-style latent cache)

  // Bytes per token and per block. Throw Error(CXLT_ERROR_INVALID_ARGUMENT) naming the zero
  // field or the overflow.
  uint64_t bytes_per_token() const;
  uint64_t bytes() const;
  void validate() const { (void)bytes(); }
};

}  // namespace cxltier
