// SPDX-License-Identifier: Apache-2.0
// cxltq-guest: the checks that run inside the multi-NUMA QEMU guest and are not the project's own
// programs: the libnuma placement mechanics (until the numa tier backend's own test replaces
// it) and the verifiers of `cxltier topo|run|bench --json` output (also in the CXL guest). The last line it prints is
// the check's one-line detail; exit status 0 pass, 1 fail, 77 skip (see tests/qemu/guest/init).
#include "guest_util.hpp"

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace cxltq;

// ---------------------------------------------------------------------------------------------
// numa-placement: a "block" bound to each memory node is verified page by page with move_pages
// in query mode; then it is moved to every other node (move_pages, and mbind with MPOL_MF_MOVE)
// and after each move every page must report the target node and every byte must be intact.

// "byte 4096 is 0x00, want 0x5c; 4096 of 1060864 bytes differ, in 1 of 259 pages"
std::string describe_bad(const uint8_t *p, size_t n, uint64_t seed, size_t first) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t count = 0, bad_pages = 0;
  for (size_t pg = 0; pg < n; pg += page) {
    size_t here = 0;
    for (size_t i = pg; i < pg + page && i < n; ++i) here += p[i] != pattern_byte(seed, i);
    count += here;
    bad_pages += here != 0;
  }
  char buf[200];
  std::snprintf(buf, sizeof buf, "byte %zu is 0x%02x, want 0x%02x; %zu of %zu bytes differ, in %zu of %zu pages", first,
                p[first], pattern_byte(seed, first), count, n, bad_pages, (n + page - 1) / page);
  return buf;
}

struct PageNodes {
  size_t on_target = 0;
  std::string first_wrong;  // "page 3 on node 0" or "page 3 status -14 (Bad address)"
};

// Queries the node of every page (move_pages with nodes == NULL changes nothing).
PageNodes query_pages(uint8_t *p, size_t pages, size_t page_bytes, int target) {
  std::vector<void *> addrs(pages);
  std::vector<int> status(pages, -12345);
  for (size_t i = 0; i < pages; ++i) addrs[i] = p + i * page_bytes;
  PageNodes r;
  if (move_pages(0, pages, addrs.data(), nullptr, status.data(), 0) != 0) {
    r.first_wrong = std::string("move_pages query failed: ") + std::strerror(errno);
    return r;
  }
  for (size_t i = 0; i < pages; ++i) {
    if (status[i] == target) {
      ++r.on_target;
    } else if (r.first_wrong.empty()) {
      r.first_wrong = status[i] >= 0 ? "page " + std::to_string(i) + " on node " + std::to_string(status[i])
                                     : "page " + std::to_string(i) + " status " + std::to_string(status[i]) + " (" +
                                           std::strerror(-status[i]) + ")";
    }
  }
  return r;
}

unsigned long node_mask(int node) { return 1ul << node; }

