// SPDX-License-Identifier: Apache-2.0
// The kernel's baseline in `cxltier bench`: move_pages(2) of buffers the size of the benchmark's
// blocks between two NUMA nodes, on 4 KiB pages and on huge pages (hugetlb when both nodes
// have enough free, else transparent ones). Internal to the CLI.
#pragma once

#include "bench_crew.hpp"
#include "bench_migration.hpp"

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cxltier::bench {

// `blocks` units of `unit` bytes (a block rounded up to the page size), laid out contiguously,
// whose pages move between two nodes.
struct PageBuffer {
  void *map = nullptr;
  size_t map_bytes = 0;
  char *base = nullptr;
  size_t page = 4096;
  size_t unit = 0;
  uint32_t blocks = 0;
  std::string kind;  // "4 KiB", "hugetlb 2 MiB", "transparent 2 MiB"

  PageBuffer() = default;
  PageBuffer(const PageBuffer &) = delete;
  PageBuffer &operator=(const PageBuffer &) = delete;
  ~PageBuffer() {
    if (map) munmap(map, map_bytes);
  }
  size_t pages_per_unit() const { return unit / page; }
  size_t bytes() const { return unit * blocks; }
};

// The buffers of the two move_pages rows; a row whose buffer could not be made is not measured
// (its reason says why).
struct MovePagesBuffers {
  PageBuffer small, huge;
  bool have_small = false, have_huge = false;
};

// Labels res.move_pages_4k and res.move_pages_huge, chooses their two nodes (res.node_a and
// res.node_b: the first two tiers' nodes when they are real and distinct, so that the kernel
// and the runtime move between the same memory) and makes the buffers of `blocks` units of
// `block` bytes on node_a. Called before the runtime opens, so that explicit huge pages are not
// already in the tiers' pools. `tier_nodes`: each configured tier's NUMA nodes.
void prepare_move_pages(BenchResult &res, MovePagesBuffers &bufs, const std::vector<std::vector<unsigned>> &tier_nodes,
                        bool emulated, uint64_t block, uint32_t blocks, unsigned threads);

// One pass: move_pages of every unit of `b` to `node`, unit i on thread i % threads; kept in
// `row` unless a warm-up. Throws Error BACKEND when a page does not reach `node`.
void move_pages_pass(Crew &crew, std::vector<ThreadSpan> &spans, unsigned threads, PageBuffer &b, int node, Row &row,
                     bool keep);

}  // namespace cxltier::bench
