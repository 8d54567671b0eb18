// SPDX-License-Identifier: Apache-2.0
// Huge pages where the system offers them: explicit 2 MiB pages when free, else THP, else
// 4 KiB, recorded in the extent flags. Each path is exercised where this machine allows it;
// the fallbacks always are.
#include "lib/memory/backend.hpp"
#include "tiers/hostmem.hpp"
#include "../common/smaps.hpp"

#include <cxltier/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

using namespace cxltier;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

using cxlt_test::smaps_field;

TierExtent map_and_touch(size_t bytes, HugePageMode mode) {
  TierExtent e;
  EXPECT_EQ(hostmem::map(bytes, mode, {}, &e), CXLT_OK) << backend_last_error();
  EXPECT_EQ(hostmem::populate(e.base, e.bytes), CXLT_OK) << backend_last_error();
  return e;
}

}  // namespace

TEST(HugePages, FourKiBWhenAsked) {
  TierExtent e = map_and_touch(4 * kMiB, HugePageMode::none);
  EXPECT_EQ(e.flags, CXLT_EXTENT_HOST);
  EXPECT_NE(smaps_field(e.base, "KernelPageSize").find("4 kB"), std::string::npos);
  std::memset(e.base, 0x5a, e.bytes);
  EXPECT_EQ(hostmem::unmap(e), CXLT_OK);
}

TEST(HugePages, TransparentWhereEnabled) {
  TierExtent e = map_and_touch(4 * kMiB, HugePageMode::thp);
  if (hostmem::thp_enabled()) {
    EXPECT_EQ(e.flags, CXLT_EXTENT_HOST | CXLT_EXTENT_THP);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(e.base) % hostmem::kHugePage2M, 0u);  // aligned for THP
    // Whether the kernel really backed it with huge pages depends on fragmentation: report it.
    std::cout << "[          ] THP extent AnonHugePages:" << smaps_field(e.base, "AnonHugePages") << "\n";
  } else {
    EXPECT_EQ(e.flags, CXLT_EXTENT_HOST);  // THP "never": the 4 KiB fallback, recorded honestly
  }
  std::memset(e.base, 0x5a, e.bytes);
  EXPECT_EQ(hostmem::unmap(e), CXLT_OK);
}

TEST(HugePages, ExplicitPagesWhenFree) {
  if (hostmem::free_huge_pages_2m() < 2) {
    GTEST_SKIP() << "no free 2 MiB hugetlb pages (vm.nr_hugepages is 0 here); the fallback test covers this machine";
  }
  TierExtent e = map_and_touch(4 * kMiB, HugePageMode::hugetlb);
  // Pages may be taken by another process between the check and the mmap: then THP is right.
  EXPECT_TRUE(e.flags & (CXLT_EXTENT_HUGETLB | CXLT_EXTENT_THP)) << e.flags;
  if (e.flags & CXLT_EXTENT_HUGETLB) {
    EXPECT_NE(smaps_field(e.base, "KernelPageSize").find("2048 kB"), std::string::npos);
  }
  std::memset(e.base, 0x5a, e.bytes);
  EXPECT_EQ(hostmem::unmap(e), CXLT_OK);
}

TEST(HugePages, FallbackWhenNoExplicitPagesAreFree) {
  if (hostmem::free_huge_pages_2m() >= 2) GTEST_SKIP() << "2 MiB hugetlb pages are free here; ExplicitPagesWhenFree covers it";
  TierExtent e = map_and_touch(4 * kMiB, HugePageMode::hugetlb);
  EXPECT_FALSE(e.flags & CXLT_EXTENT_HUGETLB);
  EXPECT_EQ(e.flags, hostmem::thp_enabled() ? (CXLT_EXTENT_HOST | CXLT_EXTENT_THP) : CXLT_EXTENT_HOST);
  std::memset(e.base, 0x5a, e.bytes);
  EXPECT_EQ(hostmem::unmap(e), CXLT_OK);
}

TEST(HugePages, ExplicitNeedsAWholeNumberOfHugePages) {
  // 5 MiB is not a multiple of 2 MiB: never hugetlb, whatever is free.
  TierExtent e = map_and_touch(5 * kMiB, HugePageMode::hugetlb);
  EXPECT_FALSE(e.flags & CXLT_EXTENT_HUGETLB);
  EXPECT_EQ(hostmem::unmap(e), CXLT_OK);
}

TEST(HugePages, BackendsRecordTheirChoiceInExtentFlags) {
  for (HugePageMode mode : {HugePageMode::none, HugePageMode::thp, HugePageMode::hugetlb}) {
    TierBackendParams p;
    p.huge_pages = mode;
    TierBackend b("emulated", p);
    TierExtent e = b.alloc_extent(4 * kMiB);
    if (mode == HugePageMode::none) {
      EXPECT_EQ(e.flags & (CXLT_EXTENT_THP | CXLT_EXTENT_HUGETLB), 0u);
    }
    if (mode == HugePageMode::thp) {
      EXPECT_EQ(e.flags & CXLT_EXTENT_HUGETLB, 0u);
    }
    if (mode != HugePageMode::none && hostmem::thp_enabled()) {
      EXPECT_NE(e.flags & (CXLT_EXTENT_THP | CXLT_EXTENT_HUGETLB), 0u);
    }
    b.free_extent(e);
  }
}

TEST(HostMem, ZeroBytesRefused) {
  TierExtent e;
  EXPECT_EQ(hostmem::map(0, HugePageMode::none, {}, &e), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hostmem::nodes_string({}), "(none)");
  EXPECT_EQ(hostmem::nodes_string({0, 2}), "0,2");
}