int numa_placement() {
  if (numa_available() < 0) return finish(kFail, "libnuma: NUMA not available in the guest kernel");
  std::vector<int> nodes;
  for (int n = 0; n <= numa_max_node(); ++n) {
    long long free_bytes = 0;
    if (numa_bitmask_isbitset(numa_all_nodes_ptr, n) && numa_node_size64(n, &free_bytes) > 0) nodes.push_back(n);
  }
  if (nodes.size() < 2)
    return finish(kSkip, "only " + std::to_string(nodes.size()) + " memory node(s): nothing to place or move between");
  if (numa_max_node() >= 64) return finish(kFail, "more than 64 nodes: this check uses a one-word node mask");

  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // 1 MiB and 3 pages: not a huge-page multiple, so the tail pages are small pages either way.
  const size_t pages = (1u << 20) / page + 3;
  const size_t bytes = pages * page;
  int failures = 0;
  size_t pages_checked = 0, moves = 0;
  auto report = [&](const std::string &what) {
    std::printf("numa-placement: FAIL %s\n", what.c_str());
    ++failures;
  };

  for (size_t bi = 0; bi < nodes.size(); ++bi) {
    const int home = nodes[bi];
    const uint64_t seed = 1000 + static_cast<uint64_t>(home);
    void *mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return finish(kFail, std::string("mmap failed: ") + std::strerror(errno));
    auto *p = static_cast<uint8_t *>(mem);

    // Bind (not prefer) to the home node, then first touch: every page must land there.
    unsigned long mask = node_mask(home);
    if (mbind(p, bytes, MPOL_BIND, &mask, sizeof(mask) * 8, MPOL_MF_STRICT) != 0) {
      report("mbind(MPOL_BIND, node " + std::to_string(home) + "): " + std::strerror(errno));
      munmap(p, bytes);
      continue;
    }
    fill(p, bytes, seed);
    PageNodes q = query_pages(p, pages, page, home);
    pages_checked += pages;
    size_t bad = first_bad_byte(p, bytes, seed);
    std::printf("numa-placement: block bound to node %d: %zu/%zu pages on node %d, bytes %s\n", home, q.on_target,
                pages, home, bad == bytes ? "intact" : "CHANGED");
    if (q.on_target != pages) report("bound to node " + std::to_string(home) + ": " + q.first_wrong);
    if (bad != bytes) report("written on node " + std::to_string(home) + ": " + describe_bad(p, bytes, seed, bad));

    // Move through every other node and back home, alternating the two kernel interfaces.
    std::vector<int> route;
    for (size_t k = 1; k < nodes.size(); ++k) route.push_back(nodes[(bi + k) % nodes.size()]);
    route.push_back(home);
    int from = home;
    for (size_t step = 0; step < route.size(); ++step) {
      const int to = route[step];
      const bool use_mbind = step % 2 == 1;
      long rc;
      if (use_mbind) {
        unsigned long to_mask = node_mask(to);
        rc = mbind(p, bytes, MPOL_BIND, &to_mask, sizeof(to_mask) * 8, MPOL_MF_MOVE | MPOL_MF_STRICT);
      } else {
        std::vector<void *> addrs(pages);
        std::vector<int> targets(pages, to), status(pages, -12345);
        for (size_t i = 0; i < pages; ++i) addrs[i] = p + i * page;
        rc = move_pages(0, pages, addrs.data(), targets.data(), status.data(), MPOL_MF_MOVE);
        size_t moved = 0;
        for (int s : status) moved += s == to;
        if (rc == 0 && moved != pages)
          report("move_pages " + std::to_string(from) + "->" + std::to_string(to) + ": status says " +
                 std::to_string(moved) + "/" + std::to_string(pages) + " pages on the target");
        // Keep the policy in step with the pages, so a later fault cannot bring one back.
        unsigned long to_mask = node_mask(to);
        mbind(p, bytes, MPOL_BIND, &to_mask, sizeof(to_mask) * 8, 0);
      }
      const char *how = use_mbind ? "mbind(MPOL_MF_MOVE)" : "move_pages";
      if (rc != 0) {
        report(std::string(how) + " " + std::to_string(from) + "->" + std::to_string(to) + ": " + std::strerror(errno));
        break;
      }
      ++moves;
      q = query_pages(p, pages, page, to);
      pages_checked += pages;
      bad = first_bad_byte(p, bytes, seed);
      std::printf("numa-placement: %s %d->%d: %zu/%zu pages on node %d, bytes %s\n", how, from, to, q.on_target,
                  pages, to, bad == bytes ? "intact" : "CHANGED");
      if (q.on_target != pages)
        report(std::string(how) + " " + std::to_string(from) + "->" + std::to_string(to) + ": " + q.first_wrong);
      if (bad != bytes)
        report(std::string(how) + " " + std::to_string(from) + "->" + std::to_string(to) + ": " +
               describe_bad(p, bytes, seed, bad));
      from = to;
      if (bad != bytes) fill(p, bytes, seed);  // report each move's own damage, not the first one's
    }
    munmap(p, bytes);
  }

  // A node that does not exist must be refused, never silently replaced by node 0.
  {
    const int absent = numa_max_node() + 1;
    void *mem = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned long mask = node_mask(absent);
    if (mem != MAP_FAILED) {
      long rc = mbind(mem, page, MPOL_BIND, &mask, sizeof(mask) * 8, MPOL_MF_STRICT);
      if (rc == 0) report("mbind to absent node " + std::to_string(absent) + " succeeded");
      munmap(mem, page);
    }
  }

  std::ostringstream d;
  d << nodes.size() << " nodes, " << pages << " pages per block, " << pages_checked << " page placements queried, "
    << moves << " moves";
  if (failures) return finish(kFail, std::to_string(failures) + " failure(s); " + d.str());
  return finish(kPass, d.str() + ", bytes intact");
}

