// SPDX-License-Identifier: Apache-2.0
// cxltq-tiers placement: the project's own stack end to end in the multi-NUMA guest. The tiers
// come from discover_this_system(); each gets a `numa` tier backend on its nodes and a BlockPool.
// Every block slot is checked page by page with move_pages in query mode (our own query, not the
// backend's), then one block travels through every tier and back, copied into a slot of the next
// tier by the runtime's copy kernels (as the migration engine moves blocks), and after every hop
// its pages are on the new tier's nodes and its bytes are intact. Run for hugetlb-first extents
// (the guest reserves 2 MiB pages on every node) and for 4 KiB pages.
// Last output line: the detail; exit status 0 pass, 1 fail, 77 skip (fewer than two tiers).
#include "guest_util.hpp"
#include "lib/memory/copy.hpp"
#include "lib/memory/pool.hpp"
#include "lib/memory/backend.hpp"

#include <cxltier/error.hpp>
#include <cxltier/topology.hpp>

#include <numaif.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace cxltier;

using namespace cxltq;

std::string nodes_text(const std::vector<unsigned> &nodes) {
  std::string s;
  for (unsigned n : nodes) s += (s.empty() ? "" : ",") + std::to_string(n);
  return s;
}

// Queries every 4 KiB page of [p, p+n): "" when all are on `nodes`, else the first that is not.
std::string pages_off_nodes(const void *p, size_t n, const std::vector<unsigned> &nodes, size_t *queried) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto base = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const size_t count = (reinterpret_cast<uintptr_t>(p) + n - base + page - 1) / page;
  std::vector<void *> addrs(count);
  std::vector<int> status(count, -12345);
  for (size_t i = 0; i < count; ++i) addrs[i] = reinterpret_cast<void *>(base + i * page);
  if (move_pages(0, count, addrs.data(), nullptr, status.data(), 0) != 0)
    return std::string("move_pages query failed: ") + std::strerror(errno);
  *queried += count;
  for (size_t i = 0; i < count; ++i) {
    bool ok = status[i] >= 0 && std::find(nodes.begin(), nodes.end(), static_cast<unsigned>(status[i])) != nodes.end();
    if (!ok)
      return "page " + std::to_string(i) + " of " + std::to_string(count) +
             (status[i] >= 0 ? " on node " + std::to_string(status[i]) : " status " + std::string(std::strerror(-status[i]))) +
             ", want node(s) " + nodes_text(nodes);
  }
  return "";
}

long free_hugepages(unsigned node) {
  std::ifstream f("/sys/devices/system/node/node" + std::to_string(node) + "/hugepages/hugepages-2048kB/free_hugepages");
  long v = 0;
  return (f >> v) ? v : 0;
}

struct Tier {
  TierDesc desc;
  std::unique_ptr<TierBackend> backend;
  std::unique_ptr<BlockPool> pool;
};

struct Totals {
  size_t blocks_placed = 0, hops = 0, pages_queried = 0, hugetlb_extents = 0, extents = 0;
  std::vector<std::string> failures;
};

