// SPDX-License-Identifier: Apache-2.0
// `cxltier topo`: the memory tiers of this machine, of an hwloc XML file, or of the embedded
// default, as a table (units in every column) or as JSON (--json, schema in docs/topology.md).
#include "commands.hpp"

#include <cxltier/topology.hpp>
#include <cxltier/tools/topology_text.hpp>

#include <cstdio>
#include <memory>
#include <string>

namespace {

struct TopoOptions {
  std::string topology = "auto";
  bool json = false;
};

}  // namespace

static cxltier::cli::Registrar reg(10, [](CLI::App &app) {
  auto opts = std::make_shared<TopoOptions>();
  CLI::App *sub = app.add_subcommand("topo", "Show the memory tiers (fastest first) and the evidence behind each");
  sub->add_option("--topology", opts->topology,
                  "auto (this machine if it has 2+ tiers, else the embedded default), this-system, emulated, "
                  "or an hwloc XML file")
      ->capture_default_str()->check(cxltier::cli::non_empty("--topology"));
  sub->add_flag("--json", opts->json, "Print JSON instead of the table");
  return [opts]() -> int {
    cxltier::Topology topo = cxltier::discover_topology(opts->topology);
    std::string out = opts->json ? cxltier::topology_to_json(topo) + "\n" : cxltier::topology_to_table(topo);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return cxltier::cli::kExitOk;  // main() checks that stdout was written
  };
});
