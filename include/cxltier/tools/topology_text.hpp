// SPDX-License-Identifier: Apache-2.0
// Topology as text: the JSON and the table that `cxltier topo` prints (docs/topology.md). The
// engine reads a Topology's fields (cxltier/topology.hpp); only the CLI and its tests print one.
//
// Unstable: part of the cxltier CLI's toolkit (include/cxltier/tools/), not of the engine's
// contract. Its names, types and behaviour may change in any release; the ABI and API promise
// covers cxltier.h and the C++ headers beside it in include/cxltier/, not this file.
#pragma once

#include <cxltier/cxltier.h>
#include <cxltier/topology.hpp>

#include <string>

namespace cxltier {

// The exact JSON of `cxltier topo --json` (see docs/topology.md), as text: the keys "source",
// "hwloc_version", "origin", "note" and "tiers" (each with "rank", "kind", "numa_nodes",
// "capacity_bytes", "bandwidth_mib_s" and "latency_ns" (number or null), "evidence", "emulated").
// Cannot fail but for std::bad_alloc.
CXLT_API std::string topology_to_json(const Topology &topo, int indent = 2);

// The readable table of `cxltier topo`: a header line (source, hwloc version, EMULATED when it
// is), the note, one row per tier with units in every column header, then each tier's evidence.
// Cannot fail but for std::bad_alloc.
CXLT_API std::string topology_to_table(const Topology &topo);

}  // namespace cxltier
