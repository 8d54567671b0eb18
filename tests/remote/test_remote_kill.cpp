// SPDX-License-Identifier: Apache-2.0
// A Redis master SIGKILLed while a separate `cxltier run` process writes blocks to it, many
// times over, on a real cluster of 3 masters + 3 replicas (tests/remote/cluster.sh). The
// process must exit 0 (a dead peer is a remote failure to count, never a SIGPIPE or any other
// signal for the host process) and its integrity check must find no damaged block. After each
// run the killed server is started again: it rejoins as a replica of the master that took
// over, so the next run has three masters with replicas again.
#include "../common/cli.hpp"
#include "cluster_env.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace std::chrono_literals;

namespace {

using cxlt_test::env;
using cxlt_test::which;

std::string redis_cli(uint16_t port, const std::vector<std::string> &args) {
  std::vector<std::string> a = {"-p", std::to_string(port)};
  a.insert(a.end(), args.begin(), args.end());
  return cxlt_test::run_program(which("redis-cli"), a).out;
}

std::vector<uint16_t> ports() { return cxlt_test::cluster_ports(); }
pid_t pid_of(uint16_t port) { return cxlt_test::server_pid(port); }

// A master that serves slots and has a replica whose first sync is done: killing it makes
// its replica take over. 0 when there is none (yet).
uint16_t master_with_synced_replica() {
  for (uint16_t p : ports()) {
    const std::string info = redis_cli(p, {"info", "replication"});
    if (info.find("role:slave") == std::string::npos || info.find("master_link_status:up") == std::string::npos) continue;
    size_t at = info.find("master_port:");
    if (at == std::string::npos) continue;
    const auto master = static_cast<uint16_t>(std::stoul(info.substr(at + 12)));
    if (redis_cli(master, {"info", "replication"}).find("role:master") != std::string::npos) return master;
  }
  return 0;
}

// Every node answers and sees the cluster as ok, and all three masters have a synced replica.
bool cluster_healthy() {
  for (uint16_t p : ports())
    if (redis_cli(p, {"cluster", "info"}).find("cluster_state:ok") == std::string::npos) return false;
  int synced = 0;
  for (uint16_t p : ports()) {
    const std::string info = redis_cli(p, {"info", "replication"});
    if (info.find("role:slave") != std::string::npos && info.find("master_link_status:up") != std::string::npos) ++synced;
  }
  return synced == 3;
}

TEST(RemoteKill, MasterKilledDuringCxltierRunNeverKillsTheProcess) {
  if (env("CXLT_TEST_REDIS_SEEDS").empty() || env("CXLT_TEST_REDIS_RESTART").empty())
    GTEST_SKIP() << "no cluster: run through tests/remote/cluster.sh (meson test --suite remote)";
  const int runs = env("CXLT_TEST_KILL_RUNS").empty() ? 20 : std::atoi(env("CXLT_TEST_KILL_RUNS").c_str());
  int killed_mid_run = 0;
  uint64_t failures_total = 0, writeouts_total = 0;
  double longest_run_s = 0;
  for (int run = 0; run < runs; ++run) {
    SCOPED_TRACE("run " + std::to_string(run + 1) + " of " + std::to_string(runs));
    const auto ready_by = std::chrono::steady_clock::now() + 60s;
    while (!cluster_healthy() && std::chrono::steady_clock::now() < ready_by) std::this_thread::sleep_for(200ms);
    ASSERT_TRUE(cluster_healthy()) << "the cluster did not recover (3 masters, each with a synced replica) within 60 s";
    const uint16_t victim = master_with_synced_replica();
    ASSERT_NE(victim, 0) << "no master has a synced replica";

    // 1 MiB blocks (geometry.layers=16 of the default 80) and small tiers (16 + 32 + 32
    // blocks): blocks leave the last local tier for the remote one from the first steps on, so
    // the kill lands among writes, with room left for admissions while write-outs to the dead
    // master wait for their deadline (with 8 + 16 + 16, an instrumented build's slow write-outs
    // could leave every local block in flight, and the run refused an admission).
    std::vector<std::string> args = {"run", "--json", "--quiet", "--steps", "30", "--seed", std::to_string(100 + run),
                                     "--topology", "emulated", "--set", "remote.enabled=true",
                                     "--set", "remote.seeds=" + env("CXLT_TEST_REDIS_SEEDS"),
                                     "--set", "remote.namespace=kill-" + std::to_string(getpid()) + "-" + std::to_string(run),
                                     "--set", "remote.deadline_ms=300", "--set", "runtime.huge_pages=none",
                                     "--set", "geometry.layers=16"};
    const char *kinds[3] = {"hbm", "dram", "cxl"};
    for (int t = 0; t < 3; ++t)
      for (const std::string &kv : {"tiers." + std::to_string(t) + ".kind=" + kinds[t],
                                    "tiers." + std::to_string(t) + ".budget=" + std::to_string(t == 0 ? 16 : 32) + "MiB"}) {
        args.push_back("--set");
        args.push_back(kv);
      }
    const auto t0 = std::chrono::steady_clock::now();
    cxlt_test::Started child = cxlt_test::start_program(cxlt_test::tool_path(), args);
    ASSERT_GT(child.pid, 0) << child.spawn_error;
    // Kill at a different moment of each run: 80 to 320 ms in. (150 to 750 ms let 6 of 20
    // runs end before their kill on a quiet host, where the check below needs 15 mid-run.)
    std::this_thread::sleep_for(std::chrono::milliseconds(80 + (run * 97) % 240));
    int st = 0;
    const bool still_running = waitpid(child.pid, &st, WNOHANG) == 0;
    if (still_running) ++killed_mid_run;
    ASSERT_EQ(::kill(pid_of(victim), SIGKILL), 0) << "port " << victim;
    cxlt_test::ToolResult r = still_running ? cxlt_test::finish_program(child) : cxlt_test::ToolResult{};
    if (!still_running) {
      // It ended before the kill; reap what it printed (finish_program's waitpid has nothing
      // left to wait for, so take the status from the WNOHANG above).
      cxlt_test::ToolResult rest = cxlt_test::finish_program(child);
      r.out = rest.out;
      r.err = rest.err;
      r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    longest_run_s = std::max(longest_run_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    EXPECT_NE(r.status, 128 + SIGPIPE) << "the process died of SIGPIPE when a master was killed\n" << r.err;
    ASSERT_EQ(r.status, 0) << "cxltier run exited " << r.status << " after master " << victim << " was killed\n" << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["run"]["integrity_errors"].get<uint64_t>(), 0u) << r.out;
    ASSERT_TRUE(j["remote"].is_object()) << r.out;
    EXPECT_EQ(j["remote"]["corrupt"].get<uint64_t>(), 0u) << r.out;
    failures_total += j["remote"]["failures"].get<uint64_t>();
    writeouts_total += j["remote"]["writeouts"].get<uint64_t>();

    // Empty the masters (replicas refuse FLUSHALL: they follow), so that the restarted
    // server's first sync is short; then bring it back, as a replica of its successor.
    for (uint16_t p : ports())
      if (p != victim) redis_cli(p, {"flushall"});
    auto restart = cxlt_test::run_program("/bin/bash", {env("CXLT_TEST_REDIS_RESTART"), std::to_string(victim)});
    ASSERT_EQ(restart.status, 0) << restart.err;
  }
  // A kill that always came after the run had ended would prove nothing.
  EXPECT_GE(killed_mid_run, runs * 3 / 4) << "most kills must land while cxltier run is still running (runs took up to "
                                          << longest_run_s << " s)";
  EXPECT_GT(writeouts_total, 0u);
  std::printf("%d runs, %d with a master killed mid-run: every exit 0, integrity errors 0; %llu blocks written out, "
              "%llu remote failures counted (the dead masters' slots until their replicas took over)\n",
              runs, killed_mid_run, static_cast<unsigned long long>(writeouts_total),
              static_cast<unsigned long long>(failures_total));
}

}  // namespace
