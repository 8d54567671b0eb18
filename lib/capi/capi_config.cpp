// SPDX-License-Identifier: Apache-2.0
// C ABI: the configuration handle (create, load a TOML file, set a key, validate, dump as
// TOML, destroy) over cxltier::RuntimeConfig. create applies the CXLT_* environment at once:
// each key remembers its layer, so a file loaded later stays below the environment and
// cxlt_config_set stays above it, and cxlt_config_dump shows what the runtime will use.
#include "lib/capi/config_handle.hpp"
#include "lib/capi/guard.hpp"

#include <cxltier/cxltier.h>

#include <cstring>
#include <memory>
#include <string>

using namespace cxltier;

extern "C" {

cxlt_result_t cxlt_config_create(cxlt_config_t **out) noexcept {
  return capi::capi_call([&] {
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_config_create: out is NULL");
    auto h = std::make_unique<cxlt_config_s>();
    h->cfg.apply_environment();  // CONFIG naming the variable for a bad value
    *out = h.release();
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_config_load_file(cxlt_config_t *cfg, const char *path) noexcept {
  return capi::capi_call([&] {
    CXLT_CAPI_REQUIRE(cfg != nullptr, "cxlt_config_load_file: cfg is NULL");
    CXLT_CAPI_REQUIRE(path != nullptr, "cxlt_config_load_file: path is NULL");
    cfg->cfg.load_toml_file(path);
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_config_set(cxlt_config_t *cfg, const char *key, const char *value) noexcept {
  return capi::capi_call([&] {
    CXLT_CAPI_REQUIRE(cfg != nullptr, "cxlt_config_set: cfg is NULL");
    CXLT_CAPI_REQUIRE(key != nullptr, "cxlt_config_set: key is NULL");
    CXLT_CAPI_REQUIRE(value != nullptr, "cxlt_config_set: value is NULL");
    cfg->cfg.set(key, value);
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_config_validate(const cxlt_config_t *cfg) noexcept {
  return capi::capi_call([&] {
    CXLT_CAPI_REQUIRE(cfg != nullptr, "cxlt_config_validate: cfg is NULL");
    cfg->cfg.validate();
    return CXLT_OK;
  });
}

// Buffer protocol: *needed always gets the size with the NUL when `needed` is given; a buffer
// that is NULL or smaller than that is CXLT_ERROR_INVALID_ARGUMENT and nothing is written to it.
cxlt_result_t cxlt_config_dump(const cxlt_config_t *cfg, char *buf, size_t cap, size_t *needed) noexcept {
  return capi::capi_call([&] {
    CXLT_CAPI_REQUIRE(cfg != nullptr, "cxlt_config_dump: cfg is NULL");
    std::string text = cfg->cfg.to_toml();
    size_t need = text.size() + 1;
    if (needed != nullptr) *needed = need;
    if (buf == nullptr || cap < need)
      fail(CXLT_ERROR_INVALID_ARGUMENT, "cxlt_config_dump: the buffer holds ", cap, " bytes, ", need,
           " are needed (with the NUL)", needed == nullptr ? "; pass `needed` to learn the size" : "");
    std::memcpy(buf, text.c_str(), need);
    return CXLT_OK;
  });
}

void cxlt_config_destroy(cxlt_config_t *cfg) noexcept { delete cfg; }

}  // extern "C"
