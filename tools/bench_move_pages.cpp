// SPDX-License-Identifier: Apache-2.0
// move_pages(2) as the kernel's baseline for `cxltier bench` (see bench_move_pages.hpp).
#include "bench_move_pages.hpp"

#include "tiers/hostmem.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace cxltier::bench {

namespace {

size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

// move_pages over [base, base + bytes) in `page` steps to `node` (a query when node < 0).
// Returns the number of pages that are not on `node` afterwards; *first_error describes the first.
size_t move_range(char *base, size_t bytes, size_t page, int node, std::vector<void *> &pages, std::vector<int> &nodes,
                  std::vector<int> &status, std::string *first_error) {
  const size_t n = bytes / page;
  pages.resize(n);
  nodes.assign(n, node);
  status.assign(n, -1);
  for (size_t i = 0; i < n; ++i) pages[i] = base + i * page;
  long r = move_pages(0, n, pages.data(), node < 0 ? nullptr : nodes.data(), status.data(), node < 0 ? 0 : MPOL_MF_MOVE);
  if (r < 0) {
    if (first_error && first_error->empty()) *first_error = std::string("move_pages: ") + std::strerror(errno);
    return n;
  }
  // With automatic NUMA balancing on (the default on multi-node machines), the kernel's scanner
  // turns PTEs into NUMA-hinting (PROT_NONE) entries, and move_pages on Linux 6.1-6.4 reports
  // such pages as not present (-ENOENT) without moving them (seen in the QEMU guest). Touching
  // a page resolves its hinting fault; those pages are moved once more, inside the measured
  // time: it is what a user of move_pages pays on such a kernel.
  if (node >= 0) {
    size_t absent = 0;
    for (size_t i = 0; i < n; ++i)
      if (status[i] == -ENOENT) {
        (void)*static_cast<volatile char *>(pages[i]);
        pages[absent] = pages[i];
        ++absent;
      }
    if (absent != 0) {
      std::vector<int> again(absent, -1);
      if (move_pages(0, absent, pages.data(), nodes.data(), again.data(), MPOL_MF_MOVE) >= 0) {
        size_t j = 0;
        for (size_t i = 0; i < n; ++i)
          if (status[i] == -ENOENT) status[i] = again[j++];
      }
      for (size_t i = 0; i < n; ++i) pages[i] = base + i * page;
    }
  }
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    if (status[i] == node) continue;
    if (bad++ == 0 && first_error && first_error->empty()) {
      int q = -1;
      void *pg = pages[i];
      long qr = move_pages(0, 1, &pg, nullptr, &q, 0);
      *first_error = "page " + std::to_string(i) + " of " + std::to_string(n) + " is " +
                     (status[i] < 0 ? std::string("not movable: ") + std::strerror(-status[i])
                                    : "on node " + std::to_string(status[i])) +
                     " after a move to node " + std::to_string(node) + " (move_pages returned " + std::to_string(r) +
                     "; a query now says " + (qr == 0 ? std::to_string(q) : "?") + ")";
    }
  }
  if (bad && first_error) *first_error += "; " + std::to_string(bad) + " such pages";
  return bad;
}

// Bytes of the mapping that contains `p` backed by transparent huge pages (/proc/self/smaps).
uint64_t anon_huge_bytes(const void *p) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  while (std::getline(in, line)) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find(':') == std::string::npos || line.find('-') < line.find(' ')) {
      if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
        inside = addr >= lo && addr < hi;
        continue;
      }
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::strtoull(line.c_str() + 14, nullptr, 10) * 1024;
  }
  return 0;
}

// 4 KiB pages: THP refused for the range, touched, then moved to `node` (unmeasured).
bool make_4k_buffer(PageBuffer &b, uint64_t block, uint32_t blocks, int node, std::string *why) {
  b.page = hostmem::page_size();
  b.unit = round_up(block, b.page);
  b.blocks = blocks;
  b.kind = "4 KiB";
  b.map_bytes = b.bytes();
  void *m = mmap(nullptr, b.map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    *why = std::string("mmap of ") + format_bytes(b.map_bytes) + ": " + std::strerror(errno);
    return false;
  }
  b.map = m;
  b.base = static_cast<char *>(m);
  madvise(b.base, b.bytes(), MADV_NOHUGEPAGE);
  std::memset(b.base, 0x5a, b.bytes());
  std::vector<void *> pages;
  std::vector<int> nodes, status;
  std::string err;
  if (move_range(b.base, b.bytes(), b.page, node, pages, nodes, status, &err) != 0) {
    *why = "could not place the 4 KiB buffer on node " + std::to_string(node) + ": " + err;
    return false;
  }
  return true;
}

