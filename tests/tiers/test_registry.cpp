// SPDX-License-Identifier: Apache-2.0
// The backend registry and the ops-table rules: versions, mandatory ops, NOT_SUPPORTED
// defaults, and clean answers for backends this build lacks (cuda; memkind when not built).
#include "lib/memory/backend.hpp"
#include "lib/memory/choose.hpp"
#include "lib/memory/tier_ops.hpp"
#include "lib/topology/gpu.hpp"

#include <cxltier/error.hpp>

#include "cxlt_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

using namespace cxltier;

namespace {

bool contains(const std::string &hay, const std::string &needle) { return hay.find(needle) != std::string::npos; }

cxlt_result_t dummy_init(const TierBackendParams *, void **state) {
  *state = nullptr;
  return CXLT_OK;
}
void dummy_fini(void *) {}
cxlt_result_t dummy_alloc(void *, size_t, TierExtent *) { return CXLT_ERROR_OUT_OF_TIER_MEMORY; }
cxlt_result_t dummy_free(void *, const TierExtent *) { return CXLT_OK; }
cxlt_result_t dummy_capacity(void *, TierCapacity *out) {
  *out = {};
  return CXLT_OK;
}

TierOps dummy_ops() {
  return TierOps{.version = CXLT_TIER_OPS_VERSION,
                 .name = "dummy",
                 .initialize = dummy_init,
                 .finalize = dummy_fini,
                 .alloc_extent = dummy_alloc,
                 .free_extent = dummy_free,
                 .capacity = dummy_capacity};
}

BackendWish wish(const char *backend) {
  BackendWish w;
  w.backend = backend;
  return w;
}

}  // namespace

