// SPDX-License-Identifier: Apache-2.0
// From hwloc NUMA nodes to memory tiers. Three steps, each written to be read against
// docs/topology.md: (1) per node, gather facts and decide a kind by the first rule that applies;
// (2) group nodes of one kind whose performance matches, whatever socket they sit on; (3) order
// the tiers fastest first. The rules look only at what hwloc reports, never at file names.
#include "lib/topology/classify.hpp"
#include "lib/topology/hwloc_load.hpp"
#include "lib/core/text.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

namespace cxltier::topo {

namespace {

using text::lower;

std::string info_of(hwloc_obj_t o, const char *name) {
  const char *v = hwloc_obj_get_info_by_name(o, name);
  return v ? std::string(v) : std::string();
}

// 90000 -> "90000", 12.5 -> "12.5".
std::string fmt_num(double v) {
  char buf[64];
  if (std::floor(v) == v && std::fabs(v) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string cpu_list(hwloc_const_bitmap_t set) {
  char *s = nullptr;
  if (hwloc_bitmap_list_asprintf(&s, set) < 0 || !s) return "?";
  std::string out(s);
  std::free(s);
  return out;
}

std::string describe_initiator(hwloc_topology_t t, const hwloc_location &loc) {
  if (loc.type == HWLOC_LOCATION_TYPE_CPUSET) {
    if (hwloc_bitmap_isequal(loc.location.cpuset, hwloc_topology_get_topology_cpuset(t)))
      return "the whole machine's CPUs";
    return "CPUs " + cpu_list(loc.location.cpuset);
  }
  if (loc.type == HWLOC_LOCATION_TYPE_OBJECT && loc.location.object) {
    hwloc_obj_t o = loc.location.object;
    std::ostringstream os;
    os << hwloc_obj_type_string(o->type) << " L#" << o->logical_index;
    if (o->os_index != HWLOC_UNKNOWN_INDEX) os << " (P#" << o->os_index << ')';
    return os.str();
  }
  return "an unnamed initiator";
}

struct PerfRead {
  std::optional<double> value;
  std::string fact;
};

// Bandwidth (else ReadBandwidth) or Latency (else ReadLatency) as the node's own CPUs see it;
// for a node without CPUs (or without a value for them), the best initiator hwloc knows, which
// is the nearest one HMAT lists.
PerfRead read_perf(hwloc_topology_t t, hwloc_obj_t node, hwloc_memattr_id_t primary, hwloc_memattr_id_t fallback,
                   const char *unit) {
  for (hwloc_memattr_id_t id : {primary, fallback}) {
    const char *name = nullptr;
    if (hwloc_memattr_get_name(t, id, &name) != 0 || !name) continue;
    hwloc_uint64_t v = 0;
    if (!hwloc_bitmap_iszero(node->cpuset)) {
      hwloc_location loc{};
      loc.type = HWLOC_LOCATION_TYPE_CPUSET;
      loc.location.cpuset = node->cpuset;
      if (hwloc_memattr_get_value(t, id, node, &loc, 0, &v) == 0)
        return {static_cast<double>(v), std::string(name) + " " + fmt_num(static_cast<double>(v)) + " " + unit +
                                            " from the node's local CPUs"};
    }
    hwloc_location best{};
    if (hwloc_memattr_get_best_initiator(t, id, node, 0, &best, &v) == 0)
      return {static_cast<double>(v), std::string(name) + " " + fmt_num(static_cast<double>(v)) + " " + unit +
                                          " from its best initiator, " + describe_initiator(t, best)};
  }
  const char *n1 = nullptr, *n2 = nullptr;
  hwloc_memattr_get_name(t, primary, &n1);
  hwloc_memattr_get_name(t, fallback, &n2);
  return {std::nullopt, std::string("no ") + (n1 ? n1 : "?") + " or " + (n2 ? n2 : "?") + " memory attribute"};
}

// Where a DAX device's memory comes from, read off its DAXParent path.
struct DaxOrigin {
  bool cxl_root = false;     // a component starts with ACPI0017 (the CXL root)
  bool nvdimm_bus = false;   // it goes through an NVDIMM bus (ACPI0012 root, nvdimm-bridge, ndbus)
  std::string cxl_region;    // the first "region*" component below the CXL root
};

// "LNXSYSTM:00/LNXSYBUS:00/ACPI0017:00/root0/decoder0.0/region0/dax_region0" is volatile CXL
// memory; "ACPI0017:00/root0/nvdimm-bridge0/ndbus0/region0" is CXL persistent memory seen
// through an NVDIMM bus; "LNXSYSTM:00/LNXSYBUS:00/ACPI0012:00/ndbus0/region5/dax5.1" an NVDIMM.
DaxOrigin dax_origin(const std::string &parent) {
  DaxOrigin o;
  size_t start = 0;
  while (start <= parent.size()) {
    size_t slash = parent.find('/', start);
    std::string part = parent.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.rfind("ACPI0017", 0) == 0) o.cxl_root = true;
    if (part.rfind("ACPI0012", 0) == 0 || part.rfind("ndbus", 0) == 0 || part.rfind("nvdimm-bridge", 0) == 0)
      o.nvdimm_bus = true;
    if (o.cxl_root && o.cxl_region.empty() && part.rfind("region", 0) == 0) o.cxl_region = part;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return o;
}

// The position of kinds when nothing measured tells them apart. The GPU comes first because
// KV blocks are consumed by the GPU (hwloc, which ranks from the CPUs, puts it after DRAM).
int kind_order(TierKind k) {
  switch (k) {
    case TierKind::gpu: return 0;
    case TierKind::hbm: return 1;
    case TierKind::dram: return 2;
    case TierKind::cxl: return 3;
    case TierKind::spm: return 4;
    case TierKind::unknown: return 5;
    case TierKind::nvm: return 6;
    case TierKind::remote: return 7;
  }
  return 8;
}

bool within(double a, double b, double tol) {
  double hi = std::max(a, b), lo = std::min(a, b);
  if (lo <= 0) return hi <= 0;
  return hi / lo <= 1.0 + tol + 1e-12;
}

void set_kind(NodeFacts &n, TierKind k, const std::string &why, bool evidence = true) {
  n.kind = k;
  n.kind_reason = std::string("kind ") + tier_kind_name(k) + ": " + why;
  n.has_kind_evidence = evidence;
}

// Rules K1-K12 of docs/topology.md, first match wins. K13 needs every node's facts and runs
// afterwards (see collect_node_facts).
void decide_kind(NodeFacts &n, hwloc_obj_t node) {
  const std::string subtype = node->subtype ? node->subtype : "";
  const std::string st = lower(subtype);
  const std::string dax_type = info_of(node, "DAXType");
  const std::string dax_parent = info_of(node, "DAXParent");
  const std::string cxl_device = info_of(node, "CXLDevice");
  const std::string dt = lower(dax_type);

  if (st == "gpumemory") return set_kind(n, TierKind::gpu, "NUMA subtype GPUMemory (GPU memory exposed as a NUMA node)");
  if (st == "hbm" || st == "mcdram") return set_kind(n, TierKind::hbm, "NUMA subtype " + subtype);
  if (st.rfind("cxl-", 0) == 0) {
    const std::string what = "NUMA subtype " + subtype + " (written by hwloc 2.10 or later)";
    if (st == "cxl-nvm") return set_kind(n, TierKind::nvm, what + ": non-volatile memory behind CXL");
    if (st == "cxl-gpumemory") return set_kind(n, TierKind::gpu, what);
    return set_kind(n, TierKind::cxl, what);
  }
  if (!cxl_device.empty()) return set_kind(n, TierKind::cxl, "CXLDevice " + cxl_device + " (hwloc 2.10 or later)");
  // The DAX path is physical evidence; hwloc 2.9 derives its DAXType, and from that its NVM
  // subtype, from the same path, so the path is read first.
  const DaxOrigin dax = dax_origin(dax_parent);
  if (dax.cxl_root && !dax.cxl_region.empty() && !dax.nvdimm_bus)
    return set_kind(n, TierKind::cxl, "DAXParent goes through a CXL root (ACPI0017) and " + dax.cxl_region);
  if (dax.cxl_root && dax.nvdimm_bus)
    return set_kind(n, TierKind::nvm,
                    "DAXParent goes through a CXL root (ACPI0017) and an NVDIMM bus: CXL-attached persistent memory");
  if (st == "nvm") return set_kind(n, TierKind::nvm, "NUMA subtype NVM");
  if (dt == "nvm") return set_kind(n, TierKind::nvm, "DAXType NVM (persistent memory onlined as RAM through a DAX device)");
  if (dax.nvdimm_bus) return set_kind(n, TierKind::nvm, "DAXParent goes through an NVDIMM bus (ACPI0012)");
  if (st == "dram") return set_kind(n, TierKind::dram, "NUMA subtype DRAM");
  if (st == "spm" || dt == "spm") {
    return set_kind(n, TierKind::spm,
                    std::string(st == "spm" ? "NUMA subtype SPM" : "DAXType SPM") +
                        " (specific-purpose memory: firmware reserved it for a purpose hwloc cannot name)");
  }
  if (!subtype.empty()) n.facts.push_back("NUMA subtype \"" + subtype + "\" is not one the rules know; ignored");
  if (!n.memory_only) {
    return set_kind(n, TierKind::dram,
                    "no subtype, DAX or CXL information and the node has CPUs of its own (ordinary memory)", false);
  }
  set_kind(n, TierKind::unknown,
           "a memory-only node with no subtype, DAX or CXL information (hwloc 2.9 cannot tell CXL memory onlined "
           "as System RAM from other memory-only nodes; set the tier's kind in the config)",
           false);
}

}  // namespace

std::string format_node_list(const std::vector<unsigned> &nodes) {
  std::ostringstream os;
  for (size_t i = 0; i < nodes.size();) {
    size_t j = i;
    while (j + 1 < nodes.size() && nodes[j + 1] == nodes[j] + 1) ++j;
    if (i) os << ',';
    os << nodes[i];
    if (j > i) os << '-' << nodes[j];
    i = j + 1;
  }
  return os.str();
}

std::vector<NodeFacts> collect_node_facts(hwloc_topology_t t) {
  std::vector<hwloc_obj_t> objs;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o));) objs.push_back(o);
  // hwloc's XML import accepts two NUMANode objects with one OS index (a hand-edited or corrupt
  // file); tiers are sets of node numbers, so such a node would land in two tiers.
  std::map<unsigned, uint64_t> seen;  // OS index -> gp_index of its first object
  for (hwloc_obj_t o : objs) {
    if (o->os_index == HWLOC_UNKNOWN_INDEX) continue;
    auto [it, fresh] = seen.emplace(o->os_index, o->gp_index);
    if (!fresh)
      fail(CXLT_ERROR_TOPOLOGY, "the topology lists NUMA node P#", o->os_index, " twice (objects gp_index ", it->second,
           " and ", o->gp_index, "): each NUMA node must appear once");
  }

