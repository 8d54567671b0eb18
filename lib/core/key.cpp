// SPDX-License-Identifier: Apache-2.0
// Identity keys and block geometry.
//
// Keys are XXH3-128 (xxHash 0.8, Debian's libxxhash) over a domain tag and the fields. With
// n distinct blocks the chance that any two share a key is about n^2 / 2^129: 1.5e-15 at
// 10^12 blocks. A collision would make two blocks share one policy state (never their bytes:
// residency is checked by key equality, and the runtime stores bytes per key).
#include <cxltier/key.hpp>
#include <cxltier/error.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <limits>

namespace cxltier {

namespace {
constexpr uint64_t kTagSequence = 0x6378'6c74'7365'7131ull;  // "cxltseq1"
constexpr uint64_t kTagTokens = 0x6378'6c74'746f'6b31ull;    // "cxlttok1"
constexpr uint64_t kTagTrace = 0x6378'6c74'7472'6331ull;     // "cxlttrc1"

Key to_key(XXH128_hash_t h) noexcept { return Key{h.high64, h.low64}; }
}  // namespace

std::string Key::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return buf;
}

Key key_from_sequence(uint64_t sequence_id, uint64_t block_index) noexcept {
  const uint64_t words[3] = {kTagSequence, sequence_id, block_index};
  return to_key(XXH3_128bits(words, sizeof words));
}

Key key_from_tokens(Key parent, const int32_t *tokens, size_t n_tokens) noexcept {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  const uint64_t head[3] = {kTagTokens, parent.hi, parent.lo};
  XXH3_128bits_update(&state, head, sizeof head);
  if (n_tokens != 0 && tokens != nullptr) XXH3_128bits_update(&state, tokens, n_tokens * sizeof(int32_t));
  return to_key(XXH3_128bits_digest(&state));
}

Key key_from_trace_id(uint64_t id) noexcept {
  const uint64_t words[2] = {kTagTrace, id};
  return to_key(XXH3_128bits(words, sizeof words));
}

namespace {
uint64_t checked_mul(uint64_t a, uint64_t b, const char *what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    fail(CXLT_ERROR_INVALID_ARGUMENT, "block geometry: ", what, " overflows 64 bits");
  return r;
}
}  // namespace

uint64_t BlockGeometry::bytes_per_token() const {
  if (layers == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "block geometry: layers must be > 0");
  if (kv_heads == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "block geometry: kv_heads must be > 0");
  if (head_dim == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "block geometry: head_dim must be > 0");
  if (bytes_per_element == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "block geometry: bytes_per_element must be > 0");
  uint64_t b = checked_mul(k_and_v ? 2 : 1, layers, "bytes per token");
  b = checked_mul(b, kv_heads, "bytes per token");
  b = checked_mul(b, head_dim, "bytes per token");
  return checked_mul(b, bytes_per_element, "bytes per token");
}

uint64_t BlockGeometry::bytes() const {
  if (tokens_per_block == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "block geometry: tokens_per_block must be > 0");
  return checked_mul(bytes_per_token(), tokens_per_block, "bytes per block");
}

}  // namespace cxltier
