// SPDX-License-Identifier: Apache-2.0
// Helpers for the runtime tests: small configurations on real (emulated host) memory, and
// block contents that carry their own checksum so that any torn or misplaced byte is caught.
#pragma once

#include <cxltier/config.hpp>
#include <cxltier/key.hpp>
#include <cxltier/runtime.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace cxlt_test {

// 32 KiB blocks (2 x 4 layers x 2 heads x 64 dims x 2 bytes x 16 tokens): real copies, small
// enough that a test moves thousands of them in milliseconds.
inline cxltier::BlockGeometry small_geometry() {
  cxltier::BlockGeometry g;
  g.layers = 4;
  g.kv_heads = 2;
  g.head_dim = 64;
  g.bytes_per_element = 2;
  g.tokens_per_block = 16;
  return g;
}

// Three emulated tiers (hbm, dram, cxl) holding `a`, `b`, `c` blocks.
inline cxltier::RuntimeConfig three_tier_config(uint32_t a, uint32_t b, uint32_t c, const std::string &backend = "emulated") {
  cxltier::RuntimeConfig cfg;
  cfg.geometry = small_geometry();
  cfg.topology = "emulated";
  const uint64_t block = cfg.geometry.bytes();
  const char *names[3] = {"hbm", "dram", "cxl"};
  const cxltier::TierKind kinds[3] = {cxltier::TierKind::hbm, cxltier::TierKind::dram, cxltier::TierKind::cxl};
  const uint32_t blocks[3] = {a, b, c};
  for (int i = 0; i < 3; ++i) {
    cxltier::TierConfig t;
    t.name = names[i];
    t.kind = kinds[i];
    t.budget_bytes = blocks[i] * block;
    t.backend = backend;
    cfg.tiers.push_back(t);
  }
  cfg.extent_blocks = 4;
  cfg.store_capacity = 1u << 16;
  cfg.huge_pages = cxltier::HugePages::none;
  return cfg;
}

// One emulated tier of `blocks` blocks and no threads (runtime.synchronous: copies in the
// calling thread, no mover keeping a slot free).
inline cxltier::RuntimeConfig one_synchronous_tier(uint32_t blocks) {
  cxltier::RuntimeConfig cfg = three_tier_config(blocks, 0, 0);
  cfg.tiers.resize(1);
  cfg.synchronous = true;
  return cfg;
}

// Fill a block with bytes derived from (key, version) and put their checksum in the first
// 32 bytes: [key.hi][key.lo][version][xxh3 of bytes 32..end].
inline void fill_block(void *data, size_t bytes, const cxltier::Key &key, uint64_t version) {
  auto *p = static_cast<unsigned char *>(data);
  uint64_t x = key.hi ^ (key.lo * 0x9e3779b97f4a7c15ull) ^ (version * 0xbf58476d1ce4e5b9ull);
  for (size_t i = 32; i + 8 <= bytes; i += 8) {
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    std::memcpy(p + i, &x, 8);
  }
  uint64_t sum = XXH3_64bits(p + 32, bytes - 32);
  std::memcpy(p, &key.hi, 8);
  std::memcpy(p + 8, &key.lo, 8);
  std::memcpy(p + 16, &version, 8);
  std::memcpy(p + 24, &sum, 8);
}

// True if the block holds what fill_block wrote for `key` (any version); *version gets it.
inline bool check_block(const void *data, size_t bytes, const cxltier::Key &key, uint64_t *version = nullptr) {
  const auto *p = static_cast<const unsigned char *>(data);
  cxltier::Key k;
  uint64_t v = 0, sum = 0;
  std::memcpy(&k.hi, p, 8);
  std::memcpy(&k.lo, p + 8, 8);
  std::memcpy(&v, p + 16, 8);
  std::memcpy(&sum, p + 24, 8);
  if (!(k == key)) return false;
  if (version) *version = v;
  return XXH3_64bits(p + 32, bytes - 32) == sum;
}

}  // namespace cxlt_test
