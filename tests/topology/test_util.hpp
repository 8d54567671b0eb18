// SPDX-License-Identifier: Apache-2.0
// Small helpers shared by the topology tests: where the data and the CLI are, running the CLI,
// temporary directories, and partitions of NUMA nodes into tiers.
#pragma once

#include <cxltier/topology.hpp>
#include <cxltier/tools/topology_text.hpp>

#include <gtest/gtest.h>

#include "../common/cli.hpp"
#include "../common/files.hpp"
#include "../common/temp_dir.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace cxltier::test {

namespace fs = std::filesystem;

inline fs::path topology_data_dir() {
  const char *d = std::getenv("CXLT_TEST_DATA");
  return fs::path(d ? d : "tests/data") / "topologies";
}

using cxlt_test::read_file;

using cxlt_test::TempDir;

using ToolRun = cxlt_test::ToolResult;
using cxlt_test::run_tool;

using Partition = std::set<std::set<unsigned>>;

inline Partition partition_of(const Topology &t) {
  Partition p;
  for (const TierDesc &tier : t.tiers) p.insert(std::set<unsigned>(tier.numa_nodes.begin(), tier.numa_nodes.end()));
  return p;
}

inline std::string to_string(const Partition &p) {
  std::ostringstream os;
  for (const auto &s : p) {
    os << '{';
    bool first = true;
    for (unsigned n : s) {
      os << (first ? "" : ",") << n;
      first = false;
    }
    os << '}';
  }
  return os.str();
}

inline const TierDesc *tier_with_node(const Topology &t, unsigned node) {
  for (const TierDesc &tier : t.tiers)
    for (unsigned n : tier.numa_nodes)
      if (n == node) return &tier;
  return nullptr;
}

inline bool evidence_mentions(const TierDesc &t, const std::string &needle) {
  for (const std::string &e : t.evidence)
    if (e.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace cxltier::test
