// SPDX-License-Identifier: Apache-2.0
// Shared by the tiers tests: the list of backend configurations every battery runs over, and
// helpers to fill and check memory with a pattern that differs per slot and per byte.
#pragma once

#include "lib/memory/tier_ops.hpp"
#include "tiers/faulty/faulty.hpp"

#include "cxlt_config.h"

#include <numa.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace cxltier::test {

struct BackendCase {
  std::string label;    // gtest parameter name
  std::string backend;  // registry name
  TierBackendParams params;
  bool has_bytes = true;  // false for null
};
// gtest prints parameters with this (instead of a byte dump).
inline void PrintTo(const BackendCase &c, std::ostream *os) { *os << c.label; }

// The lowest NUMA node with memory that this process may use (0 on most machines), or -1.
inline int first_memory_node() {
  if (numa_available() < 0) return -1;
  struct bitmask *allowed = numa_get_mems_allowed();
  int found = -1;
  for (int n = 0; n <= numa_max_node() && found < 0; ++n) {
    long long free_bytes = 0;
    if (numa_node_size64(n, &free_bytes) > 0 && (!allowed || numa_bitmask_isbitset(allowed, static_cast<unsigned>(n)))) found = n;
  }
  if (allowed) numa_bitmask_free(allowed);
  return found;
}

inline std::vector<BackendCase> backend_cases() {
  std::vector<BackendCase> cases;
  int node = first_memory_node();
  if (node >= 0) {
    BackendCase c{"numa_hugetlb_first", "numa", {}, true};
    c.params.numa_nodes = {static_cast<unsigned>(node)};
    cases.push_back(c);
    c.label = "numa_4k";
    c.params.huge_pages = HugePageMode::none;
    cases.push_back(c);
  }
  {
    BackendCase c{"emulated", "emulated", {}, true};
    c.params.kind = TierKind::cxl;
    cases.push_back(c);
  }
  {
    BackendCase c{"null", "null", {}, false};
    cases.push_back(c);
  }
  {
    BackendCase c{"faulty_over_emulated", "faulty", {}, true};
    c.params.set_option(CXLT_OPTION_INNER_BACKEND, "emulated");  // its FaultControl starts armed with nothing
    cases.push_back(c);
  }
#if CXLT_HAVE_MEMKIND
  {
    BackendCase c{"memkind_regular", "memkind", {}, true};
    c.params.set_option("memkind_kind", "regular");
    cases.push_back(c);
  }
#endif
  return cases;
}

// Pattern byte i of block `tag`: cheap, differs between neighbours and between blocks.
inline uint8_t pattern_byte(uint64_t tag, size_t i) {
  uint64_t x = (tag + 1) * 0x9E3779B97F4A7C15ull + i * 0x2545F4914F6CDD1Dull;
  return static_cast<uint8_t>(x >> 56);
}

inline void fill_pattern(void *p, size_t bytes, uint64_t tag) {
  auto *b = static_cast<uint8_t *>(p);
  for (size_t i = 0; i < bytes; ++i) b[i] = pattern_byte(tag, i);
}

// Index of the first wrong byte, or SIZE_MAX if all match.
inline size_t check_pattern(const void *p, size_t bytes, uint64_t tag) {
  const auto *b = static_cast<const uint8_t *>(p);
  for (size_t i = 0; i < bytes; ++i) {
    if (b[i] != pattern_byte(tag, i)) return i;
  }
  return SIZE_MAX;
}

}  // namespace cxltier::test
