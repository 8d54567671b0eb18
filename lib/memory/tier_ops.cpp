// SPDX-License-Identifier: Apache-2.0
// The contract's validator (as UMF's memory provider checks in the core): checks each backend's
// ops table once, fills optional ops with NOT_SUPPORTED defaults, and keeps the thread-local
// backend error message. Which backends exist is tiers/registry.cpp's business.
#include "lib/memory/tier_ops.hpp"

#include <cxltier/error.hpp>

#include <string>

namespace cxltier {

namespace {

thread_local std::string t_backend_error;

cxlt_result_t unsupported_verify(void *, const void *, size_t) {
  backend_set_error("this tier backend cannot verify page placement");
  return CXLT_ERROR_NOT_SUPPORTED;
}
cxlt_result_t unsupported_copy_in(void *, void *, const void *, size_t, const TierOps *) {
  return CXLT_ERROR_NOT_SUPPORTED;
}
cxlt_result_t unsupported_copy_out(void *, void *, const void *, size_t, const TierOps *) {
  return CXLT_ERROR_NOT_SUPPORTED;
}
cxlt_result_t unsupported_describe(void *, const char **) { return CXLT_ERROR_NOT_SUPPORTED; }
cxlt_result_t unsupported_control(void *, std::shared_ptr<void> *) { return CXLT_ERROR_NOT_SUPPORTED; }

}  // namespace

void backend_set_error(const std::string &message) noexcept {
  try {
    t_backend_error = message;
  } catch (...) {
    t_backend_error.clear();  // out of memory: an empty message beats none
  }
}

const std::string &backend_last_error() noexcept { return t_backend_error; }

TierOps tier_ops_validate(const TierOps &ops) {
  const char *name = ops.name ? ops.name : "(unnamed)";
  if (ops.version != CXLT_TIER_OPS_VERSION) {
    fail(CXLT_ERROR_BACKEND, "tier backend '", name, "': ops table version ", ops.version,
         ", this library implements version ", CXLT_TIER_OPS_VERSION);
  }
  if (ops.name == nullptr || ops.name[0] == '\0') fail(CXLT_ERROR_BACKEND, "tier backend without a name");
  auto need = [&](const void *fn, const char *op) {
    if (fn == nullptr) fail(CXLT_ERROR_BACKEND, "tier backend '", name, "': mandatory op '", op, "' is missing");
  };
  need(reinterpret_cast<const void *>(ops.initialize), "initialize");
  need(reinterpret_cast<const void *>(ops.finalize), "finalize");
  need(reinterpret_cast<const void *>(ops.alloc_extent), "alloc_extent");
  need(reinterpret_cast<const void *>(ops.free_extent), "free_extent");
  need(reinterpret_cast<const void *>(ops.capacity), "capacity");
  for (const TierOption *o = ops.options; o && o->key; ++o) {
    if (o->key[0] == '\0' || o->default_value == nullptr || o->doc == nullptr)
      fail(CXLT_ERROR_BACKEND, "tier backend '", name, "': option '", o->key, "' needs a key, a default and a doc");
    if (o->choices && o->noun == nullptr)
      fail(CXLT_ERROR_BACKEND, "tier backend '", name, "': option '", o->key, "' lists choices without a noun");
  }
  TierOps v = ops;
  if (!v.ext_verify_placement) v.ext_verify_placement = unsupported_verify;
  if (!v.ext_copy_in) v.ext_copy_in = unsupported_copy_in;
  if (!v.ext_copy_out) v.ext_copy_out = unsupported_copy_out;
  if (!v.ext_describe) v.ext_describe = unsupported_describe;
  if (!v.ext_control) v.ext_control = unsupported_control;
  return v;
}

bool tier_op_supported(const TierOps &ops, TierOp op) noexcept {
  switch (op) {
  case TierOp::verify_placement:
    return ops.ext_verify_placement && ops.ext_verify_placement != unsupported_verify;
  case TierOp::copy_in: return ops.ext_copy_in && ops.ext_copy_in != unsupported_copy_in;
  case TierOp::copy_out: return ops.ext_copy_out && ops.ext_copy_out != unsupported_copy_out;
  case TierOp::describe: return ops.ext_describe && ops.ext_describe != unsupported_describe;
  case TierOp::control: return ops.ext_control && ops.ext_control != unsupported_control;
  }
  return false;
}

}  // namespace cxltier
