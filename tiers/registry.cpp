// SPDX-License-Identifier: Apache-2.0
// The backend registry: the one file that lists the built-in backends. It defines
// tier_ops_find() and tier_ops_names(), which lib/memory declares (a link-time inversion, as
// open_remote_tier), validates each table once with the core's tier_ops_validate(), and
// explains backends this build lacks (memkind not configured, cuda not built) instead of
// failing obscurely. A new backend adds one line here.
#include "tiers/registry.hpp"

#include <cxltier/error.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace cxltier {

namespace {

struct Registry {
  std::vector<TierOps> tables;  // validated, in registration order
};

const Registry &registry() {
  // Built on first use (never at static-initialisation time), as a function-local static.
  static const Registry r = [] {
    Registry reg;
    const TierOps *raw[] = {
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
    for (const TierOps *ops : raw) reg.tables.push_back(tier_ops_validate(*ops));
    return reg;
  }();
  return r;
}

}  // namespace

const TierOps *tier_ops_find(const std::string &name, std::string *why) {
  for (const TierOps &ops : registry().tables) {
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
  for (const TierOps &ops : registry().tables) names.emplace_back(ops.name);
  return names;
}

std::vector<const TierOption *> tier_options() {
  std::vector<const TierOption *> out;
  auto add = [&](const TierOption *table) {
    for (const TierOption *o = table; o && o->key; ++o) {
      bool seen = false;
      for (const TierOption *p : out) seen = seen || std::string_view(p->key) == o->key;
      if (!seen) out.push_back(o);
    }
  };
  for (const TierOps &ops : registry().tables) {
#if !CXLT_HAVE_MEMKIND
    if (std::string_view(ops.name) == "emulated") add(tier_memkind_options);  // in the registration order
#endif
    add(ops.options);
  }
  return out;
}

std::vector<std::string> tier_backend_choices() {
  // Every backend folder's name, built or not, so that a configuration naming memkind or cuda
  // in a build without them gets the registry's reason rather than "unknown". cuda-host is the
  // pinning decorator the runtime applies by itself; no tier names it.
  return {"numa", "memkind", "emulated", "null", "faulty", "cuda"};
}

}  // namespace cxltier