  std::vector<NodeFacts> nodes(objs.size());
  std::vector<std::string> locality(objs.size());

  // CPU-less nodes. hwloc gives every node the cpuset of the object it hangs under, so a node
  // without CPUs of its own still has one unless hwloc found no locality at all. A node is
  // memory-only when its cpuset is empty, when a node with a lower OS index has the same cpuset
  // (Linux numbers nodes with CPUs first), or when its cpuset covers another node's (it hangs
  // above the nodes that own the CPUs, as CXL memory "attached to the whole machine" does).
  for (size_t i = 0; i < objs.size(); ++i) {
    hwloc_obj_t n = objs[i];
    NodeFacts &f = nodes[i];
    f.os_index = n->os_index;
    f.capacity_bytes = n->attr ? n->attr->numanode.local_memory : 0;
    if (hwloc_bitmap_iszero(n->cpuset)) {
      f.memory_only = true;
      locality[i] = "CPU-less: no CPU is local to it (empty cpuset)";
      continue;
    }
    for (size_t j = 0; j < objs.size() && !f.memory_only; ++j) {
      if (j == i || hwloc_bitmap_iszero(objs[j]->cpuset)) continue;
      if (hwloc_bitmap_isequal(objs[j]->cpuset, n->cpuset) && objs[j]->os_index < n->os_index) {
        f.memory_only = true;
        locality[i] = "memory-only: shares its CPUs with a node of lower OS index (Linux numbers the nodes with CPUs first)";
      } else if (!hwloc_bitmap_isequal(objs[j]->cpuset, n->cpuset) && hwloc_bitmap_isincluded(objs[j]->cpuset, n->cpuset)) {
        f.memory_only = true;
        locality[i] = "memory-only: attached above other nodes (its cpuset covers theirs)";
      }
    }
    if (!f.memory_only) locality[i] = "has CPUs of its own";
  }

