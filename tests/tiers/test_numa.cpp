// SPDX-License-Identifier: Apache-2.0
// The numa backend's placement: every page verified on the tier's node (on every node this
// machine has, so the multi-node QEMU guest exercises real placement), a node the machine
// lacks refused at initialize (never a fallback to node 0), and a placement failure named
// page by page.
#include "lib/memory/backend.hpp"
#include "tiers/hostmem.hpp"
#include "tiers_test_util.hpp"

#include <cxltier/error.hpp>

#include <gtest/gtest.h>
#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>

#include <string>
#include <vector>

using namespace cxltier;
using namespace cxltier::test;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool contains(const std::string &hay, const std::string &needle) { return hay.find(needle) != std::string::npos; }

std::vector<unsigned> memory_nodes() {
  std::vector<unsigned> out;
  if (numa_available() < 0) return out;
  struct bitmask *allowed = numa_get_mems_allowed();
  for (int n = 0; n <= numa_max_node(); ++n) {
    long long f = 0;
    if (numa_node_size64(n, &f) > 0 && numa_bitmask_isbitset(allowed, static_cast<unsigned>(n))) out.push_back(static_cast<unsigned>(n));
  }
  numa_bitmask_free(allowed);
  return out;
}

int node_of(const void *p) {
  void *page = const_cast<void *>(p);
  int status = -1;
  if (move_pages(0, 1, &page, nullptr, &status, 0) != 0) return -1000;
  return status;
}

}  // namespace

TEST(NumaBackend, EveryPageOnEveryMemoryNodeIsVerified) {
  auto nodes = memory_nodes();
  if (nodes.empty()) GTEST_SKIP() << "libnuma reports no usable NUMA node with memory";
  for (unsigned node : nodes) {
    TierBackendParams p;
    p.tier_name = "node" + std::to_string(node);
    p.numa_nodes = {node};
    TierBackend b("numa", p);
    EXPECT_TRUE(contains(b.describe(), "MPOL_BIND")) << b.describe();
    TierExtent e = b.alloc_extent(6 * kMiB);
    EXPECT_TRUE(e.flags & CXLT_EXTENT_PLACED);
    // Independently of the backend's own check: sample pages through move_pages here.
    for (size_t off = 0; off < e.bytes; off += kMiB / 2) {
      EXPECT_EQ(node_of(static_cast<char *>(e.base) + off), static_cast<int>(node)) << "offset " << off;
    }
    b.verify_placement(e.base, e.bytes);  // throws on any misplaced page
    b.free_extent(e);
    TierCapacity cap = b.capacity();
    EXPECT_GT(cap.total_bytes, 0u);
    EXPECT_EQ(cap.allocated_bytes, 0u);
  }
}

TEST(NumaBackend, AllNodesTogetherBindToTheirUnion) {
  auto nodes = memory_nodes();
  if (nodes.size() < 2) GTEST_SKIP() << "one NUMA node with memory: a multi-node bind needs two (the QEMU guest has them)";
  TierBackendParams p;
  p.numa_nodes = nodes;
  TierBackend b("numa", p);
  TierExtent e = b.alloc_extent(8 * kMiB);
  EXPECT_TRUE(e.flags & CXLT_EXTENT_PLACED);
  b.free_extent(e);
}

TEST(NumaBackend, MissingNodeIsRefusedNotReplacedByNodeZero) {
  if (numa_available() < 0) GTEST_SKIP() << "no NUMA support in this kernel";
  const unsigned missing = static_cast<unsigned>(numa_max_node()) + 1;  // node 1 on a one-node host
  TierBackendParams p;
  p.tier_name = "cxl";
  p.numa_nodes = {missing};
  try {
    TierBackend b("numa", p);
    FAIL() << "numa backend accepted node " << missing << ", which this machine lacks";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_BACKEND);
    EXPECT_TRUE(contains(e.what(), "NUMA node " + std::to_string(missing) + " does not exist")) << e.what();
    EXPECT_TRUE(contains(e.what(), "cxl")) << e.what();  // names the tier
  }
  // A list that includes a good node and a missing one is refused too (no partial fallback).
  auto nodes = memory_nodes();
  if (!nodes.empty()) {
    p.numa_nodes = {nodes[0], missing};
    EXPECT_THROW(TierBackend("numa", p), Error);
  }
  p.numa_nodes = {};
  try {
    TierBackend b("numa", p);
    FAIL() << "numa backend accepted an empty node list";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_INVALID_ARGUMENT);
  }
}

