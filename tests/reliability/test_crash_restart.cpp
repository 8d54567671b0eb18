// SPDX-License-Identifier: Apache-2.0
// Crash and restart. `cxltier run --store FILE` with periodic checkpoints is
// killed with SIGKILL at random moments and restarted on the same file, again and again: the
// file must always be a whole checkpoint (or absent, before the first), owner-only, its clock
// never going back and no block's access count shrinking; a runtime reopened on it must
// restore exactly the states it holds, and the CLI must reopen it. A deterministic writer
// (crash_writer: runtime.synchronous) killed the same way must leave exactly the checkpoint a
// clean run of as many steps writes. Files the library writes are owner-only (0600) whatever
// the umask, and never written through a symbolic link planted at their path.
#include "reliability_util.hpp"

#include "../common/cli.hpp"
#include "../common/files.hpp"
#include "../common/temp_dir.hpp"
#include "../runtime/runtime_test_util.hpp"
#include "lib/store/score_store.hpp"

#include <cxltier/error.hpp>
#include <cxltier/policy.hpp>
#include <cxltier/runtime.hpp>
#include <cxltier/tools/trace.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <signal.h>
#include <spawn.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace cxltier;
namespace fs = std::filesystem;

namespace {

// A small configuration for `cxltier run`: the runtime test geometry (32 KiB blocks) on three
// emulated tiers of 64, 128 and 256 blocks, a checkpoint every 5 decode steps.
const char *kRunConfig = R"(topology = "emulated"
[geometry]
layers = 4
kv_heads = 2
head_dim = 64
bytes_per_element = 2
tokens_per_block = 16
[store]
checkpoint_every_steps = 5
[runtime]
huge_pages = "none"
extent_blocks = 4
[[tiers]]
kind = "hbm"
budget = "2MiB"
[[tiers]]
kind = "dram"
budget = "4MiB"
[[tiers]]
kind = "cxl"
budget = "8MiB"
)";

// Start `program args...` with stdout and stderr to /dev/null; returns its pid.
pid_t spawn_quiet(const std::string &program, const std::vector<std::string> &args) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> argv_s{program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char *> argv;
  for (auto &a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, program.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// SIGKILL after `delay`; returns true if the process was still running then (killed by us).
bool kill_after(pid_t pid, std::chrono::milliseconds delay) {
  std::this_thread::sleep_for(delay);
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) == pid) return false;  // it ended by itself
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

std::vector<std::string> temp_files_beside(const std::string &path) {
  std::vector<std::string> out;
  const std::string prefix = fs::path(path).filename().string() + ".tmp.";
  for (const auto &e : fs::directory_iterator(fs::path(path).parent_path()))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().string());
  return out;
}

unsigned mode_of(const std::string &path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

std::string crash_writer() {
  const char *p = std::getenv("CXLT_CRASH_WRITER");
  return p ? p : "";
}

// Kill delays: the runs start slower under sanitizers.
std::chrono::milliseconds random_delay(std::mt19937_64 &rng) {
  const int lo = cxlt_rel::kSanitized ? 800 : 250, span = cxlt_rel::kSanitized ? 3000 : 1500;
  return std::chrono::milliseconds(lo + static_cast<int>(rng() % span));
}

}  // namespace

