// SPDX-License-Identifier: Apache-2.0
// The score store's file and the runtime's open and close at their edges, in process: a store
// that could never be written is refused at open, not lost at close; the final checkpoint's
// result reaches the engine (cxlt_runtime_close_ex); two runtimes cannot share a store; only
// the temporary files the writer makes are cleaned up; FIFOs never block; damaged clocks and
// footers are refused; budgets that cannot fit in host memory are refused with the figures.
#include "../runtime/runtime_test_util.hpp"
#include "lib/store/score_store.hpp"
#include "lib/runtime/host_budget.hpp"
#include "../common/files.hpp"
#include "../common/temp_dir.hpp"

#include <cxltier/cxltier.h>
#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>
#include <cxltier/tools/trace.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace cxltier;
namespace fs = std::filesystem;
using cxlt_test::TempDir;

namespace {

// The error an action throws, as code and message; code CXLT_OK if it did not throw.
struct Thrown {
  cxlt_result_t code = CXLT_OK;
  std::string what;
};
template <typename F>
Thrown thrown(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    return {e.code(), e.what()};
  }
  return {};
}

RuntimeConfig store_config(const std::string &store) {
  RuntimeConfig cfg = cxlt_test::three_tier_config(8, 8, 8);
  cfg.store_path = store;
  return cfg;
}

pid_t dead_pid() {
  pid_t p = fork();
  if (p == 0) _exit(0);
  int st = 0;
  waitpid(p, &st, 0);
  return p;
}

}  // namespace

TEST(StoreOpen, MissingDirectoryIsRefusedAtOpen) {
  TempDir d;
  Thrown t = thrown([&] { Runtime::open(store_config(d / "no/such/dir/x.store")); });
  EXPECT_EQ(t.code, CXLT_ERROR_IO) << t.what;
  EXPECT_NE(t.what.find("no/such/dir"), std::string::npos) << t.what;
}

TEST(StoreOpen, ReadOnlyDirectoryIsRefusedAtOpen) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes into a read-only directory (the checkpoint would succeed)";
  TempDir d;
  fs::create_directory(d / "ro");
  fs::permissions(d / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  Thrown t = thrown([&] { Runtime::open(store_config(d / "ro/x.store")); });
  EXPECT_EQ(t.code, CXLT_ERROR_IO) << t.what;
  EXPECT_NE(t.what.find("not writable"), std::string::npos) << t.what;
}

