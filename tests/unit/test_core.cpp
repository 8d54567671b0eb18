// SPDX-License-Identifier: Apache-2.0
// Keys, geometry and the unit parsers.
#include "lib/core/fast_div.hpp"
#include "lib/core/pod_vector.hpp"
#include "../common/smaps.hpp"

#include <cxltier/error.hpp>
#include <cxltier/key.hpp>
#include <cxltier/tools/units.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <vector>

#include <sys/mman.h>

using namespace cxltier;

TEST(Geometry, CanonicalModelIsFiveMiB) {
  BlockGeometry g;
  EXPECT_EQ(g.bytes_per_token(), 327680u);
  EXPECT_EQ(g.bytes(), 5242880u);
  EXPECT_EQ(format_bytes(g.bytes()), "5.00 MiB");
}

TEST(Geometry, RejectsZeroAndOverflow) {
  BlockGeometry g;
  g.head_dim = 0;
  try {
    (void)g.bytes();
    FAIL() << "zero head_dim accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos);
  }
  BlockGeometry big{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 16, true};
  EXPECT_THROW((void)big.bytes(), Error);
  BlockGeometry latent{61, 1, 576, 2, 16, false};
  EXPECT_EQ(latent.bytes(), 61u * 576u * 2u * 16u);
}

TEST(Keys, SequenceKeysAreStableAndDistinct) {
  std::set<Key> seen;
  for (uint64_t s = 0; s < 100; ++s)
    for (uint64_t b = 0; b < 100; ++b) seen.insert(key_from_sequence(s, b));
  EXPECT_EQ(seen.size(), 10000u);
  EXPECT_EQ(key_from_sequence(7, 3), key_from_sequence(7, 3));
  EXPECT_NE(key_from_sequence(7, 3), key_from_sequence(3, 7));
}

TEST(Keys, ContentKeysChainOverThePrefix) {
  int32_t a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = b[i] = i;
  Key pa = key_from_tokens({}, a, 16), pb = key_from_tokens({}, b, 16);
  EXPECT_EQ(pa, pb);  // identical first blocks in two sequences share a key
  Key ca = key_from_tokens(pa, a, 16);
  b[3] = 99;
  Key pb2 = key_from_tokens({}, b, 16);
  EXPECT_NE(pa, pb2);
  EXPECT_NE(key_from_tokens(pb2, a, 16), ca);  // a different prefix changes every later key
  EXPECT_NE(key_from_tokens({}, a, 16), key_from_sequence(0, 0));
  EXPECT_EQ(Key({1, 2}).hex(), "00000000000000010000000000000002");
}

TEST(Units, Sizes) {
  EXPECT_EQ(parse_size("5MiB", "x"), 5242880u);
  EXPECT_EQ(parse_size("5 MiB", "x"), 5242880u);
  EXPECT_EQ(parse_size("4k", "x"), 4096u);
  EXPECT_EQ(parse_size("1.5GiB", "x"), 1610612736u);
  EXPECT_EQ(parse_size("2GB", "x"), 2000000000u);
  EXPECT_EQ(parse_size("123", "x"), 123u);
  for (const char *bad : {"", "-1", "5 XB", "GiB", "0.3B", "99999999999999999999", "1e3", "16EiB", "17179869184GiB"})
    EXPECT_THROW(parse_size(bad, "budget"), Error) << bad;
  try {
    parse_size("12 parsecs", "--budget");
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("--budget"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("12 parsecs"), std::string::npos);
  }
}

TEST(Units, NumbersAndLists) {
  EXPECT_DOUBLE_EQ(parse_double("0.05", "alpha"), 0.05);
  EXPECT_THROW(parse_double("nan", "alpha"), Error);
  EXPECT_THROW(parse_double("inf", "alpha"), Error);
  EXPECT_THROW(parse_double("0x1p3", "alpha"), Error);
  EXPECT_THROW(parse_double("1e999", "alpha"), Error);
  EXPECT_TRUE(parse_bool("Yes", "b"));
  EXPECT_FALSE(parse_bool("off", "b"));
  EXPECT_THROW(parse_bool("maybe", "b"), Error);
  auto l = parse_double_list("0.01, 0.05,0.1", "alpha");
  ASSERT_EQ(l.size(), 3u);
  EXPECT_DOUBLE_EQ(l[1], 0.05);
  EXPECT_THROW(parse_double_list("0.1,,0.2", "alpha"), Error);
  EXPECT_EQ(parse_size_list("1GiB,2GiB", "c")[1], 2147483648u);
  EXPECT_EQ(parse_u64("18446744073709551615", "n"), 18446744073709551615ull);
  EXPECT_THROW(parse_u64("18446744073709551616", "n"), Error);
  EXPECT_EQ(parse_i64("-5", "n"), -5);
}