  for (size_t i = 0; i < objs.size(); ++i) decide_kind(nodes[i], objs[i]);

  // Performance from memory attributes (MiB/s and ns, as hwloc defines them).
  std::vector<std::string> bw_fact(objs.size()), lat_fact(objs.size());
  for (size_t i = 0; i < objs.size(); ++i) {
    PerfRead bw = read_perf(t, objs[i], HWLOC_MEMATTR_ID_BANDWIDTH, HWLOC_MEMATTR_ID_READ_BANDWIDTH, "MiB/s");
    PerfRead lat = read_perf(t, objs[i], HWLOC_MEMATTR_ID_LATENCY, HWLOC_MEMATTR_ID_READ_LATENCY, "ns");
    nodes[i].bandwidth_mib_s = bw.value;
    nodes[i].latency_ns = lat.value;
    bw_fact[i] = bw.fact;
    lat_fact[i] = lat.fact;
  }

  // Distances: the NUMA latency matrix (SLIT), from the nearest node that has CPUs.
  std::vector<std::string> dist_fact(objs.size());
  unsigned nr = 1;
  hwloc_distances_s *d = nullptr;
  if (hwloc_distances_get_by_type(t, HWLOC_OBJ_NUMANODE, &nr, &d, HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) == 0 && nr >= 1 && d) {
    for (size_t j = 0; j < objs.size(); ++j) {
      int col = hwloc_distances_obj_index(d, objs[j]);
      if (col < 0) continue;
      std::optional<hwloc_uint64_t> best;
      for (size_t i = 0; i < objs.size(); ++i) {
        if (nodes[i].memory_only) continue;
        int row = hwloc_distances_obj_index(d, objs[i]);
        if (row < 0) continue;
        hwloc_uint64_t v = d->values[static_cast<size_t>(row) * d->nbobjs + static_cast<size_t>(col)];
        if (!best || v < *best) best = v;
      }
      if (best) {
        nodes[j].access_distance = static_cast<double>(*best);
        const char *matrix = hwloc_distances_get_name(t, d);
        dist_fact[j] = "NUMA distance " + fmt_num(static_cast<double>(*best)) + " from the nearest node with CPUs" +
                       (matrix ? std::string(" (") + matrix + ")" : std::string());
      }
    }
  }
  if (d) hwloc_distances_release(t, d);

