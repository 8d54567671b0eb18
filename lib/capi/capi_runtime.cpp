// SPDX-License-Identifier: Apache-2.0
// C ABI over cxltier::Runtime.
//
// A cxlt_runtime_t* is an opaque token, never dereferenced: live runtimes sit in a registry
// keyed by token, and tokens are never reused. So a call on a closed (or never opened, or
// garbage) handle finds nothing and returns CXLT_ERROR_CLOSED instead of touching freed
// memory. Each call holds a reference to the runtime for its duration; close removes the
// token at once, and the runtime is torn down when the last call in flight returns.
#include "lib/capi/config_handle.hpp"
#include "lib/capi/guard.hpp"
#include "lib/capi/runtime_handle.hpp"

#include <cxltier/cxltier.h>
#include <cxltier/runtime.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

using namespace cxltier;

namespace {

std::shared_mutex g_registry_mu;
std::unordered_map<uintptr_t, std::shared_ptr<Runtime>> &registry() {
  static auto *r = new std::unordered_map<uintptr_t, std::shared_ptr<Runtime>>();  // never destroyed: safe at exit
  return *r;
}
std::atomic<uintptr_t> g_next_token{1};

cxlt_runtime_t *register_runtime(std::unique_ptr<Runtime> rt) {
  // Tokens look like odd small integers shifted into the upper half of the address space, so
  // that a token dereferenced by mistake faults at once.
  uintptr_t token = (g_next_token.fetch_add(1) << 4) | 0x8;
  std::unique_lock lk(g_registry_mu);
  registry().emplace(token, std::shared_ptr<Runtime>(std::move(rt)));
  return reinterpret_cast<cxlt_runtime_t *>(token);
}

std::shared_ptr<Runtime> get(cxlt_runtime_t *h) {
  if (h == nullptr) fail(CXLT_ERROR_INVALID_ARGUMENT, "runtime handle is NULL");
  std::shared_lock lk(g_registry_mu);
  auto it = registry().find(reinterpret_cast<uintptr_t>(h));
  if (it == registry().end()) fail(CXLT_ERROR_CLOSED, "runtime handle is closed or was never opened");
  return it->second;
}

}  // namespace

std::shared_ptr<Runtime> cxltier::capi::runtime_of(cxlt_runtime_t *h) { return get(h); }

