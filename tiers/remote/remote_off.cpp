// SPDX-License-Identifier: Apache-2.0
// The remote tier in a build without it (meson option `remote` disabled, or hiredis missing):
// the same symbols, and a runtime configured with [remote] enabled refuses to open, saying why.
#include "lib/runtime/remote.hpp"

#include <cxltier/error.hpp>

namespace cxltier {

std::unique_ptr<RemoteTier> open_remote_tier(const RuntimeConfig &cfg) {
  (void)cfg;
  fail(CXLT_ERROR_NOT_SUPPORTED, "remote.enabled = true, but this cxltier was built without the remote tier "
                                 "(meson option 'remote': install libhiredis-dev and reconfigure)");
}

}  // namespace cxltier
