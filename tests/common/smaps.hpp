// SPDX-License-Identifier: Apache-2.0
// Test helpers: what the kernel says in /proc/self/smaps about the mapping that holds an address
// (KernelPageSize, AnonHugePages, VmFlags: "hg" marks a range advised MADV_HUGEPAGE), and that
// mapping's bounds.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace cxlt_test {

// The field's text after "Field:" for the mapping that contains p; "" when none says it.
inline std::string smaps_field(const void *p, const std::string &field) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  auto addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  while (std::getline(in, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream ls(line);
    if (ls >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = addr >= lo && addr < hi;
      continue;
    }
    if (inside && line.rfind(field + ":", 0) == 0) return line.substr(field.size() + 1);
  }
  return "";
}

// The bounds [first, second) of the mapping (one VMA) that contains p; {0, 0} when none does.
inline std::pair<uintptr_t, uintptr_t> mapping_bounds(const void *p) {
  std::ifstream in("/proc/self/maps");
  std::string line;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  while (std::getline(in, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream ls(line);
    if (ls >> std::hex >> lo >> dash >> hi && dash == '-' && addr >= lo && addr < hi) return {lo, hi};
  }
  return {0, 0};
}

}  // namespace cxlt_test
