// SPDX-License-Identifier: Apache-2.0
// The generator's random numbers: xoshiro256** seeded with splitmix64 (Blackman and Vigna),
// and samplers built only from integer operations and exact float scaling. The std::
// distributions are avoided on purpose: their output differs between standard libraries, and
// a seeded workload must be the same on every machine.
#pragma once

#include <cstdint>

namespace cxltier::trace::detail {

constexpr uint64_t splitmix64(uint64_t &state) noexcept {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Rng {
public:
  explicit Rng(uint64_t seed) noexcept {
    uint64_t sm = seed;
    for (uint64_t &w : s_) w = splitmix64(sm);
  }

  uint64_t next() noexcept {
    uint64_t result = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits (exact: a multiple of 2^-53).
  double uniform01() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform in [0, n), n >= 1, without bias (Lemire's multiply-and-reject).
  uint64_t below(uint64_t n) noexcept {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // In [lo, hi], each power-of-two octave equally likely, uniform within the octave: a
  // log-uniform shape from integer operations only. Requires 1 <= lo <= hi.
  uint64_t log_uniform(uint64_t lo, uint64_t hi) noexcept {
    if (lo >= hi) return lo;
    int klo = 63 - __builtin_clzll(lo), khi = 63 - __builtin_clzll(hi);
    int k = klo + static_cast<int>(below(static_cast<uint64_t>(khi - klo + 1)));
    uint64_t a = uint64_t{1} << k;
    uint64_t b = k >= 63 ? UINT64_MAX : (uint64_t{1} << (k + 1)) - 1;
    if (a < lo) a = lo;
    if (b > hi) b = hi;
    return a + below(b - a + 1);
  }

  bool chance(double p) noexcept { return uniform01() < p; }

private:
  static constexpr uint64_t rotl(uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace cxltier::trace::detail