TEST(Registry, ListsTheBuiltInBackends) {
  auto names = tier_ops_names();
  for (const char *n : {"numa", "emulated", "null", "faulty"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
#if CXLT_HAVE_CUDA_BUILD
  EXPECT_NE(std::find(names.begin(), names.end(), "cuda"), names.end());  // tiers/cuda (tests/gpu)
#else
  EXPECT_EQ(std::find(names.begin(), names.end(), "cuda"), names.end());
#endif
#if CXLT_HAVE_MEMKIND
  EXPECT_NE(std::find(names.begin(), names.end(), "memkind"), names.end());
#else
  EXPECT_EQ(std::find(names.begin(), names.end(), "memkind"), names.end());
#endif
  for (const std::string &n : names) {
    const TierOps *ops = tier_ops_find(n, nullptr);
    ASSERT_NE(ops, nullptr) << n;
    EXPECT_EQ(ops->version, CXLT_TIER_OPS_VERSION);
    EXPECT_EQ(n, ops->name);
    // Validated tables have no null members.
    EXPECT_NE(ops->ext_verify_placement, nullptr);
    EXPECT_NE(ops->ext_copy_in, nullptr);
    EXPECT_NE(ops->ext_copy_out, nullptr);
    EXPECT_NE(ops->ext_describe, nullptr);
  }
}

TEST(Registry, CudaAnswersNotAvailable) {
  std::string why;
#if CXLT_HAVE_CUDA_BUILD
  // Built: the table exists and initialize says why it cannot run (no driver, no device);
  // tests/gpu covers the rest. On a machine with a GPU it would open, so this case is moot.
  EXPECT_NE(tier_ops_find("cuda", &why), nullptr);
  if (gpu_discovery().available) GTEST_SKIP() << "this machine has a CUDA GPU: tests/gpu covers the cuda backend";
#else
  EXPECT_EQ(tier_ops_find("cuda", &why), nullptr);
  EXPECT_TRUE(contains(why, "not in this build")) << why;
#endif
  try {
    TierBackend b("cuda", TierBackendParams{});
    FAIL() << "cuda backend opened";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_NOT_SUPPORTED);
    EXPECT_TRUE(contains(e.what(), "cuda")) << e.what();
  }
}

TEST(Registry, MemkindPresentOrExplained) {
  std::string why;
  const TierOps *ops = tier_ops_find("memkind", &why);
#if CXLT_HAVE_MEMKIND
  EXPECT_NE(ops, nullptr);
#else
  EXPECT_EQ(ops, nullptr);
  EXPECT_TRUE(contains(why, "libmemkind was not found")) << why;
  EXPECT_TRUE(contains(why, "discontinued")) << why;
#endif
}

TEST(Registry, UnknownNameListsKnownOnes) {
  std::string why;
  EXPECT_EQ(tier_ops_find("nvdimm-magic", &why), nullptr);
  EXPECT_TRUE(contains(why, "unknown tier backend 'nvdimm-magic'")) << why;
  EXPECT_TRUE(contains(why, "numa")) << why;
  EXPECT_EQ(tier_ops_find("nvdimm-magic", nullptr), nullptr);  // why may be null
}

TEST(OpsTable, ValidateFillsOptionalOpsWithNotSupported) {
  TierOps v = tier_ops_validate(dummy_ops());
  ASSERT_NE(v.ext_copy_in, nullptr);
  EXPECT_EQ(v.ext_copy_in(nullptr, nullptr, nullptr, 0, nullptr), CXLT_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(v.ext_copy_out(nullptr, nullptr, nullptr, 0, nullptr), CXLT_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(v.ext_verify_placement(nullptr, nullptr, 0), CXLT_ERROR_NOT_SUPPORTED);
  const char *d = nullptr;
  EXPECT_EQ(v.ext_describe(nullptr, &d), CXLT_ERROR_NOT_SUPPORTED);
  for (TierOp op : {TierOp::verify_placement, TierOp::copy_in, TierOp::copy_out, TierOp::describe}) {
    EXPECT_FALSE(tier_op_supported(v, op));
  }
  // The real backends say what they provide.
  const TierOps *numa = tier_ops_find("numa", nullptr);
  EXPECT_TRUE(tier_op_supported(*numa, TierOp::verify_placement));
  EXPECT_FALSE(tier_op_supported(*numa, TierOp::copy_in));
  const TierOps *null = tier_ops_find("null", nullptr);
  EXPECT_TRUE(tier_op_supported(*null, TierOp::copy_in));
  EXPECT_TRUE(tier_op_supported(*null, TierOp::copy_out));
  const TierOps *emu = tier_ops_find("emulated", nullptr);
  EXPECT_TRUE(tier_op_supported(*emu, TierOp::copy_in));
  EXPECT_FALSE(tier_op_supported(*emu, TierOp::verify_placement));
}

TEST(OpsTable, ValidateRejectsWrongVersionAndMissingOps) {
  TierOps ops = dummy_ops();
  ops.version = CXLT_TIER_OPS_VERSION + 1;
  try {
    (void)tier_ops_validate(ops);
    FAIL() << "a table of the wrong version was accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_BACKEND);
    EXPECT_TRUE(contains(e.what(), "dummy")) << e.what();
    EXPECT_TRUE(contains(e.what(), "version")) << e.what();
  }
  ops = dummy_ops();
  ops.free_extent = nullptr;
  try {
    (void)tier_ops_validate(ops);
    FAIL() << "a table without free_extent was accepted";
  } catch (const Error &e) {
    EXPECT_TRUE(contains(e.what(), "free_extent")) << e.what();
  }
  ops = dummy_ops();
  ops.name = nullptr;
  EXPECT_THROW((void)tier_ops_validate(ops), Error);
}

TEST(OpsTable, BackendErrorIsThreadLocal) {
  backend_set_error("main thread message");
  std::string other;
  std::thread t([&] {
    other = backend_last_error();
    backend_set_error("other thread message");
  });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(backend_last_error(), "main thread message");
}

// The core chooses backends by their traits; these are the choices it made by name before.
TEST(Choose, AutoPicksByTraits) {
  EXPECT_EQ(choose_backend(wish("auto")).name, "numa");  // a real host tier: node binding
  BackendWish w = wish("auto");
  w.emulated = true;
  EXPECT_EQ(choose_backend(w).name, "emulated");  // a stand-in without binding
  w = wish("auto");
  w.device_tier = true;
#if CXLT_HAVE_CUDA_BUILD
  EXPECT_EQ(choose_backend(w).name, "cuda");
#else
  try {
    choose_backend(w);
    FAIL() << "a device tier chose a backend in a build without one";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_CONFIG);
    EXPECT_TRUE(contains(e.what(), "device memory")) << e.what();
  }
#endif
  // Named backends are taken as named, even one this build lacks (opening it explains).
  BackendChoice c = choose_backend(wish("no-such-backend"));
  EXPECT_EQ(c.name, "no-such-backend");
  EXPECT_EQ(c.ops, nullptr);
  EXPECT_FALSE(c.wrapped);
}

TEST(Choose, HostTiersArePinnedForADeviceUnlessTheyCopyThemselves) {
  for (const char *n : {"numa", "emulated", "null", "faulty"}) {
    BackendWish w = wish(n);
    w.pin_for_device = true;
    const BackendChoice c = choose_backend(w);
    EXPECT_EQ(c.name, n);
    const bool pinned = std::string(n) == "numa" || std::string(n) == "emulated";
#if CXLT_HAVE_CUDA_BUILD
    EXPECT_EQ(c.wrapped, pinned) << n;
    EXPECT_EQ(c.open_as, pinned ? "cuda-host" : n) << n;
#else
    (void)pinned;
    EXPECT_FALSE(c.wrapped) << n << ": no pinning decorator in this build";
    EXPECT_EQ(c.open_as, n);
#endif
  }
  BackendWish paced = wish("emulated");  // a paced tier keeps its own copy path
  paced.pin_for_device = true;
  paced.paced = true;
  EXPECT_FALSE(choose_backend(paced).wrapped);
  EXPECT_FALSE(choose_backend(wish("numa")).wrapped);  // no device tier: nothing to pin for
}

TEST(Choose, TraitsOfTheBuiltInBackends) {
  const TierOps *null = first_backend_with(CXLT_TRAIT_COPIES_ITSELF, CXLT_TRAIT_HOLDS_BYTES | CXLT_TRAIT_WRAPS_INNER);
  ASSERT_NE(null, nullptr);
  EXPECT_STREQ(null->name, "null");  // what replay runs on
  const TierOps *faulty = tier_ops_find("faulty", nullptr);
  ASSERT_NE(faulty, nullptr);
  EXPECT_TRUE(faulty->traits & CXLT_TRAIT_INJECTS_FAULTS);
  EXPECT_TRUE(faulty->traits & CXLT_TRAIT_WRAPS_INNER);
  for (const std::string &n : tier_ops_names()) {
    const uint32_t t = tier_ops_find(n, nullptr)->traits;
    // Device memory is never host-addressable; a decorator that pins wraps something.
    EXPECT_FALSE((t & CXLT_TRAIT_DEVICE_MEMORY) && (t & CXLT_TRAIT_HOST_ADDRESSABLE)) << n;
    EXPECT_TRUE(!(t & CXLT_TRAIT_PINS_FOR_DEVICE) || (t & CXLT_TRAIT_WRAPS_INNER)) << n;
    // Every backend a tier may name is one the configuration accepts.
    if (!(t & CXLT_TRAIT_PINS_FOR_DEVICE)) {
      const std::vector<std::string> choices = tier_backend_choices();
      EXPECT_NE(std::find(choices.begin(), choices.end(), n), choices.end()) << n;
    }
  }
}