  // K13: specific-purpose or memory-only nodes of no known kind are HBM when their
  // bandwidth is more than twice that of the ordinary DRAM the CPUs have (hwloc 2.10's guess).
  std::optional<double> dram_bw;
  for (const NodeFacts &n : nodes)
    if (n.kind == TierKind::dram && !n.memory_only && n.bandwidth_mib_s)
      dram_bw = std::max(dram_bw.value_or(0.0), *n.bandwidth_mib_s);
  for (NodeFacts &n : nodes) {
    bool guessable = n.kind == TierKind::spm || (n.kind == TierKind::unknown && !n.has_kind_evidence);
    if (guessable && dram_bw && n.bandwidth_mib_s && *n.bandwidth_mib_s > kHbmBandwidthRatio * *dram_bw) {
      set_kind(n, TierKind::hbm,
               "bandwidth " + fmt_num(*n.bandwidth_mib_s) + " MiB/s is more than " + fmt_num(kHbmBandwidthRatio) +
                   "x that of the CPUs' DRAM (" + fmt_num(*dram_bw) + " MiB/s), and " +
                   (n.kind == TierKind::spm ? std::string("its subtype or DAX information says only SPM")
                                            : std::string("it is memory-only with no subtype, DAX or CXL information")));
    }
  }

  for (size_t i = 0; i < objs.size(); ++i) {
    hwloc_obj_t o = objs[i];
    NodeFacts &f = nodes[i];
    std::vector<std::string> facts{f.kind_reason, bw_fact[i], lat_fact[i], locality[i]};
    if (!dist_fact[i].empty()) facts.push_back(dist_fact[i]);
    uint64_t cache = 0;
    for (hwloc_obj_t p = o->parent; p && p->type == HWLOC_OBJ_MEMCACHE; p = p->parent) cache += p->attr->cache.size;
    if (cache)
      facts.push_back("behind a memory-side cache of " + format_bytes(cache) +
                      " (accesses that hit it run at the cache's speed, misses at the node's own)");
    std::string dax_type = info_of(o, "DAXType"), dax_parent = info_of(o, "DAXParent"), dax_dev = info_of(o, "DAXDevice");
    if (!dax_type.empty() || !dax_parent.empty()) {
      std::string s = "onlined from DAX device" + (dax_dev.empty() ? std::string() : " " + dax_dev) + ":";
      if (!dax_type.empty()) s += " DAXType " + dax_type;
      if (!dax_parent.empty()) s += (dax_type.empty() ? " " : ", ") + std::string("DAXParent ") + dax_parent;
      facts.push_back(s);
    }
    std::string pci = info_of(o, "PCIBusID");
    if (!pci.empty()) facts.push_back("PCI device " + pci);
    f.memory_tier = info_of(o, "MemoryTier");
    if (!f.memory_tier.empty()) facts.push_back("hwloc MemoryTier info " + f.memory_tier + " (hwloc 2.10 or later wrote it)");
    for (std::string &s : f.facts) facts.push_back(std::move(s));  // notes decide_kind left
    f.facts = std::move(facts);
  }
  return nodes;
}

