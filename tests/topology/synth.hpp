// SPDX-License-Identifier: Apache-2.0
// Building hwloc topologies in code for the topology tests and the fixture generator: a
// synthetic topology, then subtypes, info attributes, memory attributes, distances and CPU-less
// nodes added the way hwloc's Linux backend would, then exported to XML.
#pragma once

#include <hwloc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace cxltier::test {

class Synth {
public:
  // `desc` is an hwloc synthetic description, e.g. "[numa] pack:2 [numa] [numa] pu:2".
  explicit Synth(const char *desc) {
    if (hwloc_topology_init(&t_) != 0) throw std::runtime_error("hwloc_topology_init failed");
    if (hwloc_topology_set_synthetic(t_, desc) != 0) throw std::runtime_error(std::string("bad synthetic description: ") + desc);
    if (hwloc_topology_load(t_) != 0) throw std::runtime_error("hwloc_topology_load failed");
  }
  Synth(const Synth &) = delete;
  Synth &operator=(const Synth &) = delete;
  ~Synth() { hwloc_topology_destroy(t_); }

  hwloc_topology_t get() const { return t_; }

  hwloc_obj_t node(unsigned os_index) const {
    hwloc_obj_t n = hwloc_get_numanode_obj_by_os_index(t_, os_index);
    if (!n) throw std::runtime_error("no NUMA node P#" + std::to_string(os_index));
    return n;
  }

  // hwloc 2.9 has no setter for subtypes; the field is documented as malloc'ed and freed by hwloc.
  Synth &subtype(unsigned os, const char *st) {
    hwloc_obj_t n = node(os);
    std::free(n->subtype);
    n->subtype = st ? strdup(st) : nullptr;
    return *this;
  }
  Synth &info(unsigned os, const char *name, const char *value) {
    if (hwloc_obj_add_info(node(os), name, value) != 0) throw std::runtime_error("hwloc_obj_add_info failed");
    return *this;
  }
  Synth &memory(unsigned os, uint64_t bytes) {
    node(os)->attr->numanode.local_memory = bytes;
    return *this;
  }
  // A memory attribute value as seen from `cpus` ("0-3"); "" means the node's own CPUs.
  Synth &attr(hwloc_memattr_id_t id, unsigned os, uint64_t value, const char *cpus = "") {
    hwloc_obj_t n = node(os);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (*cpus)
      hwloc_bitmap_list_sscanf(set, cpus);
    else
      hwloc_bitmap_copy(set, n->cpuset);
    hwloc_location loc{};
    loc.type = HWLOC_LOCATION_TYPE_CPUSET;
    loc.location.cpuset = set;
    int err = hwloc_memattr_set_value(t_, id, n, &loc, 0, value);
    hwloc_bitmap_free(set);
    if (err != 0) throw std::runtime_error("hwloc_memattr_set_value failed on P#" + std::to_string(os));
    return *this;
  }
  // Keep only these CPUs; NUMA nodes that lose all theirs stay, CPU-less (empty cpuset).
  Synth &restrict_cpus(const char *cpus) {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    hwloc_bitmap_list_sscanf(set, cpus);
    int err = hwloc_topology_restrict(t_, set, 0);
    hwloc_bitmap_free(set);
    if (err != 0) throw std::runtime_error("hwloc_topology_restrict failed");
    return *this;
  }
  // A NUMA latency matrix (SLIT-like), row-major over `os` nodes.
  Synth &distances(const std::vector<unsigned> &os, std::vector<hwloc_uint64_t> values) {
    std::vector<hwloc_obj_t> objs;
    for (unsigned o : os) objs.push_back(node(o));
    hwloc_distances_add_handle_t h = hwloc_distances_add_create(
        t_, "NUMALatency", HWLOC_DISTANCES_KIND_FROM_OS | HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0);
    if (!h || hwloc_distances_add_values(t_, h, static_cast<unsigned>(objs.size()), objs.data(), values.data(), 0) != 0 ||
        hwloc_distances_add_commit(t_, h, 0) != 0)
      throw std::runtime_error("adding distances failed");
    return *this;
  }
  std::string xml() const {
    char *buf = nullptr;
    int len = 0;
    if (hwloc_topology_export_xmlbuffer(t_, &buf, &len, 0) != 0) throw std::runtime_error("XML export failed");
    std::string out(buf, static_cast<size_t>(len > 0 ? len - 1 : 0));  // len counts the NUL
    hwloc_free_xmlbuffer(t_, buf);
    return out;
  }

private:
  hwloc_topology_t t_ = nullptr;
};

// Two sockets, each with ordinary DRAM (with CPUs) and memory-only HBM without a subtype, plus
// CXL memory onlined from a DAX region under a CXL root, attached to the whole machine. Figures
// in MiB/s and ns as an HMAT would give them. OS indexes: DRAM 0 and 2, HBM 1 and 3, CXL 4.
inline void build_two_socket_hbm_dram_cxl(Synth &s, bool hbm_subtype) {
  const uint64_t GiB = 1ull << 30;
  for (unsigned dram : {0u, 2u}) s.memory(dram, 64 * GiB).attr(HWLOC_MEMATTR_ID_BANDWIDTH, dram, 102400).attr(HWLOC_MEMATTR_ID_LATENCY, dram, 95);
  for (unsigned hbm : {1u, 3u}) {
    s.memory(hbm, 16 * GiB).attr(HWLOC_MEMATTR_ID_BANDWIDTH, hbm, 409600).attr(HWLOC_MEMATTR_ID_LATENCY, hbm, 130);
    if (hbm_subtype) s.subtype(hbm, "HBM");
  }
  s.memory(4, 128 * GiB)
      .info(4, "DAXDevice", "dax0.0")
      .info(4, "DAXType", "SPM")
      .info(4, "DAXParent", "LNXSYSTM:00/LNXSYBUS:00/ACPI0017:00/root0/decoder0.0/region0/dax_region0")
      .attr(HWLOC_MEMATTR_ID_BANDWIDTH, 4, 30720, "0-3")
      .attr(HWLOC_MEMATTR_ID_LATENCY, 4, 280, "0-3");
  s.distances({0, 1, 2, 3, 4}, {10, 12, 21, 23, 24,  //
                                12, 10, 23, 21, 24,  //
                                21, 23, 10, 12, 24,  //
                                23, 21, 12, 10, 24,  //
                                24, 24, 24, 24, 10});
}

}  // namespace cxltier::test
