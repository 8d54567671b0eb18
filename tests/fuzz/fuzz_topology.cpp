// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: topology loading. Any bytes are given to hwloc as an XML topology on our
// own handle (topo::load_xml_buffer), and a topology hwloc accepts goes through the whole tier
// discovery (classify_topology: node facts, kinds, grouping, ordering, remarks) and both
// printers. Each step must succeed or throw cxltier::Error, never crash; the tiers found must
// be ranked in order and hold each NUMA node at most once.
#include "fuzz_util.hpp"

#include "lib/topology/classify.hpp"
#include "lib/topology/hwloc_load.hpp"

#include <cxltier/error.hpp>
#include <cxltier/topology.hpp>
#include <cxltier/tools/topology_text.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

using namespace cxltier;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // hwloc reports XML errors on stderr unless told not to (thousands of lines per second here).
  setenv("HWLOC_XML_VERBOSE", "0", 1);
  setenv("HWLOC_HIDE_ERRORS", "1", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view xml(reinterpret_cast<const char *>(data), size);
  try {
    topo::HwlocTopology h = topo::load_xml_buffer(xml, "<fuzz>");
    Topology t = topo::classify_topology(h.get(), TopologySource::xml, "<fuzz>");
    std::set<unsigned> nodes;
    for (size_t i = 0; i < t.tiers.size(); ++i) {
      FUZZ_CHECK(t.tiers[i].rank == static_cast<int>(i), "tier %zu has rank %d", i, t.tiers[i].rank);
      for (unsigned n : t.tiers[i].numa_nodes) FUZZ_CHECK(nodes.insert(n).second, "node %u is in two tiers", n);
    }
    (void)topology_to_json(t);
    (void)topology_to_table(t);
  } catch (const Error &e) {
    FUZZ_CHECK(e.code() == CXLT_ERROR_TOPOLOGY, "code %d: %s", static_cast<int>(e.code()), e.what());
  }
  return 0;
}
