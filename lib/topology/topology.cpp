// SPDX-License-Identifier: Apache-2.0
// The public tier-discovery API: which topology a spec names (auto, this-system, emulated, an
// XML file), the embedded default, and the JSON and table renderings `cxltier topo` prints.
#include <cxltier/error.hpp>
#include <cxltier/topology.hpp>
#include <cxltier/tools/topology_text.hpp>
#include <cxltier/tools/units.hpp>

#include "lib/topology/gpu.hpp"
#include "lib/topology/classify.hpp"
#include "lib/topology/hwloc_load.hpp"
#include "lib/core/text.hpp"

#include <nlohmann/json.hpp>
#include <numa.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <sstream>

namespace cxltier {

const char *tier_kind_name(TierKind kind) noexcept {
  return cxlt_tier_kind_name(static_cast<cxlt_tier_kind_t>(kind));
}

std::optional<TierKind> parse_tier_kind(std::string_view name) noexcept {
  for (TierKind k : {TierKind::hbm, TierKind::gpu, TierKind::dram, TierKind::cxl, TierKind::nvm, TierKind::spm,
                     TierKind::unknown, TierKind::remote})
    if (text::iequal(name, tier_kind_name(k))) return k;  // no copy: noexcept holds
  return std::nullopt;
}

const char *topology_source_name(TopologySource s) noexcept {
  switch (s) {
    case TopologySource::this_system: return "this-system";
    case TopologySource::xml: return "xml";
    case TopologySource::emulated: return "emulated";
  }
  return "emulated";
}

namespace {

// The host nodes the emulated tiers are laid on: the nodes this process may allocate on that
// have CPUs (libnuma, so no hwloc environment variable can redirect it). Node 0 without NUMA.
std::vector<unsigned> host_nodes_with_cpus() {
  // libnuma's numa_node_to_cpus fills a process-wide cache without a lock: runtimes opened on
  // several threads at once (cxltier sweep) raced there (ThreadSanitizer). One caller at a time.
  static std::mutex libnuma_mu;
  std::lock_guard lk(libnuma_mu);
  std::vector<unsigned> out;
  if (numa_available() < 0) return {0};
  struct bitmask *mems = numa_get_mems_allowed();
  struct bitmask *cpus = numa_allocate_cpumask();
  int max = numa_max_node();
  for (int n = 0; n <= max; ++n) {
    if (!mems || !numa_bitmask_isbitset(mems, static_cast<unsigned>(n))) continue;
    numa_bitmask_clearall(cpus);
    if (numa_node_to_cpus(n, cpus) == 0 && numa_bitmask_weight(cpus) > 0) out.push_back(static_cast<unsigned>(n));
  }
  if (cpus) numa_bitmask_free(cpus);
  if (mems) numa_bitmask_free(mems);
  if (out.empty()) out.push_back(0);
  return out;
}

nlohmann::ordered_json number_or_null(const std::optional<double> &v) {
  if (!v) return nullptr;
  if (std::floor(*v) == *v && std::fabs(*v) < 9e15) return static_cast<int64_t>(*v);
  return *v;
}

std::string fmt_fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

Topology discover_this_system() {
  topo::HwlocTopology h = topo::load_live();
  Topology t = topo::classify_topology(h.get(), TopologySource::this_system, "this machine");
  // CUDA devices' memory is no NUMA node: tiers/cuda adds a gpu tier per device, or says in
  // the note why there is none (no driver, a build without the CUDA tier).
  append_gpu_tiers(t);
  return t;
}

Topology load_topology_xml(const std::string &path) {
  topo::HwlocTopology h = topo::load_xml_file(path);
  return topo::classify_topology(h.get(), TopologySource::xml, path);
}

Topology embedded_default_topology() {
  std::vector<unsigned> host = host_nodes_with_cpus();
  uint64_t bytes = 0;
  if (numa_available() >= 0)
    for (unsigned n : host) {
      long long size = numa_node_size64(static_cast<int>(n), nullptr);
      if (size > 0) bytes += static_cast<uint64_t>(size);
    }
  return topo::embedded_default_on(host, bytes);
}

namespace {
// The topology specs that name no file. kEmbedded is the embedded default topology (a topology,
// whatever backends its tiers later get), spelled once here.
constexpr std::string_view kAuto = "auto", kThisSystem = "this-system", kEmbedded = "emulated";
}  // namespace

bool is_topology_keyword(std::string_view spec) noexcept {
  return spec.empty() || spec == kAuto || spec == kThisSystem || spec == kEmbedded;
}

Topology discover_topology(std::string_view spec) {
  if (spec == kEmbedded) return embedded_default_topology();
  if (spec == kThisSystem) return discover_this_system();
  if (!is_topology_keyword(spec)) return load_topology_xml(std::string(spec));

  Topology live = discover_this_system();
  // CUDA GPU tiers (tiers/cuda) do not count: a runtime takes them only when configured
  // (docs/gpu.md), and they stay in front of whichever host tiers are chosen.
  const size_t host_tiers = static_cast<size_t>(
      std::count_if(live.tiers.begin(), live.tiers.end(), [](const TierDesc &t) { return t.cuda_device < 0; }));
  std::ostringstream why;
  why << "auto: this machine has " << live.numa_node_count << " NUMA node" << (live.numa_node_count == 1 ? "" : "s")
      << " forming " << host_tiers << " tier" << (host_tiers == 1 ? "" : "s");
  if (host_tiers >= 2) {
    live.note = why.str() + ", so its own tiers are used." + (live.note.empty() ? "" : " " + live.note);
    return live;
  }
  // Lay the emulated tiers on the machine's ordinary memory (its DRAM tier), else on all of it.
  std::vector<unsigned> host;
  for (const TierDesc &t : live.tiers)
    if (t.kind == TierKind::dram) host.insert(host.end(), t.numa_nodes.begin(), t.numa_nodes.end());
  if (host.empty())
    for (const TierDesc &t : live.tiers) host.insert(host.end(), t.numa_nodes.begin(), t.numa_nodes.end());
  if (host.empty()) host = host_nodes_with_cpus();
  std::sort(host.begin(), host.end());
  uint64_t host_bytes = 0;
  for (const TierDesc &t : live.tiers)  // host is a union of whole tiers
    if (t.cuda_device < 0 && std::all_of(t.numa_nodes.begin(), t.numa_nodes.end(),
                    [&](unsigned n) { return std::binary_search(host.begin(), host.end(), n); }))
      host_bytes += t.capacity_bytes;
  Topology emu = topo::embedded_default_on(host, host_bytes);
  emu.note = why.str() + ", fewer than the 2 a tiered cache needs, so the embedded default topology is used. " + emu.note;
  add_gpu_tiers(emu, gpu_discovery());  // real GPUs in front of the emulated host tiers, or why there are none
  return emu;
}

std::string topology_to_json(const Topology &topo, int indent) {
  nlohmann::ordered_json j;
  j["source"] = topology_source_name(topo.source);
  j["hwloc_version"] = topo.hwloc_version;
  j["origin"] = topo.origin;
  j["note"] = topo.note;
  nlohmann::ordered_json tiers = nlohmann::ordered_json::array();
  for (const TierDesc &t : topo.tiers) {
    nlohmann::ordered_json x;
    x["rank"] = t.rank;
    x["kind"] = tier_kind_name(t.kind);
    x["numa_nodes"] = t.numa_nodes;
    x["capacity_bytes"] = t.capacity_bytes;
    x["bandwidth_mib_s"] = number_or_null(t.bandwidth_mib_s);
    x["latency_ns"] = number_or_null(t.latency_ns);
    x["evidence"] = t.evidence;
    x["emulated"] = t.emulated;
    tiers.push_back(std::move(x));
  }
  j["tiers"] = std::move(tiers);
  return j.dump(indent);
}

std::string topology_to_table(const Topology &topo) {
  std::ostringstream os;
  bool any_emulated = std::any_of(topo.tiers.begin(), topo.tiers.end(), [](const TierDesc &t) { return t.emulated; });
  os << "Topology: " << topology_source_name(topo.source) << " (" << topo.origin << "), hwloc " << topo.hwloc_version
     << ", " << topo.numa_node_count << " NUMA node" << (topo.numa_node_count == 1 ? "" : "s") << ", "
     << topo.tiers.size() << " tier" << (topo.tiers.size() == 1 ? "" : "s") << (any_emulated ? ", EMULATED" : "")
     << "\n";
  if (!topo.note.empty()) os << "Note: " << topo.note << "\n";
  os << "\n";

  const std::vector<std::string> head = {"rank",           "kind",
                                         "NUMA nodes",     "capacity (GiB)",
                                         "bandwidth (MiB/s, higher is better)", "latency (ns, lower is better)",
                                         "emulated"};
  std::vector<std::vector<std::string>> rows;
  for (const TierDesc &t : topo.tiers) {
    std::vector<unsigned> nodes = t.numa_nodes;
    rows.push_back({std::to_string(t.rank), tier_kind_name(t.kind), topo::format_node_list(nodes),
                    fmt_fixed(static_cast<double>(t.capacity_bytes) / (1024.0 * 1024.0 * 1024.0), 2),
                    t.bandwidth_mib_s ? fmt_fixed(*t.bandwidth_mib_s, 0) : "unknown",
                    t.latency_ns ? fmt_fixed(*t.latency_ns, 0) : "unknown", t.emulated ? "yes" : "no"});
  }
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto &r : rows) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string> &cells) {
    for (size_t c = 0; c < cells.size(); ++c) {
      bool numeric = c == 0 || c == 3 || c == 4 || c == 5;
      std::string pad(width[c] - cells[c].size(), ' ');
      os << (c ? "  " : "") << (numeric ? pad + cells[c] : cells[c] + (c + 1 < cells.size() ? pad : ""));
    }
    os << "\n";
  };
  line(head);
  for (const auto &r : rows) line(r);
  os << "\nEvidence:\n";
  for (const TierDesc &t : topo.tiers) {
    os << "  tier " << t.rank << " (" << tier_kind_name(t.kind) << "):\n";
    for (const std::string &e : t.evidence) os << "    - " << e << "\n";
  }
  return os.str();
}

}  // namespace cxltier
