// SPDX-License-Identifier: Apache-2.0
// The backend registry: validates each built-in ops table once, fills optional ops with
// NOT_SUPPORTED defaults, and explains backends this build lacks (memkind not configured, cuda
// not built) instead of failing obscurely. Also the thread-local backend error message.
#include "tier_ops.hpp"

#include <cxltier/error.hpp>

#include <mutex>
#include <string>
#include <vector>

namespace cxltier {

namespace {

thread_local std::string t_backend_error;

cxlt_result_t unsupported_verify(void *, const void *, size_t) {
  backend_set_error("this tier backend cannot verify page placement");
  return CXLT_ERROR_NOT_SUPPORTED;
}
cxlt_result_t unsupported_copy_in(void *, void *, const void *, size_t, const cxlt_tier_ops *) {
  return CXLT_ERROR_NOT_SUPPORTED;
}
cxlt_result_t unsupported_copy_out(void *, void *, const void *, size_t, const cxlt_tier_ops *) {
  return CXLT_ERROR_NOT_SUPPORTED;
}
cxlt_result_t unsupported_describe(void *, const char **) { return CXLT_ERROR_NOT_SUPPORTED; }

struct Registry {
  std::vector<cxlt_tier_ops> tables;  // validated, in registration order
};

const Registry &registry() {
  // Built on first use (never at static-initialisation time), as a function-local static.
  static const Registry r = [] {
    Registry reg;
    const cxlt_tier_ops *raw[] = {
        tier_numa_ops(),
#if CXLT_HAVE_MEMKIND
        tier_memkind_ops(),
#endif
        tier_emulated_ops(),
        tier_null_ops(),
        tier_faulty_ops(),
#if CXLT_HAVE_CUDA_BUILD
        tier_cuda_ops(),
        tier_cuda_host_ops(),
#endif
    };
    for (const cxlt_tier_ops *ops : raw) reg.tables.push_back(tier_ops_validate(*ops));
    return reg;
  }();
  return r;
}

}  // namespace

void backend_set_error(const std::string &message) noexcept {
  try {
    t_backend_error = message;
  } catch (...) {
    t_backend_error.clear();  // out of memory: an empty message beats none
  }
}

const std::string &backend_last_error() noexcept { return t_backend_error; }

cxlt_tier_ops tier_ops_validate(const cxlt_tier_ops &ops) {
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
  cxlt_tier_ops v = ops;
  if (!v.ext_verify_placement) v.ext_verify_placement = unsupported_verify;
  if (!v.ext_copy_in) v.ext_copy_in = unsupported_copy_in;
  if (!v.ext_copy_out) v.ext_copy_out = unsupported_copy_out;
  if (!v.ext_describe) v.ext_describe = unsupported_describe;
  return v;
}

bool tier_op_supported(const cxlt_tier_ops &ops, TierOp op) noexcept {
  switch (op) {
  case TierOp::verify_placement:
    return ops.ext_verify_placement && ops.ext_verify_placement != unsupported_verify;
  case TierOp::copy_in: return ops.ext_copy_in && ops.ext_copy_in != unsupported_copy_in;
  case TierOp::copy_out: return ops.ext_copy_out && ops.ext_copy_out != unsupported_copy_out;
  case TierOp::describe: return ops.ext_describe && ops.ext_describe != unsupported_describe;
  }
  return false;
}

const cxlt_tier_ops *tier_ops_find(const std::string &name, std::string *why) {
  for (const cxlt_tier_ops &ops : registry().tables) {
    if (name == ops.name) return &ops;
  }
  std::string reason;
  if (name == "cuda" || name == "cuda-host") {
    // "not available" as on a CUDA build without a GPU (callers match it), then why.
    reason = "tier backend '" + name + "' is not available: not in this build (meson did not build the "
             "CUDA tier: option cuda disabled, or nvcc not found when it was configured; see docs/gpu.md); "
             "use 'emulated' to stand in for GPU memory";
  } else if (name == "memkind") {
    reason = "tier backend 'memkind' is not in this build: libmemkind was not found when meson "
             "configured it (install libmemkind-dev and reconfigure with -Dmemkind=enabled). "
             "memkind is discontinued upstream and always optional; 'numa' does the same placement";
  } else {
    reason = "unknown tier backend '" + name + "' (this build has:";
    for (const std::string &n : tier_ops_names()) reason += " " + n;
    reason += ")";
  }
  if (why) *why = reason;
  return nullptr;
}

std::vector<std::string> tier_ops_names() {
  std::vector<std::string> names;
  for (const cxlt_tier_ops &ops : registry().tables) names.emplace_back(ops.name);
  return names;
}

}  // namespace cxltier