// Why the backend does not use numa_alloc_onnode: asked for the missing node it still hands
// out memory (on node 0 here). If a future libnuma refuses instead, this documents that.
TEST(NumaBackend, NumaAllocOnnodeWouldHaveFallenBack) {
  if (numa_available() < 0) GTEST_SKIP() << "no NUMA support in this kernel";
  const int missing = numa_max_node() + 1;
  void *p = numa_alloc_onnode(kMiB, missing);
  if (p == nullptr) GTEST_SKIP() << "this libnuma refuses a missing node (no fallback to show)";
  std::memset(p, 1, kMiB);
  EXPECT_NE(node_of(p), missing);  // the memory is somewhere else: the silent fallback
  numa_free(p, kMiB);
}

TEST(NumaBackend, PlacementFailureNamesThePage) {
  auto nodes = memory_nodes();
  if (nodes.empty()) GTEST_SKIP() << "no usable NUMA node";
  TierBackendParams p;
  p.numa_nodes = {nodes[0]};
  TierBackend b("numa", p);
  // Pages never touched have no node: the check must say which one and why.
  const size_t ps = hostmem::page_size();
  void *raw = mmap(nullptr, 8 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(raw, MAP_FAILED);
  std::memset(raw, 1, 3 * ps);  // pages 0-2 present, page 3 not
  try {
    b.verify_placement(raw, 8 * ps);
    FAIL() << "an untouched page passed placement verification";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_BACKEND);
    EXPECT_TRUE(contains(e.what(), "page 3 of 8")) << e.what();
    EXPECT_TRUE(contains(e.what(), "not present")) << e.what();
  }
  // And a page on a node outside the tier's list is named with its node.
  if (nodes.size() >= 2) {
    TierBackendParams q;
    q.numa_nodes = {nodes[1]};
    TierBackend other("numa", q);
    try {
      other.verify_placement(raw, 3 * ps);
      FAIL() << "a page on node " << node_of(raw) << " passed as node " << nodes[1];
    } catch (const Error &e) {
      EXPECT_TRUE(contains(e.what(), "is on NUMA node")) << e.what();
    }
  }
  munmap(raw, 8 * ps);
}

TEST(NumaBackend, VerificationCanBeTurnedOff) {
  auto nodes = memory_nodes();
  if (nodes.empty()) GTEST_SKIP() << "no usable NUMA node";
  TierBackendParams p;
  p.numa_nodes = {nodes[0]};
  p.verify_placement = false;
  TierBackend b("numa", p);
  TierExtent e = b.alloc_extent(2 * kMiB);
  EXPECT_FALSE(e.flags & CXLT_EXTENT_PLACED);
  EXPECT_EQ(node_of(e.base), static_cast<int>(nodes[0]));  // still bound, just not checked
  b.free_extent(e);
}

TEST(NumaBackend, ExplicitHugePagesAreBoundAndVerifiedToo) {
  auto nodes = memory_nodes();
  if (nodes.empty()) GTEST_SKIP() << "no usable NUMA node";
  if (hostmem::free_huge_pages_2m(static_cast<int>(nodes[0])) < 2) {
    GTEST_SKIP() << "no free 2 MiB hugetlb pages on node " << nodes[0] << " (vm.nr_hugepages is 0 here)";
  }
  TierBackendParams p;
  p.numa_nodes = {nodes[0]};
  TierBackend b("numa", p);
  TierExtent e = b.alloc_extent(4 * kMiB);
  EXPECT_EQ(e.flags, CXLT_EXTENT_HOST | CXLT_EXTENT_HUGETLB | CXLT_EXTENT_PLACED);
  EXPECT_EQ(node_of(e.base), static_cast<int>(nodes[0]));
  b.free_extent(e);
}
