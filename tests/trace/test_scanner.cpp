// SPDX-License-Identifier: Apache-2.0
// The JSON scanner's fast paths against the slow, obviously correct ones: integers of every
// length at every distance from the end of the line (the 8-byte SWAR loads), and floats
// against std::from_chars, including exact midpoints between two floats (where rounding
// through double would be wrong).
#include "lib/trace/json_scan.hpp"

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using cxltier::trace::detail::Scanner;

namespace {

std::vector<uint64_t> parse_ids(const std::string &text, bool *ok, std::string *why = nullptr) {
  Scanner sc(text);
  std::vector<uint64_t> v;
  *ok = sc.u64_array(v, "ids") && sc.finish();
  if (why) *why = sc.error();
  return v;
}

float parse_float(const std::string &text, bool *ok) {
  std::string line = "[" + text + "]";
  Scanner sc(line);
  std::vector<float> v;
  *ok = sc.f32_array(v, "x") && sc.finish() && v.size() == 1;
  return *ok ? v[0] : 0.0f;
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

}  // namespace

// Every length from 1 to 20 digits, with 0 to 9 bytes after the number on the line, so the
// number ends before, at and after each 8-byte load boundary.
TEST(Scanner, IntegersOfEveryLengthAtEveryOffset) {
  std::mt19937_64 rng(3);
  for (int len = 1; len <= 20; ++len) {
    for (int trial = 0; trial < 50; ++trial) {
      std::string digits;
      digits += static_cast<char>('1' + rng() % 9);
      for (int i = 1; i < len; ++i) digits += static_cast<char>('0' + rng() % 10);
      if (trial == 0) digits = std::string(static_cast<size_t>(len), '9');
      uint64_t want = 0;
      auto r = std::from_chars(digits.data(), digits.data() + digits.size(), want);
      bool fits = r.ec == std::errc();
      for (int pad = 0; pad <= 9; ++pad) {
        std::string text = "[" + digits + "," + digits + std::string(static_cast<size_t>(pad), ' ') + "]";
        bool ok;
        std::string why;
        auto got = parse_ids(text, &ok, &why);
        ASSERT_EQ(ok, fits) << text << " " << why;
        if (fits) {
          ASSERT_EQ(got, (std::vector<uint64_t>{want, want})) << text;
        } else {
          EXPECT_NE(why.find("exceeds 2^64-1"), std::string::npos) << why;
        }
      }
    }
  }
  bool ok;
  EXPECT_EQ(parse_ids("[18446744073709551615]", &ok), std::vector<uint64_t>{UINT64_MAX});
  EXPECT_TRUE(ok);
  parse_ids("[18446744073709551616]", &ok);
  EXPECT_FALSE(ok);
  parse_ids("[99999999999999999999]", &ok);
  EXPECT_FALSE(ok);
  EXPECT_EQ(parse_ids("[0,0,10000000,0]", &ok), (std::vector<uint64_t>{0, 0, 10000000, 0}));
  // What the fast path must hand to the slow one, which refuses it.
  for (const char *bad : {"[01]", "[-1]", "[1.0]", "[1e3]", "[1E3]", "[12345678.5]", "[123456789012e1]", "[1 2]",
                          "[1,]", "[,1]", "[1", "[12345678"}) {
    parse_ids(bad, &ok);
    EXPECT_FALSE(ok) << bad;
  }
}

TEST(Scanner, FloatsMatchFromChars) {
  std::mt19937_64 rng(11);
  auto check = [](const std::string &text) {
    float want = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), want);
    bool ok;
    float got = parse_float(text, &ok);
    if (r.ec != std::errc() || !std::isfinite(want)) {
      EXPECT_FALSE(ok) << text;
      return;
    }
    ASSERT_TRUE(ok) << text;
    ASSERT_EQ(bits(got), bits(want)) << text;
  };
  char buf[64];
  // Shortest round-trip text of random floats in [0, 1] (what the writer emits) and beyond.
  for (int i = 0; i < 200000; ++i) {
    uint32_t b = static_cast<uint32_t>(rng());
    float f;
    if (i % 2) {
      f = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53);
    } else {
      std::memcpy(&f, &b, 4);
      if (!std::isfinite(f)) continue;
    }
    auto r = std::to_chars(buf, buf + sizeof buf, f);
    check(std::string(buf, r.ptr));
  }
  // Exact midpoints between adjacent floats, and the doubles just beside them: the fast path
  // must not round twice.
  for (int i = 0; i < 100000; ++i) {
    float a = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53);
    float b = std::nextafter(a, 2.0f);
    double mid = (static_cast<double>(a) + static_cast<double>(b)) / 2;
    for (double d : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 2.0)}) {
      auto r = std::to_chars(buf, buf + sizeof buf, d);
      check(std::string(buf, r.ptr));
      r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed, 30);
      check(std::string(buf, r.ptr));
    }
  }
  // Random decimal texts of 1 to 25 digits, with exponents.
  for (int i = 0; i < 100000; ++i) {
    std::string t = (rng() % 5 == 0) ? "-" : "";
    int ints = static_cast<int>(rng() % 4);
    if (ints == 0) {
      t += "0";
    } else {
      t += static_cast<char>('1' + rng() % 9);
      for (int k = 1; k < ints; ++k) t += static_cast<char>('0' + rng() % 10);
    }
    int fr = static_cast<int>(rng() % 22);
    if (fr) {
      t += '.';
      for (int k = 0; k < fr; ++k) t += static_cast<char>('0' + rng() % 10);
    }
    if (rng() % 4 == 0) t += "e" + std::to_string(static_cast<int>(rng() % 60) - 40);
    check(t);
  }
  for (const char *t : {"0", "-0", "1", "0.5", "1e-45", "3.4028235e38", "3.5e38", "1e-50", "0.000000000000000000000001"})
    check(t);
  bool ok;
  for (const char *bad : {"01", ".5", "1.", "1e", "1e+", "+1", "--1", "0x1p3", "inf", "nan", "1.5.5"}) {
    parse_float(bad, &ok);
    EXPECT_FALSE(ok) << bad;
  }
}
