// SPDX-License-Identifier: Apache-2.0
// Every tier backend through the ops table: extents of real memory (or none, for null), bytes
// that survive, capacity accounting, descriptions, the copy rule, and several threads calling
// at once (backends claim thread safety).
#include "lib/memory/backend.hpp"
#include "lib/memory/copy.hpp"
#include "tiers_test_util.hpp"

#include <cxltier/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

using namespace cxltier;
using namespace cxltier::test;

namespace {

class BackendTest : public ::testing::TestWithParam<BackendCase> {};

constexpr size_t kMiB = size_t{1} << 20;

}  // namespace

TEST_P(BackendTest, ExtentHoldsBytesAndIsAccounted) {
  const BackendCase &c = GetParam();
  TierBackend b(c.backend, c.params);
  EXPECT_EQ(b.capacity().allocated_bytes, 0u);
  TierExtent e = b.alloc_extent(4 * kMiB);
  EXPECT_EQ(e.bytes, 4 * kMiB);
  EXPECT_EQ(b.capacity().allocated_bytes, 4 * kMiB);
  if (c.has_bytes) {
    ASSERT_NE(e.base, nullptr);
    EXPECT_TRUE(e.flags & CXLT_EXTENT_HOST);
    fill_pattern(e.base, e.bytes, 7);
    EXPECT_EQ(check_pattern(e.base, e.bytes, 7), SIZE_MAX);
  } else {
    EXPECT_EQ(e.base, nullptr);
    EXPECT_EQ(e.flags, 0u);
  }
  b.free_extent(e);
  EXPECT_EQ(b.capacity().allocated_bytes, 0u);
}

TEST_P(BackendTest, CapacityAndDescription) {
  const BackendCase &c = GetParam();
  TierBackend b(c.backend, c.params);
  TierCapacity cap = b.capacity();
  EXPECT_GT(cap.total_bytes, 0u);
  EXPECT_LE(cap.free_bytes, cap.total_bytes);
  std::string d = b.describe();
  EXPECT_FALSE(d.empty());
  if (c.backend == "emulated" || (c.backend == "faulty" && c.params.option(CXLT_OPTION_INNER_BACKEND) &&
                                    *c.params.option(CXLT_OPTION_INNER_BACKEND) == "emulated")) {
    EXPECT_NE(d.find("emulated"), std::string::npos) << d;
  }
}

