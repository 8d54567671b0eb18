// SPDX-License-Identifier: Apache-2.0
// Writes this project's own topology fixtures (tests/data/topologies/fixtures/*.xml) from
// topologies built in code, so their provenance is this file:
//   build-<x>/tests/topology/make_topology_fixtures tests/data/topologies/fixtures
#include "synth.hpp"

#include <cstdio>
#include <fstream>
#include <string>

using cxltier::test::Synth;

static bool write(const std::string &dir, const char *name, const std::string &xml) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out << xml;
  std::printf("%s/%s\n", dir.c_str(), name);
  return bool(out);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;

  // Two sockets with DRAM and subtype-less HBM each, CXL memory for the whole machine.
  {
    Synth s("[numa] pack:2 [numa] [numa] core:2 pu:1");
    cxltier::test::build_two_socket_hbm_dram_cxl(s, false);
    ok &= write(dir, "2s-hbm-dram-cxl.xml", s.xml());
  }
  // CXL memory onlined as System RAM by the firmware: a memory-only node with no DAX, CXL or
  // performance information, only a larger NUMA distance.
  {
    Synth s("[numa] pack:1 [numa] core:4 pu:1");
    const unsigned long long GiB = 1ull << 30;
    s.memory(0, 32 * GiB).memory(1, 64 * GiB).distances({0, 1}, {10, 20, 20, 10});
    ok &= write(dir, "cxl-system-ram-nodax.xml", s.xml());
  }
  return ok ? 0 : 1;
}
