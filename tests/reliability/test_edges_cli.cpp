// SPDX-License-Identifier: Apache-2.0
// The CLI at its edges, through the real binary, as a careless or hostile user drives it:
// geometries and backends `cxltier run` must run or refuse (never crash), store and password
// paths that are FIFOs, devices or huge files (refused at once, never a hang or an unbounded
// read), plot file names that try to become gnuplot code, and generator sizes it cannot hold.
// Every refusal exits 2 and names what was wrong.
#include "../common/cli.hpp"
#include "../common/files.hpp"
#include "../common/temp_dir.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <signal.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using cxlt_test::ToolResult;
using cxlt_test::TempDir;

namespace {

// Run the tool; a run still going after `limit` is killed and reported as status -2 (a hang).
// The default is a guard against a hang, not a speed check: one 200-step placement run under
// ThreadSanitizer took 30-60 s on a loaded 2-core CI host, and once went past a 60 s guard.
// Tests that assert a run does not block pass their own, shorter limit.
ToolResult run_limited(const std::vector<std::string> &args, const std::vector<std::string> &env = {},
                       std::chrono::seconds limit = std::chrono::seconds(300)) {
  cxlt_test::Started s = cxlt_test::start_program(cxlt_test::tool_path(), args, env);
  if (s.pid <= 0) return cxlt_test::finish_program(s);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false, hung = false;
  std::thread watchdog([&, pid = s.pid] {
    std::unique_lock lk(mu);
    if (!cv.wait_for(lk, limit, [&] { return done; })) {
      hung = true;
      kill(pid, SIGKILL);  // not reaped yet: finish_program is still reading its pipes
    }
  });
  ToolResult r = cxlt_test::finish_program(s);
  {
    std::lock_guard lk(mu);
    done = true;
  }
  cv.notify_all();
  watchdog.join();
  if (hung) r.status = -2;
  return r;
}

// Two small emulated tiers with the given geometry lines.
std::string run_config(const TempDir &d, const std::string &geometry) {
  const std::string path = d / "run.toml";
  cxlt_test::write_file(path, "topology = \"emulated\"\n[geometry]\n" + geometry +
                       "\n[runtime]\nhuge_pages = \"none\"\nextent_blocks = 4\n"
                       "[[tiers]]\nkind = \"hbm\"\nbudget = \"64KiB\"\n[[tiers]]\nkind = \"dram\"\nbudget = \"128KiB\"\n");
  return path;
}

const char *kTinyGeometry = "layers = 1\nkv_heads = 1\nhead_dim = 1\nbytes_per_element = 1\nk_and_v = false\n";

}  // namespace

TEST(RunCli, BlocksBelowTheHeaderAreRefusedNotCrashed) {
  TempDir d;
  for (int tokens : {1, 8, 31}) {
    auto r = run_limited({"run", "--config", run_config(d, std::string(kTinyGeometry) + "tokens_per_block = " +
                                                              std::to_string(tokens)),
                          "--steps", "5", "--quiet"});
    EXPECT_EQ(r.status, 2) << tokens << " tokens: " << r.err;
    EXPECT_NE(r.err.find("at least 32 bytes"), std::string::npos) << r.err;
  }
  auto ok = run_limited({"run", "--config", run_config(d, std::string(kTinyGeometry) + "tokens_per_block = 40"),
                         "--steps", "5", "--quiet", "--sequences", "16", "--active", "4"});
  EXPECT_EQ(ok.status, 0) << "40-byte blocks: " << ok.err;
  EXPECT_NE(ok.out.find("integrity errors: 0"), std::string::npos) << ok.out;
}