namespace {

bool same_performance(const NodeFacts &a, const NodeFacts &b) {
  if (a.bandwidth_mib_s.has_value() != b.bandwidth_mib_s.has_value()) return false;
  if (a.bandwidth_mib_s && !within(*a.bandwidth_mib_s, *b.bandwidth_mib_s, kSamePerformanceTolerance)) return false;
  if (a.latency_ns.has_value() != b.latency_ns.has_value()) return false;
  if (a.latency_ns && !within(*a.latency_ns, *b.latency_ns, kSamePerformanceTolerance)) return false;
  if (!a.bandwidth_mib_s && !a.latency_ns) {
    // Nothing measured: the NUMA distance is the only performance hint left.
    if (a.access_distance.has_value() != b.access_distance.has_value()) return false;
    if (a.access_distance && !within(*a.access_distance, *b.access_distance, kSamePerformanceTolerance)) return false;
  }
  return true;
}

struct Group {
  TierKind kind;
  std::vector<const NodeFacts *> nodes;  // nodes[0] is the leader every other node matches
  std::optional<double> bw, lat, dist;
  bool split_by_memory_tier = false;
};

// Evidence of a tier: each distinct fact once, with the nodes it holds for when that is not all.
std::vector<std::string> merge_facts(const std::vector<const NodeFacts *> &members) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<unsigned>> holders;
  for (const NodeFacts *n : members)
    for (const std::string &fact : n->facts) {
      if (fact.empty()) continue;
      auto [it, inserted] = holders.try_emplace(fact);
      if (inserted) order.push_back(fact);
      if (it->second.empty() || it->second.back() != n->os_index) it->second.push_back(n->os_index);
    }
  std::vector<std::string> out;
  for (const std::string &fact : order) {
    std::vector<unsigned> who = holders[fact];
    std::sort(who.begin(), who.end());
    if (who.size() == members.size())
      out.push_back(fact);
    else
      out.push_back(fact + " [node" + (who.size() > 1 ? "s " : " ") + format_node_list(who) + "]");
  }
  return out;
}

}  // namespace