// Huge pages: explicit 2 MiB hugetlb pages when both nodes have enough free, else transparent
// huge pages when the kernel gives them; either way first placed on `a`.
bool make_huge_buffer(PageBuffer &b, uint64_t block, uint32_t blocks, int a, int bnode, std::string *why) {
  constexpr size_t kHuge = hostmem::kHugePage2M;
  b.page = kHuge;
  b.unit = round_up(block, kHuge);
  b.blocks = blocks;
  const uint64_t need = b.bytes() / kHuge;
  const uint64_t free_a = hostmem::free_huge_pages_2m(a), free_b = hostmem::free_huge_pages_2m(bnode);
  std::vector<void *> pages;
  std::vector<int> nodes, status;
  std::string err;
  if (free_a >= need && free_b >= need) {
    void *m = mmap(nullptr, b.bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (21 << MAP_HUGE_SHIFT),
                   -1, 0);
    if (m != MAP_FAILED) {
      unsigned long mask[16] = {};
      mask[a / 64] |= 1ul << (a % 64);
      // Bound to `a` before the first touch so the pages come from a's pool; populate reports
      // a shortage as an error where a plain write would raise SIGBUS.
      if (mbind(m, b.bytes(), MPOL_BIND, mask, 64 * 16, 0) == 0 && hostmem::populate(m, b.bytes()) == CXLT_OK) {
        b.map = m;
        b.map_bytes = b.bytes();
        b.base = static_cast<char *>(m);
        b.kind = "hugetlb 2 MiB";
        std::memset(b.base, 0x5a, b.bytes());
        if (move_range(b.base, b.bytes(), kHuge, a, pages, nodes, status, &err) == 0) return true;
        *why = "hugetlb buffer not on node " + std::to_string(a) + ": " + err;
        return false;
      }
      munmap(m, b.bytes());
    }
  }
  if (!hostmem::thp_enabled()) {
    *why = "no huge pages: " + std::to_string(need) + " free 2 MiB hugetlb pages needed on nodes " + std::to_string(a) +
           " and " + std::to_string(bnode) + " (they have " + std::to_string(free_a) + " and " + std::to_string(free_b) +
           ") and transparent huge pages are off";
    return false;
  }
  b.map_bytes = b.bytes() + kHuge;
  void *m = mmap(nullptr, b.map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    *why = std::string("mmap: ") + std::strerror(errno);
    return false;
  }
  b.map = m;
  b.base = reinterpret_cast<char *>(round_up(reinterpret_cast<uintptr_t>(m), kHuge));
  madvise(b.base, b.bytes(), MADV_HUGEPAGE);
  std::memset(b.base, 0x5a, b.bytes());
  const uint64_t huge = anon_huge_bytes(b.base);
  if (huge < b.bytes() * 9 / 10) {
    *why = "no huge pages: hugetlb has " + std::to_string(free_a) + " and " + std::to_string(free_b) +
           " free 2 MiB pages on nodes " + std::to_string(a) + " and " + std::to_string(bnode) + " (" +
           std::to_string(need) + " needed) and the kernel backed only " + format_bytes(huge) + " of " +
           format_bytes(b.bytes()) + " with transparent huge pages";
    return false;
  }
  b.kind = "transparent 2 MiB";
  if (move_range(b.base, b.bytes(), kHuge, a, pages, nodes, status, &err) != 0) {
    *why = "transparent huge page buffer not on node " + std::to_string(a) + ": " + err;
    return false;
  }
  return true;
}

std::vector<unsigned> memory_nodes() {
  std::vector<unsigned> out;
  if (numa_available() < 0) return out;
  struct bitmask *allowed = numa_get_mems_allowed();
  for (int n = 0; n <= numa_max_node(); ++n)
    if (numa_bitmask_isbitset(allowed, static_cast<unsigned>(n)) && numa_node_size64(n, nullptr) > 0)
      out.push_back(static_cast<unsigned>(n));
  numa_bitmask_free(allowed);
  return out;
}

}  // namespace