// ---------------------------------------------------------------------------------------------
// Verifiers of the CLI's JSON output.

bool read_json(const char *path, nlohmann::json &out, std::string &err) {
  std::ifstream in(path);
  if (!in) {
    err = std::string("cannot open ") + path;
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    out = nlohmann::json::parse(ss.str());
  } catch (const std::exception &e) {
    err = std::string(path) + ": not JSON: " + e.what();
    return false;
  }
  return true;
}

struct ExpectedTier {
  int node;
  double bandwidth_mib_s;
  double latency_ns;
};

// "2:81920:120,0:20480:100,1:5120:300" (node:MiB/s:ns, fastest first).
bool parse_expect(const std::string &s, std::vector<ExpectedTier> &out) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    ExpectedTier t{};
    if (std::sscanf(item.c_str(), "%d:%lf:%lf", &t.node, &t.bandwidth_mib_s, &t.latency_ns) != 3) return false;
    out.push_back(t);
  }
  return !out.empty();
}

bool near(const nlohmann::json &v, double want) {
  return v.is_number() && std::fabs(v.get<double>() - want) <= 0.005 * want + 1e-9;
}

// `cxltier topo --json --topology this-system`: one tier per expected node, in the expected
// order (fastest first), carrying the HMAT bandwidth and latency.
int verify_topo(const char *path, const std::string &expect_arg) {
  std::vector<ExpectedTier> expect;
  if (!parse_expect(expect_arg, expect)) return finish(kFail, "bad expectation '" + expect_arg + "'");
  nlohmann::json j;
  std::string err;
  if (!read_json(path, j, err)) return finish(kFail, err);
  std::vector<std::string> problems;
  if (j.value("source", std::string()) != "this-system")
    problems.push_back("source is " + j.value("source", nlohmann::json()).dump() + ", want \"this-system\"");
  const nlohmann::json tiers = j.value("tiers", nlohmann::json::array());
  if (!tiers.is_array() || tiers.size() != expect.size())
    problems.push_back("found " + std::to_string(tiers.is_array() ? tiers.size() : 0) + " tiers, want " +
                       std::to_string(expect.size()));
  std::ostringstream d;
  double last_rank = -1e300;
  for (size_t i = 0; i < tiers.size(); ++i) {
    const nlohmann::json &t = tiers[i];
    std::string kind = t.value("kind", std::string("?"));
    nlohmann::json nodes = t.value("numa_nodes", nlohmann::json::array());
    nlohmann::json bw = t.value("bandwidth_mib_s", nlohmann::json());
    nlohmann::json lat = t.value("latency_ns", nlohmann::json());
    d << (i ? ", " : "") << kind << nodes.dump() << " " << bw.dump() << " MiB/s " << lat.dump() << " ns";
    const nlohmann::json rank = t.value("rank", nlohmann::json());
    if (!rank.is_number() || rank.get<double>() <= last_rank)
      problems.push_back("tier " + std::to_string(i) + " rank " + rank.dump() + " not increasing");
    else
      last_rank = rank.get<double>();
    if (!t.value("capacity_bytes", nlohmann::json()).is_number() || t["capacity_bytes"].get<double>() <= 0)
      problems.push_back("tier " + std::to_string(i) + " capacity_bytes " +
                         t.value("capacity_bytes", nlohmann::json()).dump());
    if (i >= expect.size()) continue;
    const ExpectedTier &e = expect[i];
    if (nodes != nlohmann::json::array({e.node}))
      problems.push_back("tier " + std::to_string(i) + " numa_nodes " + nodes.dump() + ", want [" +
                         std::to_string(e.node) + "]");
    if (!near(bw, e.bandwidth_mib_s))
      problems.push_back("tier " + std::to_string(i) + " bandwidth_mib_s " + bw.dump() + ", want " +
                         std::to_string(static_cast<long>(e.bandwidth_mib_s)));
    if (!near(lat, e.latency_ns))
      problems.push_back("tier " + std::to_string(i) + " latency_ns " + lat.dump() + ", want " +
                         std::to_string(static_cast<long>(e.latency_ns)));
  }
  for (const std::string &p : problems) std::printf("topo: FAIL %s\n", p.c_str());
  if (!problems.empty()) return finish(kFail, problems.front() + " (" + std::to_string(problems.size()) + " problem(s)); got " + d.str());
  return finish(kPass, std::to_string(tiers.size()) + " tiers: " + d.str());
}

