// SPDX-License-Identifier: Apache-2.0
// memkind kinds. Built twice (tests/tiers/meson.build): as test_tiers_memkind, without the
// MEMKIND_*_NODES variables, where HBW and DAX_KMEM must be refused with an explanation on a
// host without such memory; and as test_tiers_memkind_env, started by meson with
// MEMKIND_HBW_NODES and MEMKIND_DAX_KMEM_NODES set to the first memory node, where every kind
// works and its pages are verified on that node. memkind reads those variables once, at its
// first use of a kind, so they must be in the environment before the process starts.
#include "lib/memory/backend.hpp"
#include "lib/memory/pool.hpp"
#include "tiers_test_util.hpp"

#include <cxltier/error.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

using namespace cxltier;
using namespace cxltier::test;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool env_set(const char *v) { return std::getenv(v) != nullptr && *std::getenv(v) != '\0'; }

TierBackendParams kind_params(const std::string &kind) {
  TierBackendParams p;
  p.set_option("memkind_kind", kind);
  p.tier_name = "mk-" + kind;
  return p;
}

void exercise(TierBackend &b, bool expect_placed) {
  TierExtent e = b.alloc_extent(4 * kMiB);
  EXPECT_TRUE(e.flags & CXLT_EXTENT_HOST);
  EXPECT_EQ(static_cast<bool>(e.flags & CXLT_EXTENT_PLACED), expect_placed) << b.describe();
  fill_pattern(e.base, e.bytes, 5);
  EXPECT_EQ(check_pattern(e.base, e.bytes, 5), SIZE_MAX);
  b.free_extent(e);
  // And under a pool.
  BlockPool pool(b, {"mk", 256 * 1024, 40 * 256 * 1024, 8, false});
  std::vector<SlotId> slots(40);
  for (auto &s : slots) ASSERT_EQ(pool.allocate(&s), CXLT_OK) << backend_last_error();
  for (SlotId s : slots) fill_pattern(pool.address(s), 256 * 1024, s);
  for (SlotId s : slots) EXPECT_EQ(check_pattern(pool.address(s), 256 * 1024, s), SIZE_MAX);
  std::string why;
  EXPECT_TRUE(pool.is_valid(&why)) << why;
}

}  // namespace

TEST(Memkind, RegularKindWorks) {
  TierBackend b("memkind", kind_params("regular"));
  EXPECT_NE(b.describe().find("discontinued"), std::string::npos) << b.describe();
  exercise(b, /*expect_placed=*/false);  // regular's nodes are memkind's choice: not verified
  int node = first_memory_node();
  if (node >= 0) {
    TierBackendParams p = kind_params("regular");
    p.numa_nodes = {static_cast<unsigned>(node)};
    TierBackend placed("memkind", p);
    exercise(placed, /*expect_placed=*/true);
  }
}

TEST(Memkind, UnknownKindIsNamed) {
  try {
    TierBackend b("memkind", kind_params("optane-magic"));
    FAIL() << "accepted an unknown kind";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("optane-magic"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dax_kmem"), std::string::npos) << e.what();  // lists the known ones
  }
}

TEST(Memkind, HbwAndDaxKmemWithoutEnvAreExplained) {
  if (env_set("MEMKIND_HBW_NODES") || env_set("MEMKIND_DAX_KMEM_NODES")) {
    GTEST_SKIP() << "MEMKIND_*_NODES set: the env test covers this process";
  }
  for (const char *kind : {"hbw", "dax_kmem"}) {
    try {
      TierBackend b("memkind", kind_params(kind));
      std::cout << "[          ] this machine has real " << kind << " memory: " << b.describe() << "\n";
    } catch (const Error &e) {
      EXPECT_EQ(e.code(), CXLT_ERROR_NOT_SUPPORTED);
      const std::string var = std::string(kind) == "hbw" ? "MEMKIND_HBW_NODES" : "MEMKIND_DAX_KMEM_NODES";
      EXPECT_NE(std::string(e.what()).find(var), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("not available"), std::string::npos) << e.what();
    }
  }
}

TEST(MemkindEnv, EveryKindWorksOnTheNodesTheEnvironmentNames) {
  if (!env_set("MEMKIND_HBW_NODES") || !env_set("MEMKIND_DAX_KMEM_NODES")) {
    GTEST_SKIP() << "run by meson as test_tiers_memkind_env, with MEMKIND_HBW_NODES and MEMKIND_DAX_KMEM_NODES set";
  }
  for (const char *kind : {"hbw", "hbw_all", "dax_kmem", "dax_kmem_all"}) {
    SCOPED_TRACE(kind);
    TierBackend b("memkind", kind_params(kind));
    exercise(b, /*expect_placed=*/true);  // nodes from the environment: verified page by page
  }
  for (const char *kind : {"hbw_preferred", "dax_kmem_preferred"}) {
    SCOPED_TRACE(kind);
    TierBackend b("memkind", kind_params(kind));
    EXPECT_NE(b.describe().find("not verified"), std::string::npos) << b.describe();
    exercise(b, /*expect_placed=*/false);  // preferred may fall back by design
  }
}