// FastDivU32 (lib/core/fast_div.hpp) against the hardware divide: every divisor up to 4,096
// with the edges of the 32-bit range and random numerators, and random divisors.
TEST(FastDiv, QuotientIsTheDivideOnEdgesAndRandomValues) {
  std::mt19937_64 rng(7);
  auto check = [&](uint32_t d) {
    const cxltier::FastDivU32 f(d);
    const uint32_t edges[] = {0u, 1u, d - 1, d, d + 1, 2 * d - 1, UINT32_MAX - 1, UINT32_MAX, UINT32_MAX / d * d,
                              UINT32_MAX / d * d - 1};
    for (uint32_t n : edges) ASSERT_EQ(f.quotient(n), n / d) << n << " / " << d;
    for (int i = 0; i < 64; ++i) {
      const uint32_t n = static_cast<uint32_t>(rng());
      ASSERT_EQ(f.quotient(n), n / d) << n << " / " << d;
    }
  };
  for (uint32_t d = 1; d <= 4096; ++d) check(d);
  for (int i = 0; i < 20000; ++i) check(1 + static_cast<uint32_t>(rng() % UINT32_MAX));
  check(UINT32_MAX);
}

// PodVector against std::vector through growth into a mapping of its own (where mremap moves pages
// instead of copying): the same elements in the same places, aligned to a cache line, and a move
// leaves the source empty.
TEST(PodVector, MatchesAVectorThroughGrowthAndMoves) {
  struct Rec {
    uint64_t a;
    double b;
    uint32_t c;
  };
  PodVector<Rec> pod;
  std::vector<Rec> ref;
  std::mt19937_64 rng(5);
  const Rec fill{7, 0.5, 9};
  while (ref.size() < (3u << 20)) {  // 72 MiB of 24-byte records: many doublings by mremap
    if (rng() % 3 == 0) {
      const size_t n = ref.size() + 1 + rng() % 100000;
      pod.resize(n, fill);
      ref.resize(n, fill);
    } else {
      const Rec r{rng(), static_cast<double>(rng() % 1000), static_cast<uint32_t>(rng())};
      pod.push_back(r);
      ref.push_back(r);
    }
    pod.emplace_back() = Rec{1, 2.0, 3};
    ref.push_back(Rec{1, 2.0, 3});
    // Elements start on a cache line whatever offset realloc's block has (16 bytes into a page
    // once it is mapped), and the elements so far survive a move to another offset.
    ASSERT_EQ(reinterpret_cast<uintptr_t>(pod.data()) % PodVector<Rec>::kAlign, 0u) << pod.size();
    ASSERT_EQ(pod[pod.size() / 2].a, ref[ref.size() / 2].a) << pod.size();
  }
  ASSERT_EQ(pod.size(), ref.size());
  EXPECT_GE(pod.capacity(), pod.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(pod[i].a, ref[i].a) << i;
    ASSERT_EQ(pod[i].b, ref[i].b) << i;
    ASSERT_EQ(pod[i].c, ref[i].c) << i;
  }
  PodVector<Rec> moved(std::move(pod));
  EXPECT_EQ(moved.size(), ref.size());
  EXPECT_EQ(pod.size(), 0u);  // NOLINT(bugprone-use-after-move): a moved-from PodVector is empty
  EXPECT_EQ(pod.data(), nullptr);
  pod = std::move(moved);
  EXPECT_EQ(pod.size(), ref.size());
  EXPECT_EQ(pod[ref.size() - 1].a, ref.back().a);
  size_t n = 0;
  for (const Rec &r : pod) n += r.c == 3;
  EXPECT_EQ(n, static_cast<size_t>(std::count_if(ref.begin(), ref.end(), [](const Rec &r) { return r.c == 3; })));
  pod.clear();
  EXPECT_TRUE(pod.empty());
}