std::vector<TierDesc> group_into_tiers(const std::vector<NodeFacts> &nodes, const ClassifyOptions &opts) {
  // Leaders first: the fastest node of a kind starts its group, so groups do not drift.
  std::vector<const NodeFacts *> sorted;
  for (const NodeFacts &n : nodes) sorted.push_back(&n);
  std::sort(sorted.begin(), sorted.end(), [](const NodeFacts *a, const NodeFacts *b) {
    if (kind_order(a->kind) != kind_order(b->kind)) return kind_order(a->kind) < kind_order(b->kind);
    if (a->bandwidth_mib_s.has_value() != b->bandwidth_mib_s.has_value()) return a->bandwidth_mib_s.has_value();
    if (a->bandwidth_mib_s && *a->bandwidth_mib_s != *b->bandwidth_mib_s) return *a->bandwidth_mib_s > *b->bandwidth_mib_s;
    if (a->latency_ns.has_value() != b->latency_ns.has_value()) return a->latency_ns.has_value();
    if (a->latency_ns && *a->latency_ns != *b->latency_ns) return *a->latency_ns < *b->latency_ns;
    if (a->access_distance.has_value() != b->access_distance.has_value()) return a->access_distance.has_value();
    if (a->access_distance && *a->access_distance != *b->access_distance) return *a->access_distance < *b->access_distance;
    return a->os_index < b->os_index;
  });

  std::vector<Group> groups;
  for (const NodeFacts *n : sorted) {
    Group *home = nullptr;
    for (Group &g : groups) {
      if (g.kind != n->kind || !same_performance(*g.nodes.front(), *n)) continue;
      if (opts.use_hwloc_memory_tiers && g.nodes.front()->memory_tier != n->memory_tier) {
        g.split_by_memory_tier = true;
        continue;
      }
      home = &g;
      break;
    }
    if (!home) {
      groups.push_back(Group{n->kind, {}, {}, {}, {}, false});
      home = &groups.back();
    }
    home->nodes.push_back(n);
  }

  for (Group &g : groups) {
    for (const NodeFacts *n : g.nodes) {
      // The tier promises what its slowest node gives.
      if (n->bandwidth_mib_s) g.bw = std::min(g.bw.value_or(*n->bandwidth_mib_s), *n->bandwidth_mib_s);
      if (n->latency_ns) g.lat = std::max(g.lat.value_or(*n->latency_ns), *n->latency_ns);
      if (n->access_distance) g.dist = std::max(g.dist.value_or(*n->access_distance), *n->access_distance);
    }
    std::sort(g.nodes.begin(), g.nodes.end(), [](const NodeFacts *a, const NodeFacts *b) { return a->os_index < b->os_index; });
  }

  // Order: by kind (then distance, then first node); then the tiers with a bandwidth are
  // re-sorted by it among the places they hold, then those with only a latency by latency. Mixed
  // evidence thus never makes the order depend on comparison order.
  std::vector<size_t> idx(groups.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const Group &x = groups[a], &y = groups[b];
    if (kind_order(x.kind) != kind_order(y.kind)) return kind_order(x.kind) < kind_order(y.kind);
    if (x.dist.has_value() != y.dist.has_value()) return x.dist.has_value();
    if (x.dist && *x.dist != *y.dist) return *x.dist < *y.dist;
    return x.nodes.front()->os_index < y.nodes.front()->os_index;
  });
  auto resort = [&](auto has, auto before) {
    std::vector<size_t> slots, members;
    for (size_t pos = 0; pos < idx.size(); ++pos)
      if (has(groups[idx[pos]])) {
        slots.push_back(pos);
        members.push_back(idx[pos]);
      }
    std::stable_sort(members.begin(), members.end(), [&](size_t a, size_t b) { return before(groups[a], groups[b]); });
    for (size_t k = 0; k < slots.size(); ++k) idx[slots[k]] = members[k];
  };
  resort([](const Group &g) { return g.bw.has_value(); },
         [](const Group &a, const Group &b) {
           if (*a.bw != *b.bw) return *a.bw > *b.bw;
           if (a.lat && b.lat && *a.lat != *b.lat) return *a.lat < *b.lat;
           return false;
         });
  resort([](const Group &g) { return !g.bw.has_value() && g.lat.has_value(); },
         [](const Group &a, const Group &b) { return *a.lat < *b.lat; });

  std::vector<TierDesc> tiers;
  for (size_t pos = 0; pos < idx.size(); ++pos) {
    const Group &g = groups[idx[pos]];
    TierDesc t;
    t.rank = static_cast<int>(pos);
    t.kind = g.kind;
    for (const NodeFacts *n : g.nodes) {
      t.numa_nodes.push_back(n->os_index);
      t.capacity_bytes += n->capacity_bytes;
    }
    t.bandwidth_mib_s = g.bw;
    t.latency_ns = g.lat;
    t.evidence = merge_facts(g.nodes);
    if (g.nodes.size() > 1) {
      std::string how = g.bw    ? "bandwidths within 10% of each other"
                        : g.lat ? "latencies within 10% of each other"
                        : g.dist ? "no bandwidth or latency known, NUMA distances within 10%"
                                 : "no bandwidth, latency or distance known";
      t.evidence.push_back("grouped: " + std::to_string(g.nodes.size()) + " nodes of kind " + tier_kind_name(g.kind) +
                           ", " + how + ", whatever socket they sit on" + (g.bw ? "; the tier reports the lowest bandwidth" : ""));
    }
    if (g.split_by_memory_tier) t.evidence.push_back("split from nodes of the same kind and performance by hwloc's MemoryTier info");
    t.evidence.push_back(g.bw    ? std::string("ranked by bandwidth")
                         : g.lat ? std::string("ranked by latency (no bandwidth known)")
                                 : std::string("ranked by kind (no bandwidth or latency known): gpu, hbm, dram, cxl, spm, unknown, nvm"));
    tiers.push_back(std::move(t));
  }
  return tiers;
}

