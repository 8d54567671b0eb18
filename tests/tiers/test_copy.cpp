// SPDX-License-Identifier: Apache-2.0
// Copy kernels: every kernel this CPU has copies every size and alignment exactly, without
// writing a byte outside the destination; names parse; dispatch resolves.
#include "lib/memory/copy.hpp"
#include "tiers_test_util.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

using namespace cxltier;
using namespace cxltier::test;

namespace {

class CopyKernelTest : public ::testing::TestWithParam<CopyKernel> {};

// Copy n bytes from src+so to dst+dof inside guarded buffers and check everything.
void check_copy(CopyKernel k, size_t n, size_t so, size_t dof) {
  constexpr size_t kGuard = 64;
  std::vector<unsigned char> src(n + so + kGuard), dst(n + dof + 2 * kGuard, 0xEE);
  fill_pattern(src.data() + so, n, n * 131 + so);
  unsigned char *d = dst.data() + kGuard + dof;
  copy_block(k, d, src.data() + so, n);
  ASSERT_EQ(check_pattern(d, n, n * 131 + so), SIZE_MAX)
      << copy_kernel_name(k) << " n=" << n << " src+" << so << " dst+" << dof;
  for (size_t i = 0; i < kGuard + dof; ++i) ASSERT_EQ(dst[i], 0xEE) << "wrote before dst, n=" << n;
  for (size_t i = kGuard + dof + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "wrote after dst, n=" << n;
}

}  // namespace

TEST_P(CopyKernelTest, EverySizeAndAlignment) {
  CopyKernel k = GetParam();
  for (size_t n : {0, 1, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256, 257, 300, 1000, 4095, 4096, 4097, 65536 + 13}) {
    for (size_t so : {0, 1, 3, 8, 17}) {
      for (size_t dof : {0, 1, 5, 16, 31}) check_copy(k, n, so, dof);
    }
  }
}

TEST_P(CopyKernelTest, FiveMiBBlocks) {
  CopyKernel k = GetParam();
  for (size_t dof : {0, 7}) check_copy(k, 5u << 20, 3, dof);
  check_copy(k, (5u << 20) + 77, 0, 0);
}

TEST_P(CopyKernelTest, ThreadsCopyDisjointBlocks) {
  CopyKernel k = GetParam();
  constexpr int kThreads = 4;
  constexpr size_t n = 1u << 20;
  std::vector<std::vector<unsigned char>> src(kThreads, std::vector<unsigned char>(n)), dst = src;
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; ++t) {
    fill_pattern(src[t].data(), n, t);
    th.emplace_back([&, t] {
      for (int r = 0; r < 5; ++r) copy_block(k, dst[t].data(), src[t].data(), n);
    });
  }
  for (auto &x : th) x.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(check_pattern(dst[t].data(), n, t), SIZE_MAX);
}

INSTANTIATE_TEST_SUITE_P(Available, CopyKernelTest, ::testing::ValuesIn([] {
                           auto v = available_copy_kernels();
                           v.push_back(CopyKernel::nt);
                           return v;
                         }()),
                         [](const ::testing::TestParamInfo<CopyKernel> &pinfo) {
                           std::string s = copy_kernel_name(pinfo.param);
                           for (char &ch : s) ch = ch == '-' ? '_' : ch;
                           return s;
                         });

TEST(CopyKernels, NamesAndDispatch) {
  for (CopyKernel k : {CopyKernel::memcpy, CopyKernel::nt, CopyKernel::nt_avx2, CopyKernel::nt_sse2, CopyKernel::nt_scalar}) {
    auto parsed = parse_copy_kernel(copy_kernel_name(k));
    ASSERT_TRUE(parsed.has_value()) << copy_kernel_name(k);
    EXPECT_EQ(*parsed, k);
    EXPECT_EQ(copy_kernel_fn(k) != nullptr, copy_kernel_available(k));
  }
  EXPECT_FALSE(parse_copy_kernel("nt-avx9000").has_value());
  EXPECT_TRUE(copy_kernel_available(CopyKernel::memcpy));
  EXPECT_TRUE(copy_kernel_available(CopyKernel::nt));
  CopyKernel best = resolve_copy_kernel(CopyKernel::nt);
  EXPECT_NE(best, CopyKernel::nt);
  EXPECT_TRUE(copy_kernel_available(best));
#if defined(__x86_64__)
  EXPECT_EQ(best, __builtin_cpu_supports("avx2") ? CopyKernel::nt_avx2 : CopyKernel::nt_sse2);
#endif
  auto avail = available_copy_kernels();
  ASSERT_FALSE(avail.empty());
  EXPECT_EQ(avail.front(), CopyKernel::memcpy);
}
