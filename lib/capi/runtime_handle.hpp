// SPDX-License-Identifier: Apache-2.0
// The runtime behind a C handle (capi_runtime.cpp's registry), for the C wrappers kept in other
// files. Throws Error: CXLT_ERROR_INVALID_ARGUMENT for NULL, CXLT_ERROR_CLOSED for a closed or
// unknown handle. The reference keeps the runtime alive for the call's duration.
#pragma once

#include <cxltier/cxltier.h>
#include <cxltier/runtime.hpp>

#include <memory>

namespace cxltier::capi {

std::shared_ptr<Runtime> runtime_of(cxlt_runtime_t *h);

// A Block as the C ABI's cxlt_block_t.
inline void write_block(const Block &b, cxlt_block_t *out) noexcept {
  out->data = b.data;
  out->bytes = b.bytes;
  out->tier = b.tier;
  out->handle = b.handle;
}

}  // namespace cxltier::capi
