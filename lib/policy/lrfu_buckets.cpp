// SPDX-License-Identifier: Apache-2.0
// The LRFU index's score buckets: which bucket a score falls in (the last edge at or below it),
// by binary search over the edges, or through the cell hints that narrow it to a range of
// buckets, counted or searched. See lrfu_index.hpp for why the edges move.
#include "lib/policy/lrfu_index.hpp"

#include "lib/core/assert.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace cxltier {

unsigned LrfuIndex::bucket_search(double s) const noexcept {
  // The last edge <= s (edges_[0] = 0 and scores are >= 0; edges_[B] = +inf). Binary search
  // over B + 1 edges: log2(B) comparisons, each a conditional move rather than a branch
  // (scores are effectively random, so a branch would mispredict about every other step).
  cxlt_assert_internal(s >= 0.0);
  if (!(s >= edges_[0])) return 0;
  const double *e = edges_.data();
  unsigned lo = 0, len = nbuckets_;  // the answer lies in [lo, lo + len)
  while (len > 1) {
    const unsigned half = len / 2;
    lo = e[lo + half] <= s ? lo + half : lo;
    len -= half;
  }
  return lo;
}

// The cell of a score: its exponent and top mantissa bits (the bit pattern of a non-negative
// double orders as its value), so cells are narrow where scores crowd near 0. Scores below
// 2^-(kCellExponents - 1) (and a little above) share cell 0; those from 2 - 2^-kCellMantissaBits
// on share the last. A negative score (-0.0 included: its sign bit) would land in the last cell;
// bucket_of answers every score <= 0 before asking.
unsigned LrfuIndex::cell_of(double s) noexcept {
  const uint64_t top = std::bit_cast<uint64_t>(s) >> (52 - kCellMantissaBits);
  if (top <= kFirstCellTop) return 0;
  return static_cast<unsigned>(std::min<uint64_t>(top - kFirstCellTop, kCells - 1));
}

double LrfuIndex::cell_low(unsigned c) noexcept {
  return c == 0 ? 0.0 : std::bit_cast<double>((kFirstCellTop + c) << (52 - kCellMantissaBits));
}

void LrfuIndex::refresh_bucket_hints() {
  // One merge pass over cells and edges (both ascending): bucket_search(cell_low(c)) for all c.
  bucket_hint_.resize(kCells);
  unsigned b = 0;
  for (unsigned c = 0; c < kCells; ++c) {
    const double low = cell_low(c);
    while (b + 1 < nbuckets_ && edges_[b + 1] <= low) ++b;
    bucket_hint_[c] = static_cast<uint16_t>(b);
  }
  one_value_.resize(nbuckets_);
  for (unsigned k = 0; k < nbuckets_; ++k) one_value_[k] = edges_[k + 1] == std::nextafter(edges_[k], 2.0);
}

unsigned LrfuIndex::bucket_of(double s) const noexcept {
  // The answer (the last edge <= s) lies between the buckets of the lowest scores of s's cell
  // and of the next cell, since it is monotone in s: a search over that range (usually one
  // bucket or two) instead of over all B.
  cxlt_assert_internal(s >= 0.0);
  // edges_[0] = 0 and edges_[1] > 0, so every score <= 0 is in bucket 0: -0.0 too, which
  // cell_of would put in the last cell by its sign bit (a checkpoint may restore a -0.0 score).
  // NaN, never a score, also answers 0.
  if (!(s > 0.0)) return 0;
  const unsigned c = cell_of(s);
  unsigned lo = bucket_hint_[c];
  const unsigned hi = c + 1 < kCells ? bucket_hint_[c + 1] : nbuckets_ - 1;
  const double *e = edges_.data();
  unsigned len = hi - lo + 1;  // the answer lies in [lo, lo + len)
  // Up to kEdgeWindow buckets (the common case where scores crowd into a few cells): count the
  // edges <= s in the window from lo. The edges ascend and every one past the answer is above s
  // (the padding's +inf included), so the count is the answer's offset + 1. The comparisons
  // are independent of each other, where a binary search's each wait for the last.
  if (len > 1 && len <= kEdgeWindow) {
    // Two edges a comparison (GCC's and clang's vector extension: SSE2 on x86-64, NEON on
    // arm64); a true lane is all ones, -1, so subtracting counts it.
    using Pair = double __attribute__((vector_size(16)));
    using Mask = int64_t __attribute__((vector_size(16)));
    const Pair sv = {s, s};
    Mask count = {0, 0};
    for (unsigned k = 0; k < kEdgeWindow; k += 2) {
      Pair p;
      std::memcpy(&p, e + lo + k, sizeof p);
      count -= (p <= sv);
    }
    // hi bounds it for a score the window cannot (+inf, never a score, counts the padding).
    return std::min(hi, lo + static_cast<unsigned>(count[0] + count[1]) - 1);
  }
  while (len > 1) {
    const unsigned half = len / 2;
    lo = e[lo + half] <= s ? lo + half : lo;
    len -= half;
  }
  return lo;
}

}  // namespace cxltier