// `cxltier topo --json` in the CXL guest: the node that the CXL Type-3 device brought online
// (through cxl, ndctl and daxctl) is a tier of its own, known as CXL memory from its DAX
// information (QEMU 7.2 gives it no HMAT entry). The device is persistent memory (QEMU 7.2 has
// no volatile Type-3), which hwloc 2.9 reports as subtype NVM and hwloc 2.11+ as tier
// "CXL-NVM": kind "cxl" and kind "nvm" are both accepted, provided the evidence names the CXL
// root (ACPI0017) that the DAX parent path goes through.
int verify_topo_cxl(const char *path, const std::string &node_arg) {
  char *end = nullptr;
  const long node = std::strtol(node_arg.c_str(), &end, 10);
  if (node_arg.empty() || *end != '\0') return finish(kFail, "no CXL node number (did cxl-online pass?)");
  nlohmann::json j;
  std::string err;
  if (!read_json(path, j, err)) return finish(kFail, err);
  const nlohmann::json tiers = j.value("tiers", nlohmann::json::array());
  for (size_t i = 0; i < tiers.size(); ++i) {
    const nlohmann::json &t = tiers[i];
    const nlohmann::json nodes = t.value("numa_nodes", nlohmann::json::array());
    bool has = false;
    for (const auto &n : nodes) has = has || (n.is_number_integer() && n.get<long>() == node);
    if (!has) continue;
    const std::string kind = t.value("kind", std::string("?"));
    const std::string evidence = t.value("evidence", nlohmann::json()).dump();
    const std::string d = "node " + std::to_string(node) + " in tier " + std::to_string(i) + " of " +
                          std::to_string(tiers.size()) + ": kind " + kind + ", numa_nodes " + nodes.dump();
    std::printf("topo-cxl: evidence %s\n", evidence.c_str());
    if (nodes.size() != 1) return finish(kFail, d + " (want a tier of its own)");
    if (kind != "cxl" && kind != "nvm") return finish(kFail, d + " (want kind cxl, or nvm for CXL persistent memory)");
    if (evidence.find("ACPI0017") == std::string::npos)
      return finish(kFail, d + " (the evidence does not name the CXL root ACPI0017 of its DAX parent)");
    return finish(kPass, d + ", DAX parent through the CXL root ACPI0017");
  }
  return finish(kFail, "node " + std::to_string(node) + " is in no tier");
}

