// SPDX-License-Identifier: Apache-2.0
// Tier budgets summed per host NUMA node and over the host (host_budget.hpp).
#include "lib/runtime/host_budget.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <cstdio>
#include <cstring>
#include <map>
#include <unistd.h>

namespace cxltier {

uint64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

uint64_t host_node_memory_bytes(unsigned node) {
  const std::string path = "/sys/devices/system/node/node" + std::to_string(node) + "/meminfo";
  FILE *f = std::fopen(path.c_str(), "re");
  if (!f) return 0;
  char line[256];
  uint64_t kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    // "Node 0 MemTotal:       24563012 kB"
    const char *p = std::strstr(line, "MemTotal:");
    unsigned long long v = 0;
    if (p && std::sscanf(p + 9, "%llu", &v) == 1) {
      kib = v;
      break;
    }
  }
  std::fclose(f);
  return kib * 1024;
}

void check_host_budgets(const std::vector<HostBudget> &tiers, uint64_t host_bytes,
                        uint64_t (*node_bytes)(unsigned node)) {
  auto list = [](const std::vector<std::pair<std::string, uint64_t>> &parts) {
    std::string s;
    for (const auto &[name, bytes] : parts) s += (s.empty() ? "" : " + ") + name + " " + format_bytes(bytes);
    return s;
  };
  std::map<unsigned, std::pair<uint64_t, std::vector<std::pair<std::string, uint64_t>>>> per_node;
  uint64_t total = 0;
  std::vector<std::pair<std::string, uint64_t>> all;
  for (const HostBudget &t : tiers) {
    total += t.budget_bytes;
    all.emplace_back(t.tier + (t.emulated ? " (emulated)" : ""), t.budget_bytes);
    if (t.emulated || t.nodes.empty()) continue;
    const uint64_t share = t.budget_bytes / t.nodes.size();
    for (unsigned n : t.nodes) {
      per_node[n].first += share;
      per_node[n].second.emplace_back(t.tier, share);
    }
  }
  for (const auto &[node, sum] : per_node) {
    const uint64_t have = node_bytes ? node_bytes(node) : 0;
    if (have != 0 && sum.first > have)
      fail(CXLT_ERROR_CONFIG, "tiers' budgets on NUMA node ", node, " add up to ", format_bytes(sum.first), " (",
           list(sum.second), "), more than the node's ", format_bytes(have), " of memory; lower them");
  }
  if (host_bytes != 0 && total > host_bytes)
    fail(CXLT_ERROR_CONFIG, "tiers' budgets add up to ", format_bytes(total), " of host memory (", list(all),
         "), more than this host's ", format_bytes(host_bytes), "; lower them");
}

}  // namespace cxltier
