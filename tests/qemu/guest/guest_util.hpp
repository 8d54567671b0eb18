// SPDX-License-Identifier: Apache-2.0
// What the guest-side check programs (cxltq-guest, cxltq-tiers) share: their exit statuses, the
// detail line the guest's /init reports, and the byte pattern that blocks are filled with and
// checked against after every move.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace cxltq {

constexpr int kPass = 0;
constexpr int kFail = 1;
constexpr int kSkip = 77;

// Prints the detail line (the guest's /init reports the last line) and returns the status.
inline int finish(int status, const std::string &detail) {
  std::printf("%s\n", detail.c_str());
  std::fflush(stdout);
  return status;
}

// The bytes a block must hold: a function of its seed and the offset, so that any page that
// comes back from a move with other content (or zeroes) is caught.
inline uint8_t pattern_byte(uint64_t seed, size_t offset) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + offset / 8;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  return static_cast<uint8_t>(x >> (8 * (offset % 8)));
}

inline void fill(void *p, size_t n, uint64_t seed) {
  auto *b = static_cast<uint8_t *>(p);
  for (size_t i = 0; i < n; ++i) b[i] = pattern_byte(seed, i);
}

// The offset of the first byte that is not the pattern's, or n.
inline size_t first_bad_byte(const void *p, size_t n, uint64_t seed) {
  const auto *b = static_cast<const uint8_t *>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != pattern_byte(seed, i)) return i;
  return n;
}

}  // namespace cxltq