// Looks for a numeric field anywhere in the document whose name contains `needle`.
void find_numbers(const nlohmann::json &j, const std::string &needle, const std::string &at,
                  std::vector<std::pair<std::string, double>> &out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      std::string where = at.empty() ? it.key() : at + "." + it.key();
      if (it.key().find(needle) != std::string::npos && it.value().is_number())
        out.emplace_back(where, it.value().get<double>());
      find_numbers(it.value(), needle, where, out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) find_numbers(j[i], needle, at + "[" + std::to_string(i) + "]", out);
  }
}

// `cxltier run --json`: parses, and every integrity counter is zero. The summary's exact schema
// is cmd_run.cpp's; this accepts any field whose name contains "integrity".
int verify_run(const char *path) {
  nlohmann::json j;
  std::string err;
  if (!read_json(path, j, err)) return finish(kFail, err);
  std::vector<std::pair<std::string, double>> counters;
  find_numbers(j, "integrity", "", counters);
  if (counters.empty()) return finish(kFail, "no integrity counter in the JSON summary");
  for (auto &[name, value] : counters)
    if (value != 0) return finish(kFail, name + " = " + std::to_string(value));
  return finish(kPass, std::to_string(counters.size()) + " integrity counter(s), all 0 (" + counters.front().first + ")");
}

// `cxltier bench --json` (schema in bench/README.md): on a multi-node machine the kernel page-migration
// rows are measured (a number, not null), and every tier pair has a positive rate.
int verify_bench(const char *path) {
  nlohmann::json j;
  std::string err;
  if (!read_json(path, j, err)) return finish(kFail, err);
  std::vector<std::string> problems;
  for (const char *k : {"memcpy_gbps", "memcpy_1thread_gbps", "move_pages_4k_gbps"})
    if (!j.value(k, nlohmann::json()).is_number() || j[k].get<double>() <= 0)
      problems.push_back(std::string(k) + " = " + j.value(k, nlohmann::json()).dump() + " (want a positive number)");
  const nlohmann::json pairs = j.value("pairs", nlohmann::json::array());
  if (!pairs.is_array() || pairs.empty()) problems.push_back("no tier pairs");
  for (const auto &p : pairs)
    if (!p.value("gbps", nlohmann::json()).is_number() || p["gbps"].get<double>() <= 0)
      problems.push_back("pair " + p.value("from", nlohmann::json()).dump() + "->" +
                         p.value("to", nlohmann::json()).dump() + " gbps " + p.value("gbps", nlohmann::json()).dump());
  for (const std::string &p : problems) std::printf("bench: FAIL %s\n", p.c_str());
  if (!problems.empty()) return finish(kFail, problems.front() + " (" + std::to_string(problems.size()) + " problem(s))");
  std::ostringstream d;
  d << pairs.size() << " tier pairs; move_pages 4 KiB " << j["move_pages_4k_gbps"].dump() << " GB/s, memcpy "
    << j["memcpy_gbps"].dump() << " GB/s (TCG guest: rates are not representative)";
  return finish(kPass, d.str());
}

int usage() {
  std::fprintf(stderr,
               "usage: cxltq-guest numa-placement\n"
               "       cxltq-guest verify-topo FILE NODE:MIBS:NS[,...]   (fastest first)\n"
               "       cxltq-guest verify-topo-cxl FILE CXL_NODE\n"
               "       cxltq-guest verify-run FILE\n"
               "       cxltq-guest verify-bench FILE\n");
  return 2;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  const std::string cmd = argv[1];
  if (cmd == "numa-placement" && argc == 2) return numa_placement();
  if (cmd == "verify-topo" && argc == 4) return verify_topo(argv[2], argv[3]);
  if (cmd == "verify-topo-cxl" && argc == 4) return verify_topo_cxl(argv[2], argv[3]);
  if (cmd == "verify-run" && argc == 3) return verify_run(argv[2]);
  if (cmd == "verify-bench" && argc == 3) return verify_bench(argv[2]);
  return usage();
}