extern "C" {

cxlt_result_t cxlt_runtime_open(const char *config_path, cxlt_runtime_t **out) noexcept {
  return capi::capi_call([&] {
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_runtime_open: out is NULL");
    RuntimeConfig cfg;
    if (config_path != nullptr) cfg.load_toml_file(config_path);
    cfg.apply_environment();
    *out = register_runtime(Runtime::open(cfg));
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_runtime_open_config(const cxlt_config_t *cfg, cxlt_runtime_t **out) noexcept {
  return capi::capi_call([&] {
    CXLT_CAPI_REQUIRE(cfg != nullptr, "cxlt_runtime_open_config: cfg is NULL");
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_runtime_open_config: out is NULL");
    *out = register_runtime(Runtime::open(cfg->cfg));
    return CXLT_OK;
  });
}

void cxlt_runtime_close(cxlt_runtime_t *rt) noexcept {
  std::shared_ptr<Runtime> victim;
  {
    std::unique_lock lk(g_registry_mu);
    auto it = registry().find(reinterpret_cast<uintptr_t>(rt));
    if (it == registry().end()) return;  // closing twice, or a bad handle: nothing to do
    victim = std::move(it->second);
    registry().erase(it);
  }
  try {
    victim.reset();  // runs ~Runtime unless a call in flight still holds it
  } catch (...) {
    // ~Runtime does not throw; nothing may cross the C boundary regardless.
  }
}

cxlt_result_t cxlt_runtime_close_ex(cxlt_runtime_t *rt) noexcept {
  std::shared_ptr<Runtime> victim;
  {
    std::unique_lock lk(g_registry_mu);
    auto it = registry().find(reinterpret_cast<uintptr_t>(rt));
    if (it != registry().end()) {
      victim = std::move(it->second);
      registry().erase(it);
    }
  }
  return capi::capi_call([&] {
    if (!victim) fail(CXLT_ERROR_CLOSED, "cxlt_runtime_close_ex: runtime handle is closed or was never opened");
    // The handle is gone from the registry, so no new call reaches the runtime; calls already
    // in flight hold a reference for their duration and are short.
    while (victim.use_count() > 1) std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::shared_ptr<Runtime> last = std::move(victim);
    last->close();  // throws Error(CXLT_ERROR_IO) when the final checkpoint fails
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_block_admit(cxlt_runtime_t *rt, cxlt_key_t key, cxlt_block_t *out) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_block_admit: out is NULL");
    capi::write_block(r->admit(Key::from(key)), out);
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_block_admit_ex(cxlt_runtime_t *rt, cxlt_key_t key, unsigned flags, cxlt_block_t *out,
                                  int *placed) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_block_admit_ex: out is NULL");
    CXLT_CAPI_REQUIRE((flags & ~CXLT_ADMIT_PIN) == 0, "cxlt_block_admit_ex: unknown flag");
    bool p = false;
    capi::write_block(r->admit(Key::from(key), &p, (flags & CXLT_ADMIT_PIN) != 0), out);
    if (placed) *placed = p ? 1 : 0;
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_block_access(cxlt_runtime_t *rt, const cxlt_key_t *keys, const float *attention, size_t n) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    CXLT_CAPI_REQUIRE(n == 0 || keys != nullptr, "cxlt_block_access: keys is NULL");
    static_assert(sizeof(Key) == sizeof(cxlt_key_t) && alignof(Key) == alignof(cxlt_key_t));
    r->access(reinterpret_cast<const Key *>(keys), attention, n);
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_block_access_handles(cxlt_runtime_t *rt, const uint64_t *handles, const float *attention,
                                        size_t n) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    CXLT_CAPI_REQUIRE(n == 0 || handles != nullptr, "cxlt_block_access_handles: handles is NULL");
    r->access_handles(handles, attention, n);
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_block_lookup(cxlt_runtime_t *rt, cxlt_key_t key, cxlt_block_t *out) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_block_lookup: out is NULL");
    Block b;
    if (!r->lookup(Key::from(key), &b))
      fail(CXLT_ERROR_NOT_FOUND, "cxlt_block_lookup: block ", Key::from(key).hex(), " is not resident in any tier");
    capi::write_block(b, out);
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_block_move(cxlt_runtime_t *rt, cxlt_key_t key, int tier, unsigned flags, cxlt_block_t *out) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    CXLT_CAPI_REQUIRE((flags & ~CXLT_MOVE_WAIT) == 0, "cxlt_block_move: unknown flag");
    Block b = r->move(Key::from(key), tier, (flags & CXLT_MOVE_WAIT) != 0);
    if (out) capi::write_block(b, out);
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_block_pin(cxlt_runtime_t *rt, cxlt_key_t key, cxlt_block_t *out) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    Block b = r->pin(Key::from(key));
    if (out) capi::write_block(b, out);
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_block_unpin(cxlt_runtime_t *rt, cxlt_key_t key) noexcept {
  return capi::capi_call([&] {
    get(rt)->unpin(Key::from(key));
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_block_release(cxlt_runtime_t *rt, cxlt_key_t key, int forget) noexcept {
  return capi::capi_call([&] {
    get(rt)->release(Key::from(key), forget != 0);
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_runtime_policy_state(cxlt_runtime_t *rt, cxlt_key_t key, cxlt_policy_state_t *out) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_runtime_policy_state: out is NULL");
    if (!r->policy_state(Key::from(key), out))
      fail(CXLT_ERROR_NOT_FOUND, "cxlt_runtime_policy_state: block ", Key::from(key).hex(),
           " was never seen (or was forgotten)");
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_runtime_step(cxlt_runtime_t *rt) noexcept {
  return capi::capi_call([&] {
    get(rt)->step();
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_runtime_current_step(cxlt_runtime_t *rt, uint64_t *out) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_runtime_current_step: out is NULL");
    *out = r->current_step();
    return CXLT_OK;
  });
}

// The deprecated names (cxltier.h): exported functions, so that engines linked against 0.1.0
// keep resolving them, each the new call under its old name.
cxlt_result_t cxlt_policy_state(cxlt_runtime_t *rt, cxlt_key_t key, cxlt_policy_state_t *out) noexcept {
  return cxlt_runtime_policy_state(rt, key, out);
}

cxlt_result_t cxlt_step(cxlt_runtime_t *rt) noexcept { return cxlt_runtime_step(rt); }

cxlt_result_t cxlt_current_step(cxlt_runtime_t *rt, uint64_t *out) noexcept {
  return cxlt_runtime_current_step(rt, out);
}

cxlt_result_t cxlt_runtime_wait_idle(cxlt_runtime_t *rt, int64_t timeout_ms) noexcept {
  return capi::capi_call([&] {
    if (!get(rt)->wait_idle(timeout_ms))
      fail(CXLT_ERROR_TIMEOUT, "cxlt_runtime_wait_idle: migrations still in flight after ", timeout_ms, " ms");
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_runtime_checkpoint(cxlt_runtime_t *rt) noexcept {
  return capi::capi_call([&] {
    get(rt)->checkpoint();
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_runtime_tier_count(cxlt_runtime_t *rt, size_t *out) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_runtime_tier_count: out is NULL");
    *out = r->tier_count();
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_runtime_tier_info(cxlt_runtime_t *rt, size_t rank, cxlt_tier_info_t *out) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_runtime_tier_info: out is NULL");
    *out = r->tier_info(rank);
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_stats_get(cxlt_runtime_t *rt, cxlt_stats_t *out) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    CXLT_CAPI_REQUIRE(out != nullptr, "cxlt_stats_get: out is NULL");
    constexpr size_t before_placement = offsetof(cxlt_stats_t, inversions);  // the struct's size before those fields
    const size_t size = out->size;
    if ((size != sizeof(cxlt_stats_t) && size != before_placement) || out->version != CXLT_STATS_VERSION)
      fail(CXLT_ERROR_INVALID_ARGUMENT, "cxlt_stats_get: out->size = ", out->size, " and out->version = ", out->version,
           "; this library fills size ", sizeof(cxlt_stats_t), " (or ", before_placement, "), version ", CXLT_STATS_VERSION);
    const cxlt_stats_t s = r->stats(/*measure_placement=*/size == sizeof(cxlt_stats_t));  // the smaller struct has no field for it
    std::memcpy(static_cast<void *>(out), &s, size);
    out->size = size;
    return CXLT_OK;
  });
}

cxlt_result_t cxlt_stats_json(cxlt_runtime_t *rt, char *buf, size_t cap, size_t *needed) noexcept {
  return capi::capi_call([&] {
    auto r = get(rt);
    std::string j = r->stats_json();
    if (needed) *needed = j.size() + 1;
    if (buf == nullptr || cap < j.size() + 1)
      fail(CXLT_ERROR_INVALID_ARGUMENT, "cxlt_stats_json: the buffer holds ", cap, " bytes, ", j.size() + 1, " are needed");
    std::memcpy(buf, j.c_str(), j.size() + 1);
    return CXLT_OK;
  });
}

}  // extern "C"