TEST(RunCli, EveryTierOnTheNullBackendRuns) {
  auto r = run_limited({"run", "--topology", "emulated", "--steps", "10", "--quiet"},
                       {"CXLT_TIERS_0_BACKEND=null", "CXLT_TIERS_1_BACKEND=null", "CXLT_TIERS_2_BACKEND=null",
                        "CXLT_TIERS_0_KIND=hbm", "CXLT_TIERS_1_KIND=dram", "CXLT_TIERS_2_KIND=cxl"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("integrity errors: 0"), std::string::npos) << r.out;
}

TEST(RunCli, UnwritableStoreIsRefusedAtOpen) {
  auto r = run_limited({"run", "--topology", "emulated", "--steps", "3", "--quiet", "--store", "no/such/dir/x.store"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("no/such/dir"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("decode steps"), std::string::npos) << "the run must not start: " << r.out;
}

TEST(RunCli, FifoStoreIsRefusedWithoutBlocking) {
  TempDir d;
  const std::string fifo = d / "fifo.store";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto r = run_limited({"run", "--topology", "emulated", "--steps", "3", "--quiet", "--store", fifo}, {},
                       std::chrono::seconds(30));
  ASSERT_NE(r.status, -2) << "cxltier run blocked on a FIFO as store.path";
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("FIFO"), std::string::npos) << r.err;
}

TEST(PasswordFile, FifoDeviceHugeAndMissingAreRefused) {
  TempDir d;
  const std::string fifo = d / "pw.fifo", huge = d / "pw.huge", missing = d / "pw.missing";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  cxlt_test::write_file(huge, "secret\n");
  fs::resize_file(huge, uint64_t{1} << 30);  // sparse
  struct Case {
    std::string file;
    const char *needle;
  } cases[] = {{fifo, "not a regular file"}, {"/dev/zero", "not a regular file"}, {huge, "at most"},
               {missing, "cannot be read"}};
  for (const Case &c : cases) {
    // The runtime reads the file at open, before it connects to any server.
    auto r = run_limited({"run", "--topology", "emulated", "--steps", "1", "--quiet", "--set", "remote.enabled=true",
                          "--set", "remote.seeds=127.0.0.1:1", "--set", "remote.password_file=" + c.file},
                         {}, std::chrono::seconds(30));
    ASSERT_NE(r.status, -2) << "cxltier run blocked on " << c.file;
    if (r.err.find("built without the remote tier") != std::string::npos) GTEST_SKIP() << r.err;
    EXPECT_EQ(r.status, 2) << c.file << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.file << ": " << r.err;
    EXPECT_NE(r.err.find("remote.password_file"), std::string::npos) << r.err;
    auto b = run_limited({"bench-remote", "--seeds", "127.0.0.1:1", "--password-file", c.file}, {},
                         std::chrono::seconds(30));
    ASSERT_NE(b.status, -2) << "cxltier bench-remote blocked on " << c.file;
    EXPECT_EQ(b.status, 2) << c.file << ": " << b.err;
    EXPECT_NE(b.err.find(c.needle), std::string::npos) << c.file << ": " << b.err;
  }
}

TEST(PlotCli, BenchPlotNameIsNeverGnuplotCode) {
  if (access("/usr/bin/gnuplot", X_OK) != 0) GTEST_SKIP() << "gnuplot is not installed";
  TempDir d;
  // The injected command would run in gnuplot's working directory, this test's.
  const std::string pwned = "PWNED-bench-" + std::to_string(getpid());
  const std::string plot = d / ("x'; system('touch " + pwned + "'); print '.png");
  auto r = run_limited({"bench", "--topology", "emulated", "--block-bytes", "64KiB", "--blocks", "4", "--quiet",
                        "--plot", plot});
  EXPECT_FALSE(fs::exists(pwned)) << "the --plot name ran as gnuplot code";
  fs::remove(pwned);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(plot)) << "the plot goes to the file named, quotes and all";
}

TEST(PlotCli, SweepPlotNameAndTraceNameAreNeverCodeOrMarkup) {
  if (access("/usr/bin/gnuplot", X_OK) != 0) GTEST_SKIP() << "gnuplot is not installed";
  TempDir d;
  const std::string pwned = "PWNED-sweep-" + std::to_string(getpid());
  const std::string plot = d / ("x`touch " + pwned + "`.svg");
  const std::string trace = std::string(std::getenv("CXLT_TEST_DATA")) + "/traces/dynamo__mooncake_trace_1000.jsonl";
  auto r = run_limited({"sweep", "--trace", trace, "--alpha", "0.5", "--beta", "0", "--capacity-blocks", "64",
                        "--plot", plot, "--quiet"});
  EXPECT_FALSE(fs::exists(pwned)) << "a backquote in the --plot name ran a shell command";
  fs::remove(pwned);
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream f(plot);
  const std::string svg((std::istreambuf_iterator<char>(f)), {});
  // The title shows the trace's name as it is: no underscore read as a subscript.
  EXPECT_NE(svg.find("dynamo__mooncake_trace_1000.jsonl"), std::string::npos) << "title lost its underscores";
}

TEST(GenTraceCli, SizesItCannotHoldExitTwoNamingTheFlag) {
  TempDir d;
  const std::string out = d / "t.jsonl";
  struct Case {
    std::vector<std::string> args;
    const char *needle;
  } cases[] = {
      {{"--prefix-blocks", "4294967295"}, "--prefix-blocks"},
      {{"--prompt-tokens-max", "4294967295"}, "--prompt-tokens-max"},
      {{"--max-active", "4294967295", "--arrival-rate", "1e6"}, "--max-active"},
      {{"--prefix-groups", "4294967295"}, "--prefix-groups"},
      {{"--prefix-groups", "1048576", "--prefix-blocks", "1048576"}, "--prefix-groups x --prefix-blocks"},
      {{"--max-active", "1048576", "--prompt-tokens-max", "16777216", "--block-size", "1"}, "--max-active x"},
  };
  for (const Case &c : cases) {
    std::vector<std::string> args{"gen-trace", "--out", out, "--steps", "4"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = run_limited(args, {}, std::chrono::seconds(60));
    EXPECT_EQ(r.status, 2) << c.args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
  }
}

TEST(MainCli, UnknownSubcommandIsNamed) {
  auto r = run_limited({"frobnicate"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown subcommand 'frobnicate'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run"), std::string::npos) << "the subcommands are listed: " << r.err;
}

TEST(RunCli, StopSignalsWriteTheFinalCheckpoint) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    TempDir d;
    const std::string store = d / "s.store";
    cxlt_test::Started s = cxlt_test::start_program(
        cxlt_test::tool_path(), {"run", "--topology", "emulated", "--steps", "100000000", "--store", store});
    ASSERT_GT(s.pid, 0);
    // The header line comes after the runtime opened and the handlers are in place.
    std::string head;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (head.find("cxltier run:") == std::string::npos && std::chrono::steady_clock::now() < end) {
      pollfd p{s.err_fd, POLLIN, 0};
      if (poll(&p, 1, 1000) <= 0) continue;
      char buf[4096];
      ssize_t n = read(s.err_fd, buf, sizeof buf);
      if (n <= 0) break;
      head.append(buf, static_cast<size_t>(n));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // some steps into the run
    kill(s.pid, sig);
    ToolResult r = cxlt_test::finish_program(s);
    r.err = head + r.err;
    EXPECT_EQ(r.status, 128 + sig) << "the run ends by the signal it got: " << r.err;
    EXPECT_NE(r.err.find("is checkpointed"), std::string::npos) << r.err;
    struct stat st {};
    ASSERT_EQ(stat(store.c_str(), &st), 0) << "signal " << sig << ": no checkpoint was written";
    EXPECT_GT(st.st_size, 64) << "the checkpoint holds the run's states";
  }
}

TEST(MainCli, StdoutWriteErrorsExitTwoWithAMessage) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"params"}, {"explain"}, {"topo", "--topology", "emulated"},
           {"run", "--topology", "emulated", "--steps", "2", "--quiet"}}) {
    std::string cmd = "exec \"$0\"";
    for (const std::string &a : args) cmd += " '" + a + "'";
    cmd += " > /dev/full";
    auto r = cxlt_test::run_program("/bin/sh", {"-c", cmd, cxlt_test::tool_path()});
    EXPECT_EQ(r.status, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("writing to stdout failed"), std::string::npos) << args[0] << ": " << r.err;
  }
}