TEST(StoreOpen, ImmutableFileIsRefusedAtOpen) {
  TempDir d;
  const std::string store = d / "x.store";
  { Runtime::open(store_config(store)); }  // writes a first checkpoint at close
  ASSERT_TRUE(fs::exists(store));
  if (std::system(("chattr +i " + store + " 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "chattr +i is not available here (needs root and a file system with the flag)";
  Thrown t = thrown([&] { Runtime::open(store_config(store)); });
  (void)std::system(("chattr -i " + store).c_str());
  EXPECT_EQ(t.code, CXLT_ERROR_IO) << t.what;
  EXPECT_NE(t.what.find("not writable"), std::string::npos) << t.what;
}

TEST(StoreOpen, FifoIsRefusedWithoutBlocking) {
  TempDir d;
  const std::string fifo = d / "fifo.store";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  Thrown t = thrown([&] { Runtime::open(store_config(fifo)); });
  EXPECT_EQ(t.code, CXLT_ERROR_IO) << t.what;
  EXPECT_NE(t.what.find("FIFO"), std::string::npos) << t.what;
  // The loader alone, which the runtime no longer reaches with a FIFO: it must not wait either.
  Thrown l = thrown([&] { ScoreStore::load(fifo); });
  EXPECT_EQ(l.code, CXLT_ERROR_IO) << l.what;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

TEST(StoreOpen, SecondRuntimeOnOneStoreIsRefusedNamingTheHolder) {
  TempDir d;
  const std::string store = d / "x.store";
  auto first = Runtime::open(store_config(store));
  Thrown t = thrown([&] { Runtime::open(store_config(store)); });
  EXPECT_EQ(t.code, CXLT_ERROR_IO) << t.what;
  EXPECT_NE(t.what.find("in use by process " + std::to_string(getpid())), std::string::npos) << t.what;
  first.reset();
  // Released with the first runtime: a new one opens.
  EXPECT_EQ(thrown([&] { Runtime::open(store_config(store)); }).code, CXLT_OK);
}

TEST(StoreCheckpoint, StaleTempCleanupKeepsNamesItDidNotWrite) {
  TempDir d;
  const std::string store = d / "s.store";
  const std::string dead = std::to_string(dead_pid());
  const std::vector<std::string> users = {"s.store.tmp.backup", "s.store.tmp.notes.txt", "s.store.tmp." + dead,
                                          "s.store.tmp." + dead + ".1.bak", "s.store.tmp." + dead + ".x",
                                          "s.store.tmp.0" + dead + ".1"};
  for (const std::string &u : users) cxlt_test::write_file(d / u, "the user's\n");
  const std::string stale = d / ("s.store.tmp." + dead + ".3");
  cxlt_test::write_file(stale, "a killed writer's\n");
  CheckpointMeta meta{1, 1, 0.05, 0.001, ScoreMode::touch};
  ScoreStore::write_checkpoint(store, meta, {});
  EXPECT_FALSE(fs::exists(stale)) << "a temporary file of a dead writer stays";
  for (const std::string &u : users) EXPECT_TRUE(fs::exists(d / u)) << u << " was deleted";
  cxlt_test::write_file(stale, "a killed writer's\n");
  ScoreStore::load(store);
  EXPECT_FALSE(fs::exists(stale));
  for (const std::string &u : users) EXPECT_TRUE(fs::exists(d / u)) << u << " was deleted by load";
}

TEST(StoreCheckpoint, FooterReservedWordIsChecked) {
  TempDir d;
  const std::string store = d / "s.store";
  ScoreStore::write_checkpoint(store, CheckpointMeta{3, 4, 0.05, 0.001, ScoreMode::touch}, {});
  std::string bytes = cxlt_test::read_file(store);
  ASSERT_GE(bytes.size(), 8u);
  bytes[bytes.size() - 1] = 1;  // the reserved word is outside every checksum
  cxlt_test::write_file(store, bytes);
  Thrown t = thrown([&] { ScoreStore::load(store); });
  EXPECT_EQ(t.code, CXLT_ERROR_CORRUPT) << t.what;
  EXPECT_NE(t.what.find("reserved"), std::string::npos) << t.what;
}

TEST(StoreCheckpoint, ClockAtItsEndIsRefused) {
  TempDir d;
  const std::string store = d / "s.store";
  for (auto meta : {CheckpointMeta{UINT64_MAX, 1, 0.05, 0.001, ScoreMode::touch},
                    CheckpointMeta{1, UINT64_MAX, 0.05, 0.001, ScoreMode::touch}}) {
    ScoreStore::write_checkpoint(store, meta, {});
    Thrown t = thrown([&] { ScoreStore::load(store); });
    EXPECT_EQ(t.code, CXLT_ERROR_CORRUPT) << t.what;
  }
}

TEST(StoreCheckpoint, ForeignLargeFileIsRefusedFromItsHeader) {
  TempDir d;
  const std::string store = d / "big.store";
  {
    std::ofstream f(store, std::ios::binary);
    f << "not a store";
  }
  fs::resize_file(store, uint64_t{4} << 30);  // sparse: 4 GiB that are not read
  const auto t0 = std::chrono::steady_clock::now();
  Thrown t = thrown([&] { ScoreStore::load(store); });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(t.code, CXLT_ERROR_CORRUPT) << t.what;
  EXPECT_NE(t.what.find("bad magic"), std::string::npos) << t.what;
  EXPECT_LT(secs, 1.0) << "the whole file was read before its magic was checked";
}

TEST(RuntimeClose, CloseExReportsTheFinalCheckpoint) {
  TempDir d;
  fs::create_directory(d / "a");
  const std::string store = d / "a/x.store";
  cxlt_config_t *cfg = nullptr;
  ASSERT_EQ(cxlt_config_create(&cfg), CXLT_OK);
  for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"topology", "emulated"}, {"store.path", store}, {"runtime.huge_pages", "none"}})
    ASSERT_EQ(cxlt_config_set(cfg, k.c_str(), v.c_str()), CXLT_OK) << k;
  cxlt_runtime_t *rt = nullptr;
  ASSERT_EQ(cxlt_runtime_open_config(cfg, &rt), CXLT_OK) << cxlt_last_error();
  EXPECT_EQ(cxlt_runtime_close_ex(rt), CXLT_OK) << cxlt_last_error();
  EXPECT_TRUE(fs::exists(store));
  EXPECT_EQ(cxlt_runtime_close_ex(rt), CXLT_ERROR_CLOSED);

  ASSERT_EQ(cxlt_runtime_open_config(cfg, &rt), CXLT_OK) << cxlt_last_error();
  fs::rename(d / "a", d / "moved");  // the store's directory is gone: no checkpoint can be written
  EXPECT_EQ(cxlt_runtime_close_ex(rt), CXLT_ERROR_IO);
  EXPECT_NE(std::string(cxlt_last_error()).find("x.store"), std::string::npos) << cxlt_last_error();
  EXPECT_EQ(cxlt_block_admit(rt, cxlt_key_t{1, 2}, nullptr), CXLT_ERROR_CLOSED) << "the handle stays closed";
  cxlt_config_destroy(cfg);
}

TEST(HostBudget, SumOverHostMemoryIsRefusedWithTheFigures) {
  const uint64_t host = host_memory_bytes();
  ASSERT_GT(host, 0u);
  // Three emulated tiers, each at 90 % of what it may hold alone (the embedded default declares
  // 4, 16 and 64 GiB, and no tier holds more than the host), together more than the host.
  RuntimeConfig cfg = cxlt_test::three_tier_config(1, 1, 1);
  const uint64_t block = cfg.geometry.bytes(), caps[3] = {uint64_t{4} << 30, uint64_t{16} << 30, uint64_t{64} << 30};
  uint64_t sum = 0;
  for (int i = 0; i < 3; ++i) {
    cfg.tiers[i].budget_bytes = std::min(caps[i], host) / 10 * 9 / block * block;
    sum += cfg.tiers[i].budget_bytes;
  }
  if (sum <= host) GTEST_SKIP() << "this host's memory holds the three tiers' largest budgets together";
  Thrown t = thrown([&] { Runtime::open(cfg); });
  EXPECT_EQ(t.code, CXLT_ERROR_CONFIG) << t.what;
  for (const char *name : {"hbm", "dram", "cxl", "add up to", "more than this host's"})
    EXPECT_NE(t.what.find(name), std::string::npos) << name << " in: " << t.what;
}

TEST(HostBudget, SumPerNodeIsChecked) {
  // Two real tiers on node 0 of a host whose node 0 has 10 GiB, 6 + 6 GiB: refused, naming node 0.
  auto ten_gib = [](unsigned node) -> uint64_t { return node == 0 ? uint64_t{10} << 30 : 0; };
  std::vector<HostBudget> tiers = {{"dram", uint64_t{6} << 30, false, {0}}, {"cxl", uint64_t{6} << 30, false, {0}}};
  Thrown t = thrown([&] { check_host_budgets(tiers, uint64_t{64} << 30, ten_gib); });
  EXPECT_EQ(t.code, CXLT_ERROR_CONFIG);
  EXPECT_NE(t.what.find("NUMA node 0 add up to 12.0 GiB"), std::string::npos) << t.what;
  tiers[1].nodes = {1};  // on another node: fits
  EXPECT_EQ(thrown([&] { check_host_budgets(tiers, uint64_t{64} << 30, ten_gib); }).code, CXLT_OK);
}

TEST(CApiKeys, NullTokensWithACountAreRefusedNotHashedAsNone) {
  const cxlt_key_t parent{7, 9};
  const cxlt_key_t none = cxlt_key_from_tokens(parent, nullptr, 0);
  const cxlt_key_t bad = cxlt_key_from_tokens(parent, nullptr, 3);
  EXPECT_FALSE(bad.hi == none.hi && bad.lo == none.lo) << "NULL with 3 tokens hashed as zero tokens";
  EXPECT_EQ(bad.hi, 0u);
  EXPECT_EQ(bad.lo, 0u);
  EXPECT_NE(std::string(cxlt_last_error()).find("tokens is NULL"), std::string::npos) << cxlt_last_error();
}

TEST(ConfigEnvironment, HugeTierIndexIsRefusedNotWarned) {
  RuntimeConfig c;
  Thrown t = thrown([&] { c.apply_environment_vars({{"CXLT_TIERS_18446744073709551616_BUDGET", "1GiB"}}); });
  EXPECT_EQ(t.code, CXLT_ERROR_CONFIG) << "only warned about";
  EXPECT_NE(t.what.find("tier index 18446744073709551616 is out of range"), std::string::npos) << t.what;
}

TEST(ConfigValidate, PaceTooSlowToTimeIsRefused) {
  RuntimeConfig c = cxlt_test::three_tier_config(4, 4, 4);
  c.tiers[2].options["pace_mib_s"] = "1e-300";
  Thrown t = thrown([&] { c.validate(); });
  EXPECT_EQ(t.code, CXLT_ERROR_CONFIG) << "1e-300 MiB/s was accepted";
  EXPECT_NE(t.what.find("pace_mib_s"), std::string::npos) << t.what;
  c.tiers[2].options["pace_mib_s"] = "1.0";
  EXPECT_EQ(thrown([&] { c.validate(); }).code, CXLT_OK);
}

TEST(RuntimeAdmit, RefusedAdmissionLeavesNoState) {
  RuntimeConfig cfg = cxlt_test::three_tier_config(1, 1, 1);
  cfg.extent_blocks = 1;
  auto rt = Runtime::open(cfg);
  for (uint64_t i = 1; i <= 3; ++i) rt->admit(Key{0, i}, nullptr, /*pin=*/true);
  const uint64_t entries = rt->stats().store_entries;
  Thrown t = thrown([&] { rt->admit(Key{0, 99}, nullptr, true); });
  ASSERT_EQ(t.code, CXLT_ERROR_OUT_OF_TIER_MEMORY) << t.what;
  cxlt_policy_state_t st{};
  EXPECT_FALSE(rt->policy_state(Key{0, 99}, &st)) << "a block never admitted has a policy state";
  EXPECT_EQ(rt->stats().store_entries, entries);
  EXPECT_EQ(rt->validate(), "");
  for (uint64_t i = 1; i <= 3; ++i) rt->unpin(Key{0, i});
}

TEST(TraceReader, DynamoBlockSizeZeroIsMalformedNotSixteen) {
  TempDir d;
  const std::string path = d / "zero.jsonl";
  cxlt_test::write_file(path, "{\"timestamp\":1,\"event\":{\"event_type\":\"request_end\",\"request\":{\"output_tokens\":3,"
                   "\"replay\":{\"trace_block_size\":0,\"input_sequence_hashes\":[1,2,3]}}}}\n");
  trace::ReaderOptions strict;
  strict.strict = true;
  Thrown t = thrown([&] {
    trace::Reader r(path, strict);
    trace::Request req;
    while (r.next(req)) {
    }
  });
  EXPECT_NE(t.code, CXLT_OK) << "trace_block_size 0 was read as the default block size";
  EXPECT_NE(t.what.find("trace_block_size"), std::string::npos) << t.what;
}