void prepare_move_pages(BenchResult &res, MovePagesBuffers &bufs, const std::vector<std::vector<unsigned>> &tier_nodes,
                        bool emulated, uint64_t block, uint32_t blocks, unsigned threads) {
  const std::vector<unsigned> mem_nodes = memory_nodes();
  res.move_pages_4k.label = "move_pages, 4 KiB pages";
  res.move_pages_huge.label = "move_pages, huge pages";
  res.move_pages_4k.method = res.move_pages_huge.method = "move_pages";
  res.move_pages_4k.threads = res.move_pages_huge.threads = threads;
  if (mem_nodes.size() < 2) {
    res.move_pages_4k.reason = res.move_pages_huge.reason = "not applicable: one NUMA node";
  } else {
    // The nodes of the first two tiers when they are real and distinct (so the kernel and the
    // runtime move between the same memory); else the first CPU's node and another one.
    if (!emulated && tier_nodes.size() >= 2 && !tier_nodes[0].empty() && !tier_nodes[1].empty() &&
        tier_nodes[0][0] != tier_nodes[1][0]) {
      res.node_a = static_cast<int>(tier_nodes[0][0]);
      res.node_b = static_cast<int>(tier_nodes[1][0]);
      res.compare_pair_a = 0;
      res.compare_pair_b = 1;
    } else {
      int local = numa_node_of_cpu(res.cpus[0]);
      res.node_a = std::find(mem_nodes.begin(), mem_nodes.end(), static_cast<unsigned>(local)) != mem_nodes.end()
                       ? local
                       : static_cast<int>(mem_nodes[0]);
      for (unsigned m : mem_nodes)
        if (static_cast<int>(m) != res.node_a) {
          res.node_b = static_cast<int>(m);
          break;
        }
    }
    std::string why;
    bufs.have_small = make_4k_buffer(bufs.small, block, blocks, res.node_a, &why);
    if (!bufs.have_small) res.move_pages_4k.reason = why;
    why.clear();
    bufs.have_huge = make_huge_buffer(bufs.huge, block, blocks, res.node_a, res.node_b, &why);
    if (!bufs.have_huge) res.move_pages_huge.reason = why;
    res.huge_kind = bufs.have_huge ? bufs.huge.kind : "";
  }
  res.move_pages_4k.unit_bytes = bufs.small.unit;
  res.move_pages_huge.unit_bytes = bufs.huge.unit;
  if (bufs.have_small) res.move_pages_4k.label += " (node " + std::to_string(res.node_a) + " <-> " + std::to_string(res.node_b) + ")";
  if (bufs.have_huge) res.move_pages_huge.label = "move_pages, " + bufs.huge.kind + " pages (node " + std::to_string(res.node_a) +
                                            " <-> " + std::to_string(res.node_b) + ")";
}

void move_pages_pass(Crew &crew, std::vector<ThreadSpan> &spans, unsigned threads, PageBuffer &b, int node, Row &row,
                     bool keep) {
  for (ThreadSpan &s : spans) {
    s.latency_us.clear();
    s.error.clear();
  }
  crew.run(threads, [&](unsigned t) {
    ThreadSpan &s = spans[t];
    std::vector<void *> pages;
    std::vector<int> nodes, status;
    pages.reserve(b.pages_per_unit());
    nodes.reserve(b.pages_per_unit());
    status.reserve(b.pages_per_unit());
    s.start = Clock::now();
    Clock::time_point last = s.start;
    for (uint32_t i = t; i < b.blocks; i += threads) {
      move_range(b.base + size_t{i} * b.unit, b.unit, b.page, node, pages, nodes, status, &s.error);
      Clock::time_point now = Clock::now();
      s.latency_us.push_back(micros(last, now));
      last = now;
    }
    s.end = last;
  });
  for (unsigned t = 0; t < threads; ++t)
    if (!spans[t].error.empty())
      fail(CXLT_ERROR_BACKEND, "move_pages of the ", b.kind, " buffer to node ", node, ": ", spans[t].error);
  if (keep) keep_pass(row, spans, threads, static_cast<double>(b.bytes()));
}

}  // namespace cxltier::bench