void run_mode(const Topology &topo, HugePageMode mode, Totals &t) {
  const char *mode_name = mode == HugePageMode::hugetlb ? "hugetlb-first" : "4 KiB";
  // 1 MiB blocks fill 2 MiB extents exactly (huge pages); the 4 KiB run uses a block size that is
  // not a huge-page fraction, with three pages more.
  const uint64_t block = mode == HugePageMode::hugetlb ? (1u << 20) : (1u << 20) + 3 * 4096;
  const uint32_t per_extent = 2, slots = 3;  // two extents, the last one holding one slot
  auto fail = [&](const std::string &what) {
    std::printf("tier-placement: FAIL [%s] %s\n", mode_name, what.c_str());
    t.failures.push_back(std::string("[") + mode_name + "] " + what);
  };

  std::vector<Tier> tiers;
  for (const TierDesc &d : topo.tiers) {
    Tier tier{d, nullptr, nullptr};
    TierBackendParams p;
    p.tier_name = tier_kind_name(d.kind);
    p.kind = d.kind;
    p.numa_nodes = d.numa_nodes;
    p.block_bytes = block;
    p.budget_bytes = block * slots;
    p.huge_pages = mode;
    p.verify_placement = true;
    bool hugetlb_expected = mode == HugePageMode::hugetlb;
    for (unsigned n : d.numa_nodes) hugetlb_expected = hugetlb_expected && free_hugepages(n) >= 2;
    tier.backend = std::make_unique<TierBackend>("numa", p);
    BlockPoolConfig cfg;
    cfg.name = p.tier_name;
    cfg.block_bytes = block;
    cfg.budget_bytes = block * slots;
    cfg.blocks_per_extent = per_extent;
    tier.pool = std::make_unique<BlockPool>(*tier.backend, cfg);

    // Every slot of the budget, each checked page by page and for its bytes.
    std::vector<SlotId> held;
    for (uint32_t i = 0; i < slots; ++i) {
      SlotId s = kInvalidSlot;
      cxlt_result_t r = tier.pool->allocate(&s);
      if (r != CXLT_OK) {
        fail(p.tier_name + " slot " + std::to_string(i) + ": " + cxlt_result_string(r) + ": " + backend_last_error());
        break;
      }
      held.push_back(s);
      void *a = tier.pool->address(s);
      fill(a, block, 100 + s);
      std::string off = pages_off_nodes(a, block, d.numa_nodes, &t.pages_queried);
      if (!off.empty()) fail(p.tier_name + " slot " + std::to_string(s) + ": " + off);
      ++t.blocks_placed;
    }
    SlotId extra = kInvalidSlot;
    if (tier.pool->allocate(&extra) != CXLT_ERROR_OUT_OF_TIER_MEMORY)
      fail(p.tier_name + ": a slot beyond the budget of " + std::to_string(slots) + " was handed out");
    for (SlotId s : held) {
      size_t bad = first_bad_byte(tier.pool->address(s), block, 100 + s);
      if (bad != block) fail(p.tier_name + " slot " + std::to_string(s) + ": byte " + std::to_string(bad) + " changed");
      tier.pool->free(s);
    }
    BlockPool::PageCounts pc = tier.pool->page_counts();
    t.extents += tier.pool->extent_count();
    t.hugetlb_extents += pc.hugetlb;
    std::printf("tier-placement: [%s] %s node(s) %s: %u slots on their node(s); extents hugetlb %zu, thp %zu, 4k %zu\n",
                mode_name, p.tier_name.c_str(), nodes_text(d.numa_nodes).c_str(), slots, pc.hugetlb, pc.thp, pc.small);
    // Explicit huge pages only fit extents of whole 2 MiB pages; the others fall back to THP.
    size_t whole = 0;
    for (size_t i = 0; i < tier.pool->extent_count(); ++i) whole += tier.pool->extent(i).bytes % (2u << 20) == 0;
    if (hugetlb_expected && pc.hugetlb != whole)
      fail(p.tier_name + ": free 2 MiB pages on node(s) " + nodes_text(d.numa_nodes) + " but " +
           std::to_string(pc.hugetlb) + " of the " + std::to_string(whole) + " whole-2-MiB extents are hugetlb");
    tiers.push_back(std::move(tier));
  }

  // One block's journey: every tier in order, then back up to the first, one copy kernel per hop.
  std::vector<CopyKernel> kernels = available_copy_kernels();
  std::vector<size_t> route;
  for (size_t i = 0; i < tiers.size(); ++i) route.push_back(i);
  for (size_t i = tiers.size() - 1; i-- > 0;) route.push_back(i);
  const uint64_t seed = 7;
  size_t at = route[0];
  SlotId slot = kInvalidSlot;
  if (tiers[at].pool->allocate(&slot) != CXLT_OK) return fail("journey: no slot in the first tier");
  fill(tiers[at].pool->address(slot), block, seed);
  for (size_t h = 1; h < route.size(); ++h) {
    const size_t to = route[h];
    const CopyKernel k = kernels[(h - 1) % kernels.size()];
    SlotId dst = kInvalidSlot;
    cxlt_result_t r = tiers[to].pool->allocate(&dst);
    if (r != CXLT_OK) return fail("journey: no slot in tier " + std::to_string(to) + ": " + cxlt_result_string(r));
    copy_block(k, tiers[to].pool->address(dst), tiers[at].pool->address(slot), block);
    tiers[at].pool->free(slot);
    const std::string hop = std::string(tier_kind_name(tiers[at].desc.kind)) + "->" + tier_kind_name(tiers[to].desc.kind) +
                            " (" + copy_kernel_name(k) + ")";
    std::string off = pages_off_nodes(tiers[to].pool->address(dst), block, tiers[to].desc.numa_nodes, &t.pages_queried);
    size_t bad = first_bad_byte(tiers[to].pool->address(dst), block, seed);
    std::printf("tier-placement: [%s] hop %s: pages %s, bytes %s\n", mode_name, hop.c_str(),
                off.empty() ? ("on node(s) " + nodes_text(tiers[to].desc.numa_nodes)).c_str() : off.c_str(),
                bad == block ? "intact" : "CHANGED");
    if (!off.empty()) fail("hop " + hop + ": " + off);
    if (bad != block) fail("hop " + hop + ": byte " + std::to_string(bad) + " changed");
    ++t.hops;
    at = to;
    slot = dst;
  }
  tiers[at].pool->free(slot);
  for (Tier &tier : tiers) {
    std::string why;
    if (!tier.pool->is_valid(&why)) fail(std::string(tier_kind_name(tier.desc.kind)) + " pool invalid: " + why);
    if (tier.pool->slots_used() != 0) fail(std::string(tier_kind_name(tier.desc.kind)) + " pool still has used slots");
  }
}