// How long a `cxltier run` takes to write its first checkpoint on this machine now (opening a
// runtime costs seconds on a loaded 2-core host): the run is killed as soon as the file exists.
static std::chrono::milliseconds time_to_first_checkpoint(const std::string &config, const std::string &store) {
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = spawn_quiet(cxlt_test::tool_path(), {"run", "--config", config, "--store", store, "--steps", "1000000", "--quiet"});
  if (pid <= 0) return std::chrono::milliseconds(0);
  while (!fs::exists(store) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  fs::remove(store);
  return took;
}

TEST(CrashRestart, CliKilledAtRandomMomentsReopensAtItsLastCheckpoint) {
  const cxlt_test::TempDir tmp("crash");
  const std::string dir = tmp.path().string();
  const std::string config = cxlt_test::write_file(dir + "/run.toml", kRunConfig);
  const std::string store = dir + "/scores.store";
  const uint64_t kills = cxlt_rel::scaled(8, 2);
  std::mt19937_64 rng(20240611);
  // Kill moments spread around this machine's time to a first checkpoint (from half of it to
  // three times it), so that some kills come before any checkpoint and most after one.
  const auto first = time_to_first_checkpoint(config, dir + "/calibration.store");
  ASSERT_GT(first.count(), 0) << "the calibration run did not start";
  auto kill_delay = [&] {
    const auto fixed = random_delay(rng);
    const auto scaled = std::chrono::milliseconds(first.count() / 2 + static_cast<long>(rng() % static_cast<uint64_t>(5 * first.count() / 2 + 1)));
    return std::max(fixed, scaled);
  };
  const mode_t old_umask = umask(0);  // the library must not rely on the umask for 0600
  uint64_t killed = 0, checkpoints_seen = 0, temps_left = 0, states_checked = 0, last_step = 0;
  std::map<Key, uint64_t> accesses;  // per key, the count in the previous checkpoint
  for (uint64_t round = 0; round < kills; ++round) {
    pid_t pid = spawn_quiet(cxlt_test::tool_path(), {"run", "--config", config, "--store", store, "--steps", "1000000",
                                                     "--seed", std::to_string(round + 1), "--quiet"});
    ASSERT_GT(pid, 0);
    if (kill_after(pid, kill_delay())) ++killed;
    temps_left += temp_files_beside(store).size();
    if (!fs::exists(store)) {
      EXPECT_EQ(last_step, 0u) << "a checkpoint existed and is gone after round " << round;
      continue;  // killed before its first checkpoint
    }
    ++checkpoints_seen;
    EXPECT_EQ(mode_of(store), 0600u) << "round " << round;
    LoadedCheckpoint cp;
    ASSERT_NO_THROW(cp = ScoreStore::load(store)) << "round " << round << ": the file is not a whole checkpoint";
    EXPECT_TRUE(temp_files_beside(store).empty()) << "opening the store removes a dead writer's temporary file";
    EXPECT_GE(cp.meta.current_step, last_step) << "the clock went back after round " << round;
    for (const auto &[k, st] : cp.states) {
      auto it = accesses.find(k);
      if (it != accesses.end()) {
        EXPECT_GE(st.accesses, it->second) << k.hex();
      }
      accesses[k] = st.accesses;
    }
    last_step = cp.meta.current_step;

    // Reopen in-process with the same configuration: every stored state comes back as it was.
    RuntimeConfig cfg;
    cfg.load_toml_file(config);
    cfg.store_path = store;
    {
      auto rt = Runtime::open(cfg);
      EXPECT_EQ(rt->current_step(), cp.meta.current_step);
      for (const auto &[k, st] : cp.states) {
        cxlt_policy_state_t got{};
        ASSERT_TRUE(rt->policy_state(k, &got)) << k.hex();
        EXPECT_EQ(got.last_access_step, st.last_access);
        EXPECT_EQ(got.accesses, st.accesses);
        EXPECT_EQ(got.tier, -1) << "nothing is resident after a restart";
        const double want = lrfu_effective_score(st.score, cp.meta.current_step - std::min(cp.meta.current_step, st.last_access), cfg.lrfu);
        EXPECT_EQ(got.score, want) << k.hex();
        ++states_checked;
      }
      EXPECT_EQ(rt->stats().store_entries, cp.states.size());
    }
    // And the CLI reopens it: one decode step on top of the restored clock and states (`--steps
    // 0` means "until every sequence ends" to `cxltier run`, so one step is the least it runs).
    if (round % 2 == 1) {
      cxlt_test::ToolResult r = cxlt_test::run_program(
          cxlt_test::tool_path(),
          {"run", "--config", config, "--store", store, "--steps", "1", "--sequences", "1", "--json", "--quiet"});
      ASSERT_EQ(r.status, 0) << r.err;
      nlohmann::json j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["step"].get<uint64_t>(), cp.meta.current_step + 1);
      EXPECT_GE(j["store"]["entries"].get<uint64_t>(), cp.states.size());
      last_step = cp.meta.current_step + 1;
    }
    EXPECT_EQ(mode_of(store), 0600u);
  }
  umask(old_umask);
  EXPECT_GT(checkpoints_seen, 0u) << "no kill came after a checkpoint: the delays are too short for this machine";
  std::printf("first checkpoint after %lld ms; cxltier run killed %llu times (SIGKILL at random moments), checkpoint "
              "found after %llu of them, last at step %llu; %llu temporary files left by a killed writer, all removed on "
              "reopen; %llu restored states compared\n",
              static_cast<long long>(first.count()), (unsigned long long)killed, (unsigned long long)checkpoints_seen, (unsigned long long)last_step,
              (unsigned long long)temps_left, (unsigned long long)states_checked);
}