// The huge-page advice follows the vector's setting: a vector that asks (the default) has its
// range marked MADV_HUGEPAGE (smaps VmFlags "hg") once it is past 4 MiB; one that does not is
// never marked, and a move carries the setting.
// Whether the base page at p is resident (mincore).
static bool page_resident(const void *p) {
  const size_t bytes = base_page_bytes();
  const uintptr_t page = reinterpret_cast<uintptr_t>(p) & ~(uintptr_t{bytes} - 1);
  unsigned char v = 0;
  EXPECT_EQ(mincore(reinterpret_cast<void *>(page), bytes, &v), 0);
  return (v & 1) != 0;
}

TEST(PodVector, PopulatesPagesAheadOfItsElementsAndNoFurther) {
#ifdef MADV_POPULATE_WRITE
  {  // the kernel must know the call (Linux 5.14) for there to be anything to see
    const size_t page = base_page_bytes();
    void *probe = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(probe, MAP_FAILED);
    const int rc = madvise(probe, page, MADV_POPULATE_WRITE);
    munmap(probe, page);
    if (rc != 0) GTEST_SKIP() << "this kernel does not populate on request (MADV_POPULATE_WRITE)";
  }
  PodVector<uint64_t> v;
  v.set_huge_pages(false);  // base pages, so that residency is seen page by page
  const size_t n = (size_t{16} << 20) / sizeof(uint64_t) + 1;  // 16 MiB and one element: mapped
  for (size_t i = 0; i < n; ++i) v.push_back(i);
  ASSERT_GE(v.capacity() * sizeof(uint64_t), size_t{32} << 20);
  const char *end = reinterpret_cast<const char *>(v.data() + v.size());
  // Populated ahead: the next max(1 MiB, an eighth of the elements) = 2 MiB, never written yet.
  EXPECT_TRUE(page_resident(end + (size_t{1} << 20)));
  EXPECT_TRUE(page_resident(end + (size_t{2} << 20) - 2 * base_page_bytes()));
  // A large reservation with little in it: its first 1 MiB of elements is left to fault, and
  // only once a push passes it are the next pages populated.
  PodVector<uint64_t> w;
  w.set_huge_pages(false);
  w.reserve((size_t{32} << 20) / sizeof(uint64_t));
  const size_t first = (size_t{1} << 20) / sizeof(uint64_t);
  for (size_t i = 0; i < first; ++i) w.push_back(i);
  const char *wend = reinterpret_cast<const char *>(w.data() + w.size());
  w.push_back(first);  // the first push past 1 MiB: the next 1 MiB is populated
  EXPECT_TRUE(page_resident(wend + (size_t{1} << 19)));
  // Not past that: the rest of the capacity stays untouched (the array is in a mapping of its
  // own, which glibc's MALLOC_PERTURB_ does not fill).
  EXPECT_FALSE(page_resident(end + (size_t{6} << 20)));
  EXPECT_FALSE(page_resident(end + (size_t{12} << 20)));
  EXPECT_FALSE(page_resident(wend + (size_t{4} << 20)));
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(v[i], i);
#else
  GTEST_SKIP() << "built without MADV_POPULATE_WRITE";
#endif
}

// A large PodVector grows with mremap, which can only grow a range that is one mapping: the
// huge-page advice must cover the whole of it, not split it (as advice on only its 2 MiB-aligned
// middle did, when each doubling past 4 MiB fell back to a copy of the whole array).
TEST(PodVector, StaysOneMappingThroughGrowthWithHugePages) {
  PodVector<uint64_t> v;
  const size_t n = (size_t{24} << 20) / sizeof(uint64_t);  // 24 MiB: grown to 32 MiB
  size_t checks = 0;
  auto check = [&](size_t at) {
    const auto [lo, hi] = cxlt_test::mapping_bounds(v.data());
    ASSERT_LE(lo, reinterpret_cast<uintptr_t>(v.data())) << at;
    ASSERT_GE(hi, reinterpret_cast<uintptr_t>(v.data() + v.capacity())) << "the array spans two mappings at " << at;
    ++checks;
  };
  for (size_t i = 0; i < n; ++i) {
    v.push_back(i);
    // After each doubling from 4 MiB on: the push that filled a power of two of elements.
    if ((i & (i + 1)) == 0 && i + 1 >= (size_t{1} << 19)) check(i);
  }
  check(n);
  EXPECT_EQ(checks, 4u);  // 4, 8 and 16 MiB full, and at the end, grown to 32 MiB
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(v[i], i);
}

