// SPDX-License-Identifier: Apache-2.0
// `cxltier bench-remote`: GiB/s of whole blocks to and from a Redis Cluster, our client against
// a plain hiredis round trip of the same bytes, in the same run, on the same keys and servers.
// Rows: hiredis SET/GET (one redisCommand per block, to the master that owns the key), our
// client one block per call, our client pipelining --pipeline blocks per call, and the remote
// tier's own path (header, XXH3 checksum and verification included). Median of --repeat runs.
// (A separate command because `cxltier bench` was being written at the same time; its remote
// rows can call measure_remote() below.)
#include "bench_stats.hpp"
#include "commands.hpp"

#include "lib/core/secret_file.hpp"
#include "lib/runtime/remote.hpp"
#include "tiers/remote/cluster.hpp"
#include "tiers/remote/value.hpp"

#include <cxltier/config.hpp>
#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <hiredis/hiredis.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace cxltier;
using namespace cxltier::remote;

struct BenchRemoteOptions {
  std::string seeds;
  std::string block_bytes = "5MiB";
  uint32_t blocks = 32;
  uint32_t pipeline = 4;
  unsigned repeat = 5;
  std::string user, password_file;
  bool json = false;
};

struct Row {
  std::string name;
  std::string direction;  // "set" or "get"
  std::vector<double> gibps;
  double median() const { return cxlt_bench_stats::median_of(gibps); }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct HiredisFree {
  void operator()(redisContext *c) const noexcept { redisFree(c); }
};

int bench_remote(const BenchRemoteOptions &o) {
  if (o.seeds.empty()) fail(CXLT_ERROR_INVALID_ARGUMENT, "--seeds: name at least one cluster server (HOST:PORT)");
  const uint64_t bytes = parse_size(o.block_bytes, "--block-bytes");
  if (bytes == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "--block-bytes must be > 0");
  if (o.blocks == 0 || o.pipeline == 0 || o.repeat == 0)
    fail(CXLT_ERROR_INVALID_ARGUMENT, "--blocks, --pipeline and --repeat must be >= 1");
  RuntimeConfig cfg;
  cfg.set("remote.enabled", "true");
  cfg.set("remote.seeds", o.seeds);
  cfg.set("remote.namespace", "bench-remote");
  cfg.set("remote.deadline_ms", "10000");
  if (!o.user.empty()) cfg.set("remote.user", o.user);
  if (!o.password_file.empty()) cfg.set("remote.password_file", o.password_file);
  Auth auth;
  auth.user = o.user;
  if (!o.password_file.empty()) auth.password = read_password_file(o.password_file, "--password-file");
  ClusterOptions copt;
  for (const std::string &s : cfg.remote.seeds) copt.seeds.push_back(parse_node_addr(s, "--seeds"));
  copt.auth = auth;
  Cluster cluster(copt);
  std::string err;
  if (!cluster.refresh(Clock::now() + std::chrono::seconds(5), &err))
    fail(CXLT_ERROR_IO, "bench-remote: no cluster server answered: ", err);

  // The same blocks (random bytes) and keys for every row.
  const size_t n = o.blocks;
  std::vector<std::vector<unsigned char>> src(n, std::vector<unsigned char>(bytes)), dst(n, std::vector<unsigned char>(bytes));
  std::mt19937_64 rng(1);
  for (auto &b : src)
    for (size_t j = 0; j + 8 <= bytes; j += 8) {
      uint64_t x = rng();
      std::memcpy(&b[j], &x, 8);
    }
  std::vector<Key> keys(n);
  std::vector<std::string> rkeys(n);
  const std::string ns = "bench-remote";
  const uint64_t nsh = namespace_hash(ns);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = Key{0xbe4c, i};
    rkeys[i] = block_key(ns, keys[i]);
  }
  std::vector<ValueHeader> heads(n), got(n);
  for (size_t i = 0; i < n; ++i) heads[i] = make_header(keys[i], nsh, src[i].data(), bytes);

