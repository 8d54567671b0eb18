// SPDX-License-Identifier: Apache-2.0
// C ABI of the batch calls (cxltier.h, "Batch calls") over Runtime's admit_batch,
// prefix_lookup, release_batch and unpin_batch. The C++ calls write into per-thread buffers
// that keep their capacity, and the C outputs are written only on success.
#include "lib/capi/guard.hpp"
#include "lib/capi/runtime_handle.hpp"

#include <cxltier/cxltier.h>
#include <cxltier/runtime.hpp>

#include <memory>
#include <vector>

using namespace cxltier;

namespace {

static_assert(sizeof(Key) == sizeof(cxlt_key_t) && alignof(Key) == alignof(cxlt_key_t));

const Key *keys_of(const cxlt_key_t *k) { return reinterpret_cast<const Key *>(k); }

struct Buffers {
  std::vector<Block> blocks;
  std::unique_ptr<bool[]> placed;
  size_t placed_cap = 0;
  Block *blocks_for(size_t n) {
    if (blocks.size() < n) blocks.resize(n);
    return blocks.data();
  }
  bool *placed_for(size_t n) {
    if (placed_cap < n) {
      placed = std::make_unique<bool[]>(n);
      placed_cap = n;
    }
    return placed.get();
  }
};
thread_local Buffers t_buf;

}  // namespace

extern "C" {

cxlt_result_t cxlt_block_admit_batch(cxlt_runtime_t *rt, const cxlt_key_t *keys, size_t n, unsigned flags,
                                     cxlt_block_t *blocks_out, int *placed_out) noexcept {
  return capi::capi_call([&] {
    auto r = capi::runtime_of(rt);
    CXLT_CAPI_REQUIRE((flags & ~CXLT_ADMIT_PIN) == 0, "cxlt_block_admit_batch: unknown flag");
    CXLT_CAPI_REQUIRE(n == 0 || keys != nullptr, "cxlt_block_admit_batch: keys is NULL");
    CXLT_CAPI_REQUIRE(n == 0 || blocks_out != nullptr, "cxlt_block_admit_batch: blocks_out is NULL");
    if (n == 0) return CXLT_OK;
    Block *b = t_buf.blocks_for(n);
    bool *p = t_buf.placed_for(n);
    r->admit_batch(keys_of(keys), n, (flags & CXLT_ADMIT_PIN) != 0, b, p);
    for (size_t i = 0; i < n; ++i) {
      capi::write_block(b[i], &blocks_out[i]);
      if (placed_out) placed_out[i] = p[i] ? 1 : 0;
    }
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_prefix_lookup(cxlt_runtime_t *rt, const cxlt_key_t *keys, size_t n, unsigned flags, size_t *matched,
                                 cxlt_block_t *blocks_out) noexcept {
  return capi::capi_call([&] {
    auto r = capi::runtime_of(rt);
    CXLT_CAPI_REQUIRE((flags & ~(CXLT_LOOKUP_PIN | CXLT_LOOKUP_FETCH)) == 0, "cxlt_prefix_lookup: unknown flag");
    CXLT_CAPI_REQUIRE(matched != nullptr, "cxlt_prefix_lookup: matched is NULL");
    CXLT_CAPI_REQUIRE(n == 0 || keys != nullptr, "cxlt_prefix_lookup: keys is NULL");
    CXLT_CAPI_REQUIRE(n == 0 || blocks_out != nullptr, "cxlt_prefix_lookup: blocks_out is NULL");
    if (n == 0) {
      *matched = 0;
      return CXLT_OK;
    }
    Block *b = t_buf.blocks_for(n);
    const size_t m =
        r->prefix_lookup(keys_of(keys), n, (flags & CXLT_LOOKUP_PIN) != 0, (flags & CXLT_LOOKUP_FETCH) != 0, b);
    for (size_t i = 0; i < m; ++i) capi::write_block(b[i], &blocks_out[i]);
    *matched = m;
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_block_release_batch(cxlt_runtime_t *rt, const cxlt_key_t *keys, size_t n, int forget) noexcept {
  return capi::capi_call([&] {
    auto r = capi::runtime_of(rt);
    CXLT_CAPI_REQUIRE(n == 0 || keys != nullptr, "cxlt_block_release_batch: keys is NULL");
    r->release_batch(keys_of(keys), n, forget != 0);
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_block_unpin_batch(cxlt_runtime_t *rt, const cxlt_key_t *keys, size_t n) noexcept {
  return capi::capi_call([&] {
    auto r = capi::runtime_of(rt);
    CXLT_CAPI_REQUIRE(n == 0 || keys != nullptr, "cxlt_block_unpin_batch: keys is NULL");
    r->unpin_batch(keys_of(keys), n);
    return CXLT_OK;
  });
}

}  // extern "C"
