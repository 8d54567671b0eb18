// SPDX-License-Identifier: Apache-2.0
// The opaque C handle cxlt_config_t: a RuntimeConfig and nothing else, so the runtime's C ABI
// (cxlt_runtime_open_config) can take the configuration out of it.
#pragma once

#include <cxltier/config.hpp>

struct cxlt_config_s {
  cxltier::RuntimeConfig cfg;
};
