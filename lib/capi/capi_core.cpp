// SPDX-License-Identifier: Apache-2.0
// C ABI: version, results, last error, keys, geometry, tier kinds.
#include "lib/capi/guard.hpp"

#include <cxltier/cxltier.h>
#include <cxltier/key.hpp>

#include <cstring>
#include <string>

namespace cxltier::capi {

namespace {
thread_local std::string t_last_error;
}

void set_last_error(cxlt_result_t code, const char *message) noexcept {
  try {
    t_last_error = std::string(cxlt_result_string(code)) + ": " + (message ? message : "");
  } catch (...) {
    // Out of memory while recording an error: keep whatever was there.
  }
}

void clear_last_error() noexcept { t_last_error.clear(); }

}  // namespace cxltier::capi

using namespace cxltier;

extern "C" {

uint32_t cxlt_version(void) noexcept { return CXLT_VERSION; }

const char *cxlt_result_string(cxlt_result_t r) noexcept {
  switch (r) {
    case CXLT_OK: return "ok";
    case CXLT_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case CXLT_ERROR_OUT_OF_HOST_MEMORY: return "out of host memory";
    case CXLT_ERROR_OUT_OF_TIER_MEMORY: return "out of tier memory";
    case CXLT_ERROR_NOT_FOUND: return "not found";
    case CXLT_ERROR_NOT_SUPPORTED: return "not supported";
    case CXLT_ERROR_BACKEND: return "tier backend error";
    case CXLT_ERROR_IO: return "I/O error";
    case CXLT_ERROR_CORRUPT: return "corrupt or foreign file";
    case CXLT_ERROR_BUSY: return "busy (pinned or in use)";
    case CXLT_ERROR_CLOSED: return "runtime closed";
    case CXLT_ERROR_CONFIG: return "invalid configuration";
    case CXLT_ERROR_TOPOLOGY: return "topology error";
    case CXLT_ERROR_TIMEOUT: return "timed out";
    case CXLT_ERROR_UNKNOWN: return "unknown internal error";
  }
  return "unrecognised result code";
}

const char *cxlt_last_error(void) noexcept { return capi::t_last_error.c_str(); }

cxlt_key_t cxlt_key_from_sequence(uint64_t sequence_id, uint64_t block_index) noexcept {
  return key_from_sequence(sequence_id, block_index).c();
}

cxlt_key_t cxlt_key_from_tokens(cxlt_key_t parent, const int32_t *tokens, size_t n_tokens) noexcept {
  if (tokens == nullptr && n_tokens != 0) {
    // Hashing zero tokens instead would give a real-looking key for the wrong content.
    capi::set_last_error(CXLT_ERROR_INVALID_ARGUMENT, "cxlt_key_from_tokens: tokens is NULL but n_tokens is not 0");
    return cxlt_key_t{0, 0};
  }
  return key_from_tokens(Key::from(parent), tokens, n_tokens).c();
}

cxlt_result_t cxlt_block_bytes(uint32_t layers, uint32_t kv_heads, uint32_t head_dim,
                               uint32_t bytes_per_element, uint32_t tokens_per_block,
                               uint64_t *out_bytes) noexcept {
  return capi::capi_call([&] {
    CXLT_CAPI_REQUIRE(out_bytes != nullptr, "cxlt_block_bytes: out_bytes is NULL");
    BlockGeometry g{layers, kv_heads, head_dim, bytes_per_element, tokens_per_block, true};
    *out_bytes = g.bytes();
    return CXLT_OK;
  });
}

const char *cxlt_tier_kind_name(cxlt_tier_kind_t kind) noexcept {
  switch (kind) {
    case CXLT_TIER_HBM: return "hbm";
    case CXLT_TIER_GPU: return "gpu";
    case CXLT_TIER_DRAM: return "dram";
    case CXLT_TIER_CXL: return "cxl";
    case CXLT_TIER_NVM: return "nvm";
    case CXLT_TIER_SPM: return "spm";
    case CXLT_TIER_UNKNOWN: return "unknown";
    case CXLT_TIER_REMOTE: return "remote";
  }
  return "unknown";
}

}  // extern "C"