TEST_P(BackendTest, ZeroByteExtentIsRefused) {
  const BackendCase &c = GetParam();
  TierBackend b(c.backend, c.params);
  TierExtent e;
  EXPECT_EQ(b.try_alloc_extent(0, &e), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_FALSE(backend_last_error().empty());
  EXPECT_EQ(b.capacity().allocated_bytes, 0u);
}

// The copy rule of tier_ops.hpp, as the migration engine will run it, from this backend into
// a plain emulated tier and back.
TEST_P(BackendTest, CopyRuleMovesBytesBothWays) {
  const BackendCase &c = GetParam();
  TierBackend b(c.backend, c.params);
  TierBackendParams hp;
  TierBackend host("emulated", hp);
  const size_t n = 2 * kMiB + 123;
  TierExtent be = b.alloc_extent(4 * kMiB), he = host.alloc_extent(4 * kMiB);
  auto copy = [](TierBackend &dst_b, void *dst, TierBackend &src_b, const void *src, size_t bytes) {
    cxlt_result_t r = dst_b.ops().ext_copy_in(dst_b.state(), dst, src, bytes, &src_b.ops());
    if (r == CXLT_ERROR_NOT_SUPPORTED) r = src_b.ops().ext_copy_out(src_b.state(), dst, src, bytes, &dst_b.ops());
    if (r == CXLT_ERROR_NOT_SUPPORTED) {
      copy_block(CopyKernel::nt, dst, src, bytes);
      r = CXLT_OK;
    }
    return r;
  };
  fill_pattern(he.base, n, 11);
  ASSERT_EQ(copy(b, be.base, host, he.base, n), CXLT_OK);
  std::memset(he.base, 0, n);
  ASSERT_EQ(copy(host, he.base, b, be.base, n), CXLT_OK);
  if (c.has_bytes) {
    EXPECT_EQ(check_pattern(he.base, n, 11), SIZE_MAX);
  } else {
    // Out of null: the destination is left as it was (zeros here).
    EXPECT_EQ(static_cast<unsigned char *>(he.base)[0], 0);
    EXPECT_EQ(static_cast<unsigned char *>(he.base)[n - 1], 0);
  }
  b.free_extent(be);
  host.free_extent(he);
}

TEST_P(BackendTest, ThreadsAllocateWriteAndFreeAtOnce) {
  const BackendCase &c = GetParam();
  TierBackend b(c.backend, c.params);
  constexpr int kThreads = 4, kRounds = 12;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        TierExtent e;
        if (b.try_alloc_extent(2 * kMiB, &e) != CXLT_OK) {
          ++errors;
          continue;
        }
        uint64_t tag = static_cast<uint64_t>(t * 1000 + r);
        if (c.has_bytes) {
          fill_pattern(e.base, 64 * 1024, tag);
          if (check_pattern(e.base, 64 * 1024, tag) != SIZE_MAX) ++errors;
        }
        if (b.try_free_extent(e) != CXLT_OK) ++errors;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(b.capacity().allocated_bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendTest, ::testing::ValuesIn(backend_cases()),
                         [](const ::testing::TestParamInfo<BackendCase> &pinfo) { return pinfo.param.label; });

// --- Backend-specific behaviour ------------------------------------------------------------

TEST(NullBackend, HasNoBytes) {
  TierBackendParams p;
  TierBackend b("null", p);
  TierExtent e = b.alloc_extent(1ull << 40);  // a terabyte of nothing
  EXPECT_EQ(e.base, nullptr);
  EXPECT_EQ(e.bytes, 1ull << 40);
  EXPECT_EQ(b.capacity().total_bytes, UINT64_MAX);
  EXPECT_EQ(b.ops().ext_copy_in(b.state(), nullptr, nullptr, 5 * kMiB, nullptr), CXLT_OK);
  EXPECT_EQ(b.ops().ext_verify_placement(b.state(), nullptr, 1), CXLT_ERROR_NOT_SUPPORTED);
  TierExtent fake{reinterpret_cast<void *>(0x1000), 4096, 0};
  EXPECT_EQ(b.try_free_extent(fake), CXLT_ERROR_INVALID_ARGUMENT);
  b.free_extent(e);
  p.capacity_bytes = 1ull << 30;
  TierBackend declared("null", p);
  EXPECT_EQ(declared.capacity().total_bytes, 1ull << 30);
}

TEST(EmulatedBackend, UnpacedCopiesAreLeftToTheRuntime) {
  TierBackendParams p;
  TierBackend b("emulated", p);
  char a[16] = "abc", d[16] = {};
  EXPECT_EQ(b.ops().ext_copy_in(b.state(), d, a, sizeof a, nullptr), CXLT_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(d[0], 0);  // NOT_SUPPORTED touches nothing
  EXPECT_NE(b.describe().find("emulated"), std::string::npos);
  EXPECT_EQ(b.describe().find("paced"), std::string::npos);
}

// A lower bound only (a paced copy can never be faster than its bandwidth); nothing here can
// fail because the machine is slow.
TEST(EmulatedBackend, PacedCopyTakesAtLeastBytesOverBandwidth) {
  TierBackendParams p;
  p.set_option("pace_mib_s", "100");  // 1 MiB takes >= 10 ms
  TierBackend b("emulated", p);
  EXPECT_NE(b.describe().find("paced to 100 MiB/s"), std::string::npos) << b.describe();
  TierExtent e = b.alloc_extent(2 * kMiB);
  std::vector<unsigned char> src(kMiB);
  fill_pattern(src.data(), src.size(), 3);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(b.ops().ext_copy_in(b.state(), static_cast<char *>(e.base) + i * kMiB, src.data(), kMiB, nullptr), CXLT_OK);
  }
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(elapsed, std::chrono::milliseconds(20));
  EXPECT_EQ(check_pattern(e.base, kMiB, 3), SIZE_MAX);
  EXPECT_EQ(check_pattern(static_cast<char *>(e.base) + kMiB, kMiB, 3), SIZE_MAX);
  b.free_extent(e);
  p.set_option("pace_mib_s", "-1");
  EXPECT_THROW(TierBackend("emulated", p), Error);
}

TEST(EmulatedBackend, DeclaredCapacityIsCappedByHostMemory) {
  TierBackendParams p;
  p.capacity_bytes = 1ull << 30;
  TierBackend b("emulated", p);
  EXPECT_EQ(b.capacity().total_bytes, 1ull << 30);
  p.capacity_bytes = 1ull << 60;  // an exabyte of "CXL" still only has this machine's memory
  TierBackend big("emulated", p);
  EXPECT_LT(big.capacity().total_bytes, 1ull << 60);
}
