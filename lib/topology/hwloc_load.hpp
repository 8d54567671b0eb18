// SPDX-License-Identifier: Apache-2.0
// Loading an hwloc topology on our own handle: the live machine, an XML file or an XML buffer.
// Internal to lib/topology (and the topology tests). Every failure is an Error with
// CXLT_ERROR_TOPOLOGY whose message names the file and the reason in one line.
#pragma once

#include <hwloc.h>

#include <string>
#include <string_view>

namespace cxltier::topo {

// Owns one hwloc_topology_t; move-only.
class HwlocTopology {
public:
  HwlocTopology() = default;
  explicit HwlocTopology(hwloc_topology_t t) noexcept : t_(t) {}
  HwlocTopology(HwlocTopology &&o) noexcept : t_(o.t_) { o.t_ = nullptr; }
  HwlocTopology &operator=(HwlocTopology &&o) noexcept;
  HwlocTopology(const HwlocTopology &) = delete;
  HwlocTopology &operator=(const HwlocTopology &) = delete;
  ~HwlocTopology();

  hwloc_topology_t get() const noexcept { return t_; }
  explicit operator bool() const noexcept { return t_ != nullptr; }

private:
  hwloc_topology_t t_ = nullptr;
};

// The live machine. Sets HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES=1 first unless the user set it (so
// Grace-Hopper and POWER9 GPU memory nodes are kept). Throws if hwloc fails, or if an hwloc
// environment variable (HWLOC_XMLFILE, HWLOC_SYNTHETIC, HWLOC_FSROOT) replaced this machine with
// another topology: that is never silently reported as "this system".
HwlocTopology load_live();

// An hwloc XML file, through hwloc_topology_set_xml on our own handle (never HWLOC_XMLFILE).
// Checks the file first so that the error names the reason: missing, a directory, unreadable,
// empty, not a topology, an XML format this hwloc cannot read (v3.0 on hwloc 2.x), malformed.
HwlocTopology load_xml_file(const std::string &path);

// The same from memory; `what` names the buffer in errors (tests build topologies in code).
HwlocTopology load_xml_buffer(std::string_view xml, const std::string &what);

// The version of the hwloc library that runs (e.g. "2.9.0"), read from a tiny synthetic
// topology once: the headers only give the API version, which differs from the release.
const std::string &hwloc_runtime_version();

// The `version` attribute of the <topology> element in the first bytes of an XML text, or ""
// when there is none. "2.0", "3.0", ...
std::string xml_format_version(std::string_view head);

}  // namespace cxltier::topo