// fix_address: the elements move once, into the room, keep their values, and stay at that
// address through growth (in malloc'd sizes and mapped ones alike) until the room is full,
// where growth throws and the array is as it was; a move carries the room.
TEST(PodVector, AFixedAddressHoldsThroughGrowthUntilTheRoomIsFull) {
  PodVector<uint64_t> v;
  for (uint64_t i = 0; i < 100; ++i) v.push_back(i);
  constexpr size_t kRoom = (size_t{8} << 20) / sizeof(uint64_t);  // 8 MiB
  v.fix_address(kRoom);
  EXPECT_TRUE(v.address_fixed());
  ASSERT_GE(v.room(), kRoom);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % (size_t{2} << 20), 0u) << "the room starts on a huge page";
  const uint64_t *const at = v.data();
  for (uint64_t i = 0; i < 100; ++i) ASSERT_EQ(v[i], i);
  EXPECT_THROW(v.fix_address(2 * kRoom), std::bad_alloc) << "once only";
  for (uint64_t i = 100; i < v.room(); ++i) {
    v.push_back(i);
    ASSERT_EQ(v.data(), at) << "moved at " << i;
  }
  EXPECT_THROW(v.push_back(0), std::bad_alloc);
  EXPECT_THROW(v.reserve(v.room() + 1), std::bad_alloc);
  EXPECT_EQ(v.size(), v.room());
  PodVector<uint64_t> w(std::move(v));
  EXPECT_EQ(w.data(), at);
  EXPECT_TRUE(w.address_fixed());
  for (size_t i = 0; i < w.size(); i += 4099) ASSERT_EQ(w[i], i);
  EXPECT_EQ(w.back(), w.size() - 1);
  PodVector<uint64_t> x;  // a move onto a vector with a room of its own: that room goes
  x.fix_address(1000);
  x.push_back(5);
  x = std::move(w);
  EXPECT_EQ(x.data(), at);
  EXPECT_TRUE(x.address_fixed());
  EXPECT_EQ(x[4099], 4099u);
  // resize within the room, then past it.
  PodVector<uint32_t> r;
  r.fix_address(1000);
  r.resize(r.room(), 7);
  EXPECT_EQ(r[r.room() - 1], 7u);
  EXPECT_THROW(r.resize(r.room() + 1), std::bad_alloc);
}

TEST(PodVector, HugePageAdviceFollowsTheSetting) {
  auto advised = [](const void *p) {
    const std::string flags = cxlt_test::smaps_field(p, "VmFlags");
    EXPECT_FALSE(flags.empty()) << "no smaps entry for the vector's pages";
    return (" " + flags + " ").find(" hg ") != std::string::npos;
  };
  constexpr size_t kElems = size_t{16} << 20 >> 3;  // 16 MiB of 8-byte elements: in a mapping
  PodVector<uint64_t> plain;
  plain.set_huge_pages(false);
  plain.resize(kElems, 1);
  EXPECT_FALSE(advised(plain.data() + kElems / 2));
  PodVector<uint64_t> moved(std::move(plain));
  moved.resize(2 * kElems, 2);  // grows after the move: still no advice
  EXPECT_FALSE(advised(moved.data() + kElems));
  EXPECT_EQ(moved[kElems - 1], 1u);
  EXPECT_EQ(moved[2 * kElems - 1], 2u);
#ifdef MADV_HUGEPAGE
  // Only where the kernel has transparent huge pages does madvise accept the advice.
  if (std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good()) {
    PodVector<uint64_t> huge;
    huge.resize(kElems, 3);
    EXPECT_TRUE(advised(huge.data() + kElems / 2));
  }
#endif
}