std::vector<std::string> unused_memory_remarks(hwloc_topology_t t, const std::vector<TierDesc> &tiers) {
  std::vector<std::string> dax, cxl;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(t, o));) {
    if (!o->name) continue;
    std::string dax_type = info_of(o, "DAXType");
    if (!dax_type.empty()) {
      std::string s = std::string(o->name) + " (" + dax_type;
      std::string size = info_of(o, "Size");  // KiB
      if (!size.empty()) s += ", " + format_bytes(std::strtoull(size.c_str(), nullptr, 10) * 1024ull);
      dax.push_back(s + ")");
      continue;
    }
    std::string ram = info_of(o, "CXLRAMSize"), pmem = info_of(o, "CXLPMEMSize");
    if ((o->subtype && lower(o->subtype) == "cxlmem") || !ram.empty() || !pmem.empty()) {
      std::string s = std::string(o->name) + " (";
      if (!ram.empty()) s += "volatile " + format_bytes(std::strtoull(ram.c_str(), nullptr, 10) * 1024ull);
      if (!pmem.empty()) s += std::string(ram.empty() ? "" : ", ") + "persistent " + format_bytes(std::strtoull(pmem.c_str(), nullptr, 10) * 1024ull);
      if (ram.empty() && pmem.empty()) s += "size unknown";
      cxl.push_back(s + ")");
    }
  }
  std::vector<std::string> out;
  auto join = [](const std::vector<std::string> &v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s;
  };
  if (!dax.empty())
    out.push_back("DAX devices not onlined as NUMA nodes, so they are no tier: " + join(dax) +
                  " (`daxctl reconfigure-device --mode=system-ram` onlines one).");
  bool have_cxl_tier = std::any_of(tiers.begin(), tiers.end(), [](const TierDesc &x) { return x.kind == TierKind::cxl; });
  if (!cxl.empty() && !have_cxl_tier)
    out.push_back("CXL memory devices are present but no NUMA node is CXL memory: " + join(cxl) +
                  " (their memory becomes a tier once a CXL region is created and onlined as a NUMA node).");
  return out;
}