int placement() {
  Topology topo = discover_this_system();
  size_t with_nodes = 0;
  for (const TierDesc &d : topo.tiers) with_nodes += !d.numa_nodes.empty();
  if (topo.tiers.size() < 2 || with_nodes != topo.tiers.size())
    return finish(kSkip, "this machine has " + std::to_string(topo.tiers.size()) +
                             " tier(s) of NUMA memory: nothing to place blocks on apart or move between");
  Totals t;
  for (HugePageMode mode : {HugePageMode::hugetlb, HugePageMode::none}) run_mode(topo, mode, t);
  std::string tiers_text;
  for (const TierDesc &d : topo.tiers) tiers_text += (tiers_text.empty() ? "" : " ") + std::string(tier_kind_name(d.kind)) + "[" + nodes_text(d.numa_nodes) + "]";
  std::string d = std::to_string(topo.tiers.size()) + " tiers (" + tiers_text + "), numa backend + BlockPool: " +
                  std::to_string(t.blocks_placed) + " slots placed, " + std::to_string(t.hops) + " hops between tiers, " +
                  std::to_string(t.pages_queried) + " pages queried, " + std::to_string(t.hugetlb_extents) + "/" +
                  std::to_string(t.extents) + " extents hugetlb";
  if (!t.failures.empty()) return finish(kFail, std::to_string(t.failures.size()) + " failure(s), first: " + t.failures.front());
  return finish(kPass, d + "; every page on its tier's node(s), bytes intact");
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2 || std::string(argv[1]) != "placement") {
    std::fprintf(stderr, "usage: cxltq-tiers placement\n");
    return 2;
  }
  try {
    return placement();
  } catch (const std::exception &e) {
    return finish(kFail, std::string("error: ") + e.what());
  }
}