TEST(CrashRestart, KilledDeterministicWriterLeavesWhatACleanRunWrites) {
  const std::string writer = crash_writer();
  if (writer.empty()) GTEST_SKIP() << "CXLT_CRASH_WRITER is not set (tests/reliability/meson.build sets it)";
  const cxlt_test::TempDir tmp("crashw");
  const std::string dir = tmp.path().string();
  const uint64_t kills = cxlt_rel::scaled(6, 2);
  std::mt19937_64 rng(99);
  uint64_t compared = 0, states = 0;
  for (uint64_t round = 0; round < kills; ++round) {
    const std::string killed_store = dir + "/killed." + std::to_string(round);
    const std::string clean_store = dir + "/clean." + std::to_string(round);
    pid_t pid = spawn_quiet(writer, {killed_store, "100000000", "7", std::to_string(round)});
    ASSERT_GT(pid, 0);
    kill_after(pid, random_delay(rng));
    if (!fs::exists(killed_store)) continue;
    LoadedCheckpoint a;
    ASSERT_NO_THROW(a = ScoreStore::load(killed_store));
    ASSERT_EQ(a.meta.current_step % 7, 0u);
    cxlt_test::ToolResult r =
        cxlt_test::run_program(writer, {clean_store, std::to_string(a.meta.current_step), "7", std::to_string(round)});
    ASSERT_EQ(r.status, 0) << r.err;
    LoadedCheckpoint b = ScoreStore::load(clean_store);
    EXPECT_EQ(a.meta.current_step, b.meta.current_step);
    EXPECT_EQ(a.meta.current_tick, b.meta.current_tick);
    std::map<Key, PolicyState> sa, sb;
    for (const auto &[k, s] : a.states) sa[k] = s;
    for (const auto &[k, s] : b.states) sb[k] = s;
    ASSERT_EQ(sa.size(), sb.size());
    for (const auto &[k, s] : sa) {
      auto it = sb.find(k);
      ASSERT_NE(it, sb.end()) << k.hex();
      EXPECT_EQ(std::memcmp(&s, &it->second, sizeof s), 0) << "state of " << k.hex() << " differs";
    }
    ++compared;
    states += sa.size();
  }
  EXPECT_GT(compared, 0u) << "no kill came after a checkpoint";
  std::printf("deterministic writer killed %llu times; %llu checkpoints compared with a clean run's, %llu states, all "
              "equal\n",
              (unsigned long long)kills, (unsigned long long)compared, (unsigned long long)states);
}

TEST(CrashRestart, FilesTheLibraryWritesAreOwnerOnlyWhateverTheUmask) {
  const cxlt_test::TempDir tmp("mode");
  const std::string dir = tmp.path().string();
  const mode_t old_umask = umask(0);
  RuntimeConfig cfg = cxlt_test::three_tier_config(4, 4, 4);
  cfg.store_path = dir + "/a.store";
  {
    auto rt = Runtime::open(cfg);
    rt->admit(key_from_sequence(1, 1));
    rt->checkpoint();
    EXPECT_EQ(mode_of(cfg.store_path), 0600u);
  }
  EXPECT_EQ(mode_of(cfg.store_path), 0600u);  // rewritten at close
  // A trace the library writes (cxltier gen-trace), plain and gzip.
  trace::SyntheticParams p;
  p.steps = 3;
  p.sequences = 2;
  for (const char *name : {"/t.jsonl", "/t.jsonl.gz"}) {
    trace::write_attention_trace(dir + name, p);
    EXPECT_EQ(mode_of(dir + name), 0600u) << name;
  }
  umask(old_umask);
}