  // hiredis: one context per master, each block sent to its slot's owner. hiredis writes with
  // write(), so a server that dies mid-benchmark would raise SIGPIPE; this is the tool's own
  // process (not an engine that links the library), so it ignores the signal and hiredis
  // reports EPIPE as an error instead.
  std::signal(SIGPIPE, SIG_IGN);
  std::map<std::string, std::unique_ptr<redisContext, HiredisFree>> hctx;
  for (size_t i = 0; i < n; ++i) {
    std::string owner = cluster.owner_of(rkeys[i]);
    if (owner.empty()) fail(CXLT_ERROR_IO, "bench-remote: no server owns the slot of ", rkeys[i]);
    if (hctx.count(owner)) continue;
    NodeAddr a = parse_node_addr(owner, "owner");
    timeval tv{10, 0};
    std::unique_ptr<redisContext, HiredisFree> c(redisConnectWithTimeout(a.host.c_str(), a.port, tv));
    if (!c || c->err) fail(CXLT_ERROR_IO, "bench-remote: hiredis cannot connect to ", owner, ": ", c ? c->errstr : "?");
    if (!auth.password.empty()) {
      auto *r = static_cast<redisReply *>(auth.user.empty() ? redisCommand(c.get(), "AUTH %s", auth.password.c_str())
                                                            : redisCommand(c.get(), "AUTH %s %s", auth.user.c_str(), auth.password.c_str()));
      if (r) freeReplyObject(r);
    }
    hctx.emplace(owner, std::move(c));
  }
  // hiredis sends the value (header + payload) as one argument from one buffer.
  std::vector<std::vector<unsigned char>> hvalue(n);
  for (size_t i = 0; i < n; ++i) {
    hvalue[i].resize(sizeof(ValueHeader) + bytes);
    std::memcpy(hvalue[i].data(), &heads[i], sizeof(ValueHeader));
    std::memcpy(hvalue[i].data() + sizeof(ValueHeader), src[i].data(), bytes);
  }

