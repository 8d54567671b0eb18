// SPDX-License-Identifier: Apache-2.0
// The sum of the tiers' budgets against the host memory they are laid on, checked at open so
// that budgets which together cannot fit are refused with the figures, not met by the OOM
// killer mid-run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cxltier {

struct HostBudget {
  std::string tier;             // the tier's name, for the refusal
  uint64_t budget_bytes = 0;
  bool emulated = false;        // laid on this host's memory wherever the kernel places it
  std::vector<unsigned> nodes;  // host NUMA nodes of a real tier (its budget spread evenly)
};

// Throws Error(CXLT_ERROR_CONFIG) when the real tiers' budgets on one host NUMA node add up to
// more than that node's memory, or when every host tier's budget (emulated tiers included) adds
// up to more than this host's memory. `node_bytes(n)` gives node n's memory (0: unknown, not
// checked); `host_bytes` the whole host's (0: unknown).
void check_host_budgets(const std::vector<HostBudget> &tiers, uint64_t host_bytes,
                        uint64_t (*node_bytes)(unsigned node));

// This host's memory in bytes (sysconf), and one NUMA node's (sysfs MemTotal); 0 when unknown.
uint64_t host_memory_bytes();
uint64_t host_node_memory_bytes(unsigned node);

}  // namespace cxltier