TEST(MainCli, EmptyOrZeroValuesAreNotTheDefault) {
  struct Case {
    std::vector<std::string> args;
    const char *needle;
  } cases[] = {
      {{"run", "--topology", "", "--steps", "1"}, "--topology"},
      {{"run", "--store", "", "--steps", "1"}, "--store"},
      {{"topo", "--topology", ""}, "--topology"},
      {{"bench", "--topology", ""}, "--topology"},
      {{"bench", "--topology", "emulated", "--block-bytes", "0", "--blocks", "4"}, "--block-bytes"},
  };
  for (const Case &c : cases) {
    auto r = run_limited(c.args);
    EXPECT_EQ(r.status, 2) << c.args[0] << " " << c.args[1] << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
  }
}

TEST(MainCli, ExitStatusesAreListedInHelp) {
  auto r = run_limited({"--help"});
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char *part : {"Exit status: 0 success", "1 the job ran and found a problem", "2 bad input or usage",
                           "3 an internal error", "ends by that signal"})
    EXPECT_NE(r.out.find(part), std::string::npos) << "--help lacks '" << part << "': " << r.out;
}

// A node this machine lacks, named by the configuration, is bad input (2), not a failed job.
TEST(RunCli, AbsentNumaNodeExitsTwoNamingIt) {
  auto r = run_limited({"run", "--topology", "emulated", "--steps", "1", "--quiet", "--set", "tiers.0.kind=dram",
                        "--set", "tiers.0.backend=numa", "--set", "tiers.0.numa_nodes=1023"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("1023"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

// Tiers of 4 + 4 blocks under an engine that pins up to 32 blocks at once: some admissions find
// every block pinned. The run counts them and goes on to the end (it used to stop with exit 1).
TEST(RunCli, AdmissionsRefusedWhileEveryBlockIsPinnedAreCountedNotFatal) {
  TempDir d;
  const std::string path = d / "pinned.toml";
  cxlt_test::write_file(path, "topology = \"emulated\"\n[geometry]\n" + std::string(kTinyGeometry) +
                       "tokens_per_block = 64\n[runtime]\nhuge_pages = \"none\"\nextent_blocks = 1\n"
                       "[[tiers]]\nkind = \"hbm\"\nbudget = 256\n[[tiers]]\nkind = \"dram\"\nbudget = 256\n");
  auto r = run_limited({"run", "--config", path, "--steps", "20", "--quiet", "--sequences", "64", "--active", "16",
                        "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  const size_t at = r.out.find("\"admissions_refused\": ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_GT(std::stoull(r.out.substr(at + 22)), 0u) << "the set-up must make admissions fail: " << r.out.substr(at, 40);
  EXPECT_NE(r.out.find("\"integrity_errors\": 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"steps\": 20"), std::string::npos) << "the run goes to its end";
}

namespace {

// The prefill-burst workload (the batch and prefix calls): requests that share system prompts
// find them cached, and every block checks out.
TEST(RunCli, PrefillBurstWorkloadRuns) {
  // Blocks of 8 layers (0.5 MiB): the same workload at a tenth of the bytes copied, so that it
  // stays well within run_limited's 60 s under ThreadSanitizer (about 11 s; 5 MiB blocks took
  // longer than 60 s there).
  auto r = run_limited({"run", "--topology", "emulated", "--workload", "prefill-burst", "--steps", "20", "--quiet",
                        "--seed", "3", "--set", "runtime.huge_pages=none", "--set", "geometry.layers=8"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("integrity errors: 0"), std::string::npos) << r.out;
  const size_t at = r.out.find("saved by prefix hits ");
  ASSERT_NE(at, std::string::npos) << r.out;
  unsigned long long saved = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "saved by prefix hits %llu", &saved), 1);
  EXPECT_GT(saved, 0u) << r.out;
  EXPECT_NE(r.out.find("inversions"), std::string::npos) << r.out;
  auto bad = run_limited({"run", "--topology", "emulated", "--workload", "prefill", "--steps", "1", "--quiet"});
  EXPECT_EQ(bad.status, 2) << bad.out;
}

// The check at the end of a run reads every resident block while the background mover goes on
// (wait_idle returns when no copy is in flight, but the mover then acts on the promotions the
// last step's accesses queued, and on headroom under the watermarks): a block it moves frees
// its old slot, and the next copy may land there while the check reads it. With watermarks of
// 0.3 / 0.1, promotion always and 4 migration threads, a check that read blocks unpinned
// reported a false integrity error "at the end" in about 1 run in 5 of these (4 of 20 runs);
// 25 runs make a miss unlikely. Blocks read pinned never move, so every run must check out.
// Tiers too small to keep a request's blocks until it ends: some are evicted between steps, and
// the request's end releases those still cached (it used to end the run: release_batch refused
// the whole batch for one block no longer resident).
TEST(RunCli, PrefillBurstReleasesOnlyTheBlocksStillCached) {
  auto r = run_limited({"run", "--topology", "emulated", "--workload", "prefill-burst", "--steps", "20", "--quiet",
                        "--seed", "3", "--set", "runtime.huge_pages=none", "--set", "geometry.layers=8", "--set",
                        "tiers.0.kind=hbm", "--set", "tiers.0.budget=8MiB", "--set", "tiers.1.kind=dram", "--set",
                        "tiers.1.budget=16MiB", "--set", "tiers.2.kind=cxl", "--set", "tiers.2.budget=32MiB"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("integrity errors: 0"), std::string::npos) << r.out;
}

TEST(RunCli, EndOfRunCheckIsNotRacedByTheBackgroundMover) {
  // CXLT_TEST_END_CHECK_RUNS: 25 in the plain build; the sanitizer stages run a few.
  const char *runs_env = std::getenv("CXLT_TEST_END_CHECK_RUNS");
  const int runs = runs_env != nullptr && std::atoi(runs_env) > 0 ? std::atoi(runs_env) : 25;
  int checked = 0;  // runs whose end-of-run check read at least one block
  for (int run = 0; run < runs; ++run) {
    SCOPED_TRACE("seed " + std::to_string(100 + run));
    auto r = run_limited({"run", "--json", "--quiet", "--steps", "30", "--seed", std::to_string(100 + run), "--topology",
                          "emulated", "--set", "runtime.huge_pages=none", "--set", "geometry.layers=16", "--set",
                          "tiers.0.kind=hbm", "--set", "tiers.0.budget=16MiB", "--set", "tiers.1.kind=dram", "--set",
                          "tiers.1.budget=32MiB", "--set", "tiers.2.kind=cxl", "--set", "tiers.2.budget=32MiB", "--set",
                          "runtime.promotion=always", "--set", "runtime.migration_threads=4", "--set",
                          "runtime.high_watermark=0.3", "--set", "runtime.low_watermark=0.1"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("\"integrity_errors\": 0"), std::string::npos) << r.err;
    const size_t at = r.out.find("\"content_checks\": ");
    ASSERT_NE(at, std::string::npos) << r.out;
    if (std::stoull(r.out.substr(at + 18)) > 0) ++checked;
  }
  // A few seeds start no sequence within 30 steps (no block to check): most do.
  EXPECT_GE(checked, runs * 4 / 5) << "most runs must have checked blocks at the end";
}

// The default run's placement (docs/runtime.md, "Placement quality"), at a tenth of its bytes:
// 0.5 MiB blocks (geometry.layers = 8) in tiers that hold as many blocks as the default tiers
// hold of the default 5 MiB blocks (51, 102, 204), 200 steps, on seeds 1 (the default) to 10.
// At the end no pair of blocks is out of order (exact: the mover's last pass orders them), and
// the hits per resident block fall with tier rank (the hot blocks were served from the fast
// tiers). The hits count where a block was when accessed; a free-running mover reorders the
// tiers at its own pace, so how far tier 0 leads tier 1 then depends on how fast the run is
// against the mover (tier 0 trailed tier 1 by 3.9 % on seed 8 of a loaded CI run). With
// --settle every step waits for the mover to go idle, so each step starts from the policy's
// order: tier 0 led tier 1 by 1.18x to 2.36x over the ten seeds, and the test asks for a
// strict lead on both pairs.
// CXLT_TEST_PLACEMENT_SEEDS: 10 in the plain build; the sanitizer stages run the first few
// (a run takes about 15x as long under ThreadSanitizer).
TEST(RunCli, PlacementFollowsThePolicyOrderOnEverySeed) {
  const char *seeds_env = std::getenv("CXLT_TEST_PLACEMENT_SEEDS");
  const int seeds = seeds_env != nullptr && std::atoi(seeds_env) > 0 ? std::atoi(seeds_env) : 10;
  for (int seed = 1; seed <= seeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto r = run_limited({"run", "--json", "--quiet", "--seed", std::to_string(seed), "--topology", "emulated", "--set",
                          "runtime.huge_pages=none", "--set", "geometry.layers=8", "--set", "tiers.0.kind=hbm", "--set",
                          "tiers.0.budget=26112KiB", "--set", "tiers.1.kind=dram", "--set", "tiers.1.budget=52224KiB", "--set",
                          "tiers.2.kind=cxl", "--set", "tiers.2.budget=104448KiB", "--settle"});
    ASSERT_EQ(r.status, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["run"]["integrity_errors"].get<uint64_t>(), 0u);
    EXPECT_EQ(j["placement"]["inversions"].get<uint64_t>(), 0u) << "largest gap " << j["placement"]["max_gap"];
    const std::vector<double> hits = j["run"]["hits_per_resident_block"].get<std::vector<double>>();
    ASSERT_EQ(hits.size(), 3u);
    EXPECT_GT(hits[0], hits[1]) << j["run"].dump();
    EXPECT_GT(hits[1], hits[2]) << j["run"].dump();
  }
}

}  // namespace