  auto tier = open_remote_tier(cfg);
  std::vector<Row> rows = {{"hiredis, one block per round trip", "set", {}},
                           {"ours, one block per call", "set", {}},
                           {"ours, pipelined " + std::to_string(o.pipeline) + " per call", "set", {}},
                           {"remote tier store (header + XXH3)", "set", {}},
                           {"hiredis, one block per round trip", "get", {}},
                           {"ours, one block per call", "get", {}},
                           {"ours, pipelined " + std::to_string(o.pipeline) + " per call", "get", {}},
                           {"remote tier fetch (+ verification)", "get", {}}};
  const double total_gib = static_cast<double>(n) * static_cast<double>(bytes) / double(1ull << 30);
  auto ours = [&](Op::Kind kind, size_t per_call) {
    std::vector<Op> ops(n);
    for (size_t i = 0; i < n; ++i) {
      ops[i].kind = kind;
      ops[i].key = rkeys[i];
      ops[i].head = kind == Op::set ? static_cast<void *>(&heads[i]) : static_cast<void *>(&got[i]);
      ops[i].head_bytes = sizeof(ValueHeader);
      ops[i].body = kind == Op::set ? static_cast<void *>(src[i].data()) : static_cast<void *>(dst[i].data());
      ops[i].body_bytes = bytes;
    }
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; i += per_call)
      cluster.execute(ops.data() + i, std::min(per_call, n - i), Clock::now() + std::chrono::seconds(30));
    double s = seconds_since(t0);
    for (const Op &op : ops)
      if (op.status != OpStatus::ok) fail(CXLT_ERROR_IO, "bench-remote: ", op.key, ": ", op_status_name(op.status), " ", op.error);
    return total_gib / s;
  };
  for (unsigned rep = 0; rep < o.repeat + 1; ++rep) {  // run 0 warms up (connections, server memory)
    std::vector<double> r(rows.size());
    {
      auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < n; ++i) {
        redisContext *c = hctx[cluster.owner_of(rkeys[i])].get();
        auto *rep1 = static_cast<redisReply *>(
            redisCommand(c, "SET %b %b", rkeys[i].data(), rkeys[i].size(), hvalue[i].data(), hvalue[i].size()));
        if (rep1 == nullptr || rep1->type == REDIS_REPLY_ERROR)
          fail(CXLT_ERROR_IO, "bench-remote: hiredis SET failed: ", rep1 ? rep1->str : c->errstr);
        freeReplyObject(rep1);
      }
      r[0] = total_gib / seconds_since(t0);
    }
    r[1] = ours(Op::set, 1);
    r[2] = ours(Op::set, o.pipeline);
    {
      auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < n; ++i)
        if (!tier->store(keys[i], src[i].data(), bytes)) fail(CXLT_ERROR_IO, "bench-remote: the remote tier's store failed");
      r[3] = total_gib / seconds_since(t0);
    }
    {
      auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < n; ++i) {
        redisContext *c = hctx[cluster.owner_of(rkeys[i])].get();
        auto *rep1 = static_cast<redisReply *>(redisCommand(c, "GET %b", rkeys[i].data(), rkeys[i].size()));
        if (rep1 == nullptr || rep1->type != REDIS_REPLY_STRING || rep1->len != sizeof(ValueHeader) + bytes)
          fail(CXLT_ERROR_IO, "bench-remote: hiredis GET failed");
        freeReplyObject(rep1);  // (not even copied into a tier: the baseline's best case)
      }
      r[4] = total_gib / seconds_since(t0);
    }
    r[5] = ours(Op::get, 1);
    r[6] = ours(Op::get, o.pipeline);
    {
      auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < n; ++i)
        if (!tier->fetch(keys[i], dst[i].data(), bytes)) fail(CXLT_ERROR_IO, "bench-remote: the remote tier's fetch missed");
      r[7] = total_gib / seconds_since(t0);
    }
    for (size_t i = 0; i < n; ++i)
      if (std::memcmp(dst[i].data(), src[i].data(), bytes) != 0) fail(CXLT_ERROR_CORRUPT, "bench-remote: block ", i, " came back different");
    if (rep == 0) continue;
    for (size_t k = 0; k < rows.size(); ++k) rows[k].gibps.push_back(r[k]);
  }
  tier->stop();

  const double set_ratio = rows[2].median() / rows[0].median(), get_ratio = rows[6].median() / rows[4].median();
  if (o.json) {
    nlohmann::ordered_json j;
    j["engine"] = tier->describe();
    j["block_bytes"] = bytes;
    j["blocks"] = n;
    j["repeat"] = o.repeat;
    j["rows"] = nlohmann::ordered_json::array();
    for (const Row &r : rows) {
      auto [mn, mx] = std::minmax_element(r.gibps.begin(), r.gibps.end());
      j["rows"].push_back({{"client", r.name}, {"op", r.direction}, {"gibps_median", r.median()}, {"gibps_min", *mn}, {"gibps_max", *mx}});
    }
    j["ratio_set_pipelined_vs_hiredis"] = set_ratio;
    j["ratio_get_pipelined_vs_hiredis"] = get_ratio;
    std::printf("%s\n", j.dump(2).c_str());
    return cli::kExitOk;
  }
  std::printf("%s\n%u blocks of %s, median of %u runs (GiB/s of block bytes, higher is better)\n\n",
              tier->describe().c_str(), o.blocks, format_bytes(bytes).c_str(), o.repeat);
  std::printf("%-4s %-40s %10s %10s %10s\n", "op", "client", "median", "min", "max");
  for (const Row &r : rows) {
    auto [mn, mx] = std::minmax_element(r.gibps.begin(), r.gibps.end());
    std::printf("%-4s %-40s %10.2f %10.2f %10.2f\n", r.direction.c_str(), r.name.c_str(), r.median(), *mn, *mx);
  }
  std::printf("\nratio (ours pipelined / hiredis, same run): SET %.2fx, GET %.2fx\n", set_ratio, get_ratio);
  return cli::kExitOk;
}

}  // namespace

static cxltier::cli::Registrar reg(65, [](CLI::App &app) {
  auto o = std::make_shared<BenchRemoteOptions>();
  CLI::App *sub = app.add_subcommand("bench-remote", "GiB/s of blocks to and from a Redis Cluster: the remote tier's client "
                                                     "against a plain hiredis round trip, same run (docs/remote.md)");
  sub->add_option("--seeds", o->seeds, "HOST:PORT of cluster servers, comma-separated")->required();
  sub->add_option("--block-bytes", o->block_bytes, "bytes per block")->capture_default_str();
  sub->add_option("--blocks", o->blocks, "blocks per run")->capture_default_str();
  sub->add_option("--pipeline", o->pipeline, "blocks per pipelined call")->capture_default_str();
  sub->add_option("--repeat", o->repeat, "runs after one warm-up (the median is shown)")->capture_default_str();
  sub->add_option("--user", o->user, "AUTH user");
  sub->add_option("--password-file", o->password_file, "file whose first line is the AUTH password");
  sub->add_flag("--json", o->json, "Print JSON");
  return [o]() { return bench_remote(*o); };
});