Topology classify_topology(hwloc_topology_t t, TopologySource source, const std::string &origin,
                           const ClassifyOptions &opts) {
  Topology topo;
  topo.source = source;
  topo.hwloc_version = hwloc_runtime_version();
  topo.origin = origin;
  std::vector<NodeFacts> nodes = collect_node_facts(t);
  topo.numa_node_count = static_cast<unsigned>(nodes.size());
  topo.tiers = group_into_tiers(nodes, opts);
  std::vector<std::string> remarks;
  if (source == TopologySource::xml) {
    if (const char *writer = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), "hwlocVersion"))
      remarks.push_back(std::string("The file was written by hwloc ") + writer + ".");
  }
  for (std::string &r : unused_memory_remarks(t, topo.tiers)) remarks.push_back(std::move(r));
  for (size_t i = 0; i < remarks.size(); ++i) topo.note += (i ? " " : "") + remarks[i];
  return topo;
}

Topology embedded_default_on(const std::vector<unsigned> &host_nodes, uint64_t host_bytes) {
  Topology topo;
  topo.source = TopologySource::emulated;
  topo.hwloc_version = hwloc_runtime_version();
  topo.origin = "embedded default";
  topo.numa_node_count = static_cast<unsigned>(host_nodes.size());
  const std::string on = (host_nodes.size() == 1 ? "NUMA node " : "NUMA nodes ") + format_node_list(host_nodes);
  topo.note = "EMULATED: the embedded default topology; all three tiers are laid on host memory (" + on +
              ") and their bandwidth and latency are declared, not measured.";
  struct Declared {
    TierKind kind;
    double bw, lat;
    uint64_t gib;
  };
  // Declared figures: HBM3 stack-class bandwidth, DDR5 8-channel socket, one CXL x8 expander
  // (see SPEC.md: about 36 GB/s, 2-5x DRAM latency). MiB/s (higher is better), ns (lower is better).
  const Declared declared[] = {
      {TierKind::hbm, 819200, 120, 4},
      {TierKind::dram, 262144, 100, 16},
      {TierKind::cxl, 34816, 250, 64},
  };
  int rank = 0;
  for (const Declared &d : declared) {
    TierDesc t;
    t.rank = rank++;
    t.kind = d.kind;
    t.numa_nodes = host_nodes;
    t.capacity_bytes = d.gib << 30;
    t.bandwidth_mib_s = d.bw;
    t.latency_ns = d.lat;
    t.emulated = true;
    t.evidence = {"declared by the embedded default topology",
                  "emulated: laid on host memory of " + on + "; bandwidth " + fmt_num(d.bw) + " MiB/s, latency " +
                      fmt_num(d.lat) + " ns and capacity " + std::to_string(d.gib) + " GiB are declared, not measured"};
    topo.tiers.push_back(std::move(t));
  }
  uint64_t declared_total = 0;
  for (const TierDesc &t : topo.tiers) declared_total += t.capacity_bytes;
  if (host_bytes && declared_total > host_bytes)
    topo.note += " The declared capacities (" + format_bytes(declared_total) + " in all) exceed the host memory they are laid on (" +
                 format_bytes(host_bytes) + "): the runtime's tier budgets, not these figures, bound what is used.";
  return topo;
}

}  // namespace cxltier::topo