TEST(CrashRestart, SymbolicLinkPlantedAtAPathIsNeverWrittenThrough) {
  const cxlt_test::TempDir tmp("link");
  const std::string dir = tmp.path().string();
  const std::string victim = cxlt_test::write_file(dir + "/victim", "precious\n");
  const std::string link = dir + "/scores.store";
  RuntimeConfig cfg = cxlt_test::three_tier_config(4, 4, 4);
  cfg.store_path = link;

  // 1. A link to an existing file: opening refuses, the file is untouched.
  fs::create_symlink(victim, link);
  try {
    Runtime::open(cfg);
    ADD_FAILURE() << "opened a store through a symbolic link";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_IO) << e.what();
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cxlt_test::read_file(victim), "precious\n");

  // 2. The CLI says so and fails.
  cxlt_test::ToolResult r = cxlt_test::run_program(
      cxlt_test::tool_path(), {"run", "--topology", "emulated", "--store", link, "--steps", "1", "--quiet"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("symbolic link"), std::string::npos) << r.err;
  EXPECT_EQ(cxlt_test::read_file(victim), "precious\n");

  // 3. A dangling link: refused too, and its target is not created.
  fs::remove(link);
  fs::create_symlink(dir + "/not-there", link);
  EXPECT_THROW(Runtime::open(cfg), Error);
  EXPECT_FALSE(fs::exists(dir + "/not-there"));

  // 4. A link planted after the runtime opened: checkpoints refuse it, close too.
  fs::remove(link);
  {
    auto rt = Runtime::open(cfg);
    rt->admit(key_from_sequence(2, 2));
    fs::create_symlink(victim, link);
    try {
      rt->checkpoint();
      ADD_FAILURE() << "checkpoint wrote through a symbolic link";
    } catch (const Error &e) {
      EXPECT_EQ(e.code(), CXLT_ERROR_IO) << e.what();
    }
  }  // close: its final checkpoint fails the same way (reported on stderr)
  EXPECT_EQ(cxlt_test::read_file(victim), "precious\n");
  EXPECT_TRUE(fs::is_symlink(link));

  // 5. Links planted at the temporary names the writer will use: it creates with O_EXCL and
  // O_NOFOLLOW, so it fails rather than follow one.
  fs::remove(link);
  for (int n = 0; n < 4096; ++n)
    fs::create_symlink(victim, link + ".tmp." + std::to_string(getpid()) + "." + std::to_string(n));
  {
    auto rt = Runtime::open(cfg);
    rt->admit(key_from_sequence(3, 3));
    EXPECT_THROW(rt->checkpoint(), Error);
  }
  EXPECT_EQ(cxlt_test::read_file(victim), "precious\n");

  // 6. The trace writer refuses a link at its output path.
  const std::string trace_link = dir + "/trace.jsonl";
  fs::create_symlink(victim, trace_link);
  trace::SyntheticParams p;
  p.steps = 2;
  p.sequences = 1;
  EXPECT_THROW(trace::write_attention_trace(trace_link, p), Error);
  EXPECT_EQ(cxlt_test::read_file(victim), "precious\n");
}

// Paths that are not regular files: a FIFO given as the
// config file is refused at once (it used to block forever waiting for a writer); a FIFO at the
// trace writer's output path or at its temporary name is refused and left as it was (the trace
// used to be renamed over it: as root, `gen-trace --out /dev/null` replaced /dev/null). No
// reader or writer is ever attached, so a regression blocks and meson's timeout fails the test.
TEST(CrashRestart, FifosAtInputAndOutputPathsAreRefusedNotBlockedOnOrReplaced) {
  const cxlt_test::TempDir tmp("fifo");
  const std::string dir = tmp.path().string();
  const std::string config = dir + "/config.toml";
  ASSERT_EQ(::mkfifo(config.c_str(), 0600), 0);
  RuntimeConfig c;
  try {
    c.load_toml_file(config);
    ADD_FAILURE() << "a FIFO was read as a config file";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_IO) << e.what();
    EXPECT_NE(std::string(e.what()).find(config), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RuntimeConfig::from_sources(config), Error);

  trace::SyntheticParams p;
  p.steps = 2;
  p.sequences = 1;
  const std::string out = dir + "/trace.jsonl";
  ASSERT_EQ(::mkfifo(out.c_str(), 0600), 0);
  try {
    trace::write_attention_trace(out, p);
    ADD_FAILURE() << "the trace writer replaced a FIFO";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_IO) << e.what();
    EXPECT_NE(std::string(e.what()).find("a FIFO"), std::string::npos) << e.what();
  }
  struct stat st {};
  ASSERT_EQ(::lstat(out.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << out << " is no longer a FIFO";

  // The temporary name: refused without blocking, and the FIFO there is not removed.
  const std::string out2 = dir + "/trace2.jsonl";
  ASSERT_EQ(::mkfifo((out2 + ".tmp").c_str(), 0600), 0);
  EXPECT_THROW(trace::write_attention_trace(out2, p), Error);
  ASSERT_EQ(::lstat((out2 + ".tmp").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_FALSE(fs::exists(out2));

  // A regular file at the path is still replaced (the normal case: rerunning gen-trace).
  cxlt_test::write_file(out2, "old\n");
  fs::remove(out2 + ".tmp");
  trace::write_attention_trace(out2, p);
  EXPECT_NE(cxlt_test::read_file(out2), "old\n");
}
