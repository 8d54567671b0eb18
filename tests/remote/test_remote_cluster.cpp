// SPDX-License-Identifier: Apache-2.0
// The remote tier on a real Redis Cluster (3 masters + 3 replicas on loopback, started by
// tests/remote/cluster.sh): slots as the servers compute them, pipelined 5 MiB values, blocks
// written by one process and fetched by another, -ASK and -MOVED (by hand and during a live
// `redis-cli --cluster reshard`), corrupt values, a full server under noeviction, and, last
// because it breaks the cluster, masters killed under load with and without a replica.
#include "tiers/remote/cluster.hpp"
#include "tiers/remote/slot.hpp"
#include "tiers/remote/value.hpp"
#include "lib/runtime/remote.hpp"
#include "cluster_env.hpp"
#include "runtime_test_util.hpp"

#include "../common/cli.hpp"
#include "../common/temp_dir.hpp"
#include "../common/thrown.hpp"

#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace cxltier;
using namespace cxltier::remote;
using namespace std::chrono_literals;

namespace {

using cxlt_test::env;
using cxlt_test::which;

#define NEED_CLUSTER()                                                                               \
  do {                                                                                               \
    if (env("CXLT_TEST_REDIS_SEEDS").empty())                                                        \
      GTEST_SKIP() << "no cluster: run through tests/remote/cluster.sh (meson test --suite remote)"; \
  } while (0)

std::vector<uint16_t> ports() { return cxlt_test::cluster_ports(); }

Deadline soon(std::chrono::milliseconds d = 5000ms) { return Clock::now() + d; }

// One command to one server (no redirection), through our own connection.
Reply command(uint16_t port, const std::vector<std::string> &args) {
  Conn c;
  std::string err;
  Reply r;
  r.type = Reply::other;
  if (!c.open("127.0.0.1", port, soon(), Auth{}, &err)) {
    r.type = Reply::error;
    r.str = err;
    return r;
  }
  if (c.send(resp_command(args), soon()) != Io::ok || c.read_reply(&r, soon()) != Io::ok) {
    r.type = Reply::error;
    r.str = "no reply";
  }
  return r;
}

struct NodeInfo {
  std::string id;
  uint16_t port = 0;
  bool master = false;
  bool failed = false;
  std::string master_id;
  bool serves_slots = false;
};

// CLUSTER NODES as one server sees it.
std::vector<NodeInfo> cluster_nodes(uint16_t via) {
  std::vector<NodeInfo> out;
  Reply r = command(via, {"CLUSTER", "NODES"});
  std::istringstream in(r.str);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    NodeInfo n;
    std::string addr, flags, master, ping, pong, epoch, link;
    f >> n.id >> addr >> flags >> master >> ping >> pong >> epoch >> link;
    size_t colon = addr.find(':'), at = addr.find('@');
    if (colon == std::string::npos) continue;
    n.port = static_cast<uint16_t>(std::stoul(addr.substr(colon + 1, at - colon - 1)));
    n.master = flags.find("master") != std::string::npos;
    n.failed = flags.find("fail") != std::string::npos && flags.find("fail?") == std::string::npos;
    n.master_id = master == "-" ? "" : master;
    std::string rest;
    n.serves_slots = static_cast<bool>(f >> rest);
    out.push_back(n);
  }
  return out;
}

std::vector<NodeInfo> masters_seen_by(uint16_t via) {
  std::vector<NodeInfo> m;
  for (const NodeInfo &n : cluster_nodes(via))
    if (n.master && n.serves_slots && !n.failed) m.push_back(n);
  return m;
}

pid_t pid_of(uint16_t port) { return cxlt_test::server_pid(port); }

cxlt_test::ToolResult redis_cli(const std::vector<std::string> &args) { return cxlt_test::run_program(which("redis-cli"), args); }
cxlt_test::ToolResult shell(const std::string &script) { return cxlt_test::run_program("/bin/sh", {"-c", script}); }

void flush_all() {
  for (uint16_t p : ports()) command(p, {"FLUSHALL"});  // replicas refuse (read-only): fine
}

// A namespace of its own for each test, so that tests never see each other's blocks.
std::string unique_ns(const char *tag) {
  static std::atomic<int> n{0};
  return std::string("test-") + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

RuntimeConfig remote_config(const std::string &ns, uint32_t a, uint32_t b, uint32_t c, bool synchronous) {
  RuntimeConfig cfg = cxlt_test::three_tier_config(a, b, c);
  cfg.synchronous = synchronous;
  cfg.set("remote.enabled", "true");
  cfg.set("remote.seeds", env("CXLT_TEST_REDIS_SEEDS"));
  cfg.set("remote.namespace", ns);
  cfg.set("remote.deadline_ms", "200");
  return cfg;
}

uint64_t json_remote(const Runtime &rt, const char *field) {
  nlohmann::json j = nlohmann::json::parse(rt.stats_json());
  return j["remote"][field].get<uint64_t>();
}

class RemoteCluster : public ::testing::Test {
protected:
  void SetUp() override {
    NEED_CLUSTER();
    flush_all();
  }
};

// --- The client against the servers ----------------------------------------------------------

TEST_F(RemoteCluster, SlotTableAndKeySlotsMatchTheServers) {
  ClusterOptions o;
  o.seeds.push_back(parse_node_addr(env("CXLT_TEST_REDIS_SEEDS").substr(0, env("CXLT_TEST_REDIS_SEEDS").find(',')), "seed"));
  Cluster c(o);
  std::string err;
  ASSERT_TRUE(c.refresh(soon(), &err)) << err;
  EXPECT_EQ(c.masters(), 3u);
  EXPECT_EQ(c.slots_covered(), 16384u);
  std::mt19937_64 rng(5);
  std::vector<std::string> keys = {"foo", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", ""};
  for (int i = 0; i < 200; ++i) keys.push_back(block_key("m/80x8x128x2x16kv/bf16/tp0", Key{rng(), rng()}));
  const uint16_t p = ports()[0];
  for (const std::string &k : keys) {
    Reply r = command(p, {"CLUSTER", "KEYSLOT", k});
    ASSERT_EQ(r.type, Reply::integer) << r.str;
    EXPECT_EQ(r.integer_value, key_slot(k)) << "'" << k << "'";
  }
}

TEST_F(RemoteCluster, PipelinedFiveMiBValuesRoundTrip) {
  ClusterOptions o;
  o.seeds.push_back(parse_node_addr("127.0.0.1:" + std::to_string(ports()[0]), "seed"));
  Cluster c(o);
  constexpr size_t kN = 24, kBytes = 5u << 20;
  std::vector<std::vector<unsigned char>> src(kN, std::vector<unsigned char>(kBytes)), dst(kN, std::vector<unsigned char>(kBytes));
  std::vector<ValueHeader> heads(kN), got(kN);
  std::vector<Op> ops(kN);
  std::mt19937_64 rng(9);
  for (size_t i = 0; i < kN; ++i) {
    for (size_t j = 0; j < kBytes; j += 8) {
      uint64_t x = rng();
      std::memcpy(&src[i][j], &x, 8);
    }
    Key k{i, 77};
    heads[i] = make_header(k, 1, src[i].data(), kBytes);
    ops[i].kind = Op::set;
    ops[i].key = block_key("pipelined", k);
    ops[i].head = &heads[i];
    ops[i].head_bytes = sizeof(ValueHeader);
    ops[i].body = src[i].data();
    ops[i].body_bytes = kBytes;
  }
  c.execute(ops.data(), kN, soon(10s));
  for (size_t i = 0; i < kN; ++i) ASSERT_EQ(ops[i].status, OpStatus::ok) << i << ": " << ops[i].error;
  for (size_t i = 0; i < kN; ++i) {
    ops[i].kind = Op::get;
    ops[i].head = &got[i];
    ops[i].body = dst[i].data();
  }
  c.execute(ops.data(), kN, soon(10s));
  for (size_t i = 0; i < kN; ++i) {
    ASSERT_EQ(ops[i].status, OpStatus::ok) << i << ": " << ops[i].error;
    EXPECT_EQ(check_header(got[i], Key{i, 77}, 1, kBytes), "");
    EXPECT_TRUE(check_payload(got[i], dst[i].data(), kBytes));
    EXPECT_EQ(std::memcmp(src[i].data(), dst[i].data(), kBytes), 0) << i;
  }
  Op absent;
  absent.kind = Op::get;
  absent.key = block_key("pipelined", Key{999, 999});
  absent.head = &got[0];
  absent.head_bytes = sizeof(ValueHeader);
  absent.body = dst[0].data();
  absent.body_bytes = kBytes;
  c.execute(&absent, 1, soon());
  EXPECT_EQ(absent.status, OpStatus::absent);
}

// --- The fleet: one process writes out, another fetches ---------------------------------------

// Five blocks fit locally; every block admitted beyond that drops one, which is written out.
constexpr int kFleetBlocks = 30;

RuntimeConfig fleet_config(const std::string &ns) {
  RuntimeConfig cfg;  // the canonical 5 MiB blocks
  cfg.topology = "emulated";
  cfg.synchronous = true;
  cfg.huge_pages = HugePages::none;
  cfg.store_capacity = 1024;
  for (const char *kind : {"dram", "cxl"}) {
    TierConfig t;
    t.name = kind;
    t.kind = *parse_tier_kind(kind);
    t.budget_bytes = (kind[0] == 'd' ? 2 : 3) * cfg.geometry.bytes();
    t.backend = "emulated";
    cfg.tiers.push_back(t);
  }
  cfg.extent_blocks = 1;
  cfg.set("remote.enabled", "true");
  cfg.set("remote.seeds", env("CXLT_TEST_REDIS_SEEDS"));
  cfg.set("remote.namespace", ns);
  cfg.set("remote.deadline_ms", "1000");
  return cfg;
}

// Run by FleetTwoProcesses in a child process of its own.
TEST(RemoteFleet, ChildWritesBlocks) {
  if (env("CXLT_TEST_FLEET_NS").empty()) GTEST_SKIP() << "run as the child of RemoteCluster.FleetTwoProcesses";
  auto rt = Runtime::open(fleet_config(env("CXLT_TEST_FLEET_NS")));
  for (int i = 0; i < kFleetBlocks; ++i) {
    Key k = key_from_sequence(4242, static_cast<uint64_t>(i));
    bool placed = false;
    Block b = rt->admit(k, &placed, true);
    ASSERT_TRUE(placed);
    cxlt_test::fill_block(b.data, b.bytes, k, 1);
    rt->unpin(k);
  }
  cxlt_stats_t s = rt->stats();
  EXPECT_EQ(s.remote_writeouts, static_cast<uint64_t>(kFleetBlocks - 5));
  EXPECT_EQ(s.remote_failures, 0u);
  EXPECT_EQ(rt->validate(), "");
}

TEST_F(RemoteCluster, FleetTwoProcesses) {
  const std::string ns = unique_ns("fleet");
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(n, 0);
  self[n] = 0;
  auto child = cxlt_test::run_program(self, {"--gtest_filter=RemoteFleet.ChildWritesBlocks"}, {"CXLT_TEST_FLEET_NS=" + ns});
  ASSERT_EQ(child.status, 0) << child.out << child.err;
  ASSERT_NE(child.out.find("[  PASSED  ] 1 test"), std::string::npos) << child.out;

  // Another process (this one), its own runtime, the same namespace: the blocks the child
  // dropped come back from the cluster, byte for byte, and are not misses.
  auto rt = Runtime::open(fleet_config(ns));
  int hits = 0;
  for (int i = 0; i < kFleetBlocks; ++i) {
    Key k = key_from_sequence(4242, static_cast<uint64_t>(i));
    bool placed = true;
    Block b = rt->admit(k, &placed, true);
    if (!placed) {
      ++hits;
      EXPECT_TRUE(cxlt_test::check_block(b.data, b.bytes, k)) << "block " << i << " differs";
    } else {
      cxlt_test::fill_block(b.data, b.bytes, k, 2);
    }
    rt->unpin(k);
  }
  // The child wrote out blocks 0..24 (its last 5 stayed local and left with it).
  EXPECT_EQ(hits, kFleetBlocks - 5);
  cxlt_stats_t s = rt->stats();
  EXPECT_EQ(s.remote_hits, static_cast<uint64_t>(hits));
  EXPECT_EQ(s.misses, 5u);
  EXPECT_EQ(s.remote_bytes_in, static_cast<uint64_t>(hits) * fleet_config(ns).geometry.bytes());
  EXPECT_EQ(json_remote(*rt, "corrupt"), 0u);
  EXPECT_EQ(rt->validate(), "");
  // Another namespace (another model, say) sees none of them.
  auto other = Runtime::open(fleet_config(ns + "-other"));
  bool placed = false;
  other->admit(key_from_sequence(4242, 0), &placed);
  EXPECT_TRUE(placed);
  EXPECT_EQ(other->stats().remote_hits, 0u);
}

// --- Redirections --------------------------------------------------------------------------

TEST_F(RemoteCluster, AskDuringMigrationThenMoved) {
  ClusterOptions o;
  o.seeds.push_back(parse_node_addr("127.0.0.1:" + std::to_string(ports()[0]), "seed"));
  Cluster c(o);
  std::string err;
  ASSERT_TRUE(c.refresh(soon(), &err)) << err;
  // Two keys of one slot (a hash tag), the slot's owner A and another master B.
  const std::string k1 = "{asktest}one", k2 = "{asktest}two";
  const uint16_t slot = key_slot(k1);
  const std::string owner = c.owner_of(k1);
  const uint16_t pa = static_cast<uint16_t>(std::stoul(owner.substr(owner.rfind(':') + 1)));
  std::vector<NodeInfo> ms = masters_seen_by(pa);
  ASSERT_EQ(ms.size(), 3u);
  NodeInfo a, b;
  for (const NodeInfo &m : ms) (m.port == pa ? a : b) = m;
  ASSERT_FALSE(a.id.empty());

  std::vector<unsigned char> payload(64 * 1024, 0x5a), out(64 * 1024);
  ValueHeader h = make_header(Key{1, 1}, 0, payload.data(), payload.size()), got;
  auto op_of = [&](Op::Kind kind, const std::string &key) {
    Op op;
    op.kind = kind;
    op.key = key;
    op.head = kind == Op::set ? static_cast<void *>(&h) : static_cast<void *>(&got);
    op.head_bytes = sizeof h;
    op.body = kind == Op::set ? payload.data() : out.data();
    op.body_bytes = payload.size();
    return op;
  };
  Op set1 = op_of(Op::set, k1);
  c.execute(&set1, 1, soon());
  ASSERT_EQ(set1.status, OpStatus::ok) << set1.error;

  // Migrate the slot by hand, one key moved: the old owner answers -ASK for it.
  const std::string s = std::to_string(slot);
  ASSERT_EQ(command(b.port, {"CLUSTER", "SETSLOT", s, "IMPORTING", a.id}).type, Reply::status);
  ASSERT_EQ(command(a.port, {"CLUSTER", "SETSLOT", s, "MIGRATING", b.id}).type, Reply::status);
  Reply mig = command(a.port, {"MIGRATE", "127.0.0.1", std::to_string(b.port), k1, "0", "5000"});
  ASSERT_EQ(mig.type, Reply::status) << mig.str;
  const uint64_t ask0 = c.counters().ask.load();
  Op get1 = op_of(Op::get, k1);
  c.execute(&get1, 1, soon());
  ASSERT_EQ(get1.status, OpStatus::ok) << get1.error;
  EXPECT_EQ(out, payload);
  EXPECT_GT(c.counters().ask.load(), ask0);
  // A new key of a migrating slot is written where the slot is going (ASK, then ASKING SET).
  Op set2 = op_of(Op::set, k2);
  c.execute(&set2, 1, soon());
  EXPECT_EQ(set2.status, OpStatus::ok) << set2.error;
  // Finish the migration: the slot belongs to B everywhere. Our table still says A: -MOVED.
  for (const NodeInfo &m : ms) command(m.port, {"CLUSTER", "SETSLOT", s, "NODE", b.id});
  const uint64_t moved0 = c.counters().moved.load();
  std::fill(out.begin(), out.end(), 0);
  Op get2 = op_of(Op::get, k2);
  c.execute(&get2, 1, soon());
  ASSERT_EQ(get2.status, OpStatus::ok) << get2.error;
  EXPECT_EQ(out, payload);
  EXPECT_GT(c.counters().moved.load(), moved0);
  EXPECT_EQ(c.owner_of(k1), "127.0.0.1:" + std::to_string(b.port));  // the table learnt it
}

// A runtime under load while redis-cli moves a thousand slots (and their keys) between masters.
TEST_F(RemoteCluster, LiveReshardUnderLoad) {
  auto rt = Runtime::open(remote_config(unique_ns("reshard"), 4, 4, 4, false));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> ops{0}, integrity_errors{0}, hits_seen{0};
  std::thread load([&] {
    std::mt19937_64 rng(3);
    while (!stop) {
      Key k = key_from_sequence(99, rng() % 300);
      bool placed = false;
      Block b = rt->admit(k, &placed, true);
      if (placed) {
        cxlt_test::fill_block(b.data, b.bytes, k, 1);
      } else if (!cxlt_test::check_block(b.data, b.bytes, k)) {
        ++integrity_errors;
      } else {
        ++hits_seen;
      }
      rt->unpin(k);
      ++ops;
    }
  });
  while (ops < 1500) std::this_thread::sleep_for(10ms);
  std::vector<NodeInfo> ms = masters_seen_by(ports()[0]);
  ASSERT_EQ(ms.size(), 3u);
  auto r = redis_cli({"--cluster", "reshard", "127.0.0.1:" + std::to_string(ports()[0]), "--cluster-from", ms[0].id,
                      "--cluster-to", ms[1].id, "--cluster-slots", "1000", "--cluster-yes"});
  const uint64_t after = ops;
  while (ops < after + 1500) std::this_thread::sleep_for(10ms);
  stop = true;
  load.join();
  rt->wait_idle(-1);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(integrity_errors.load(), 0u);
  cxlt_stats_t s = rt->stats();
  EXPECT_GT(s.remote_hits, 0u);
  EXPECT_GT(s.remote_writeouts, 0u);
  EXPECT_GT(json_remote(*rt, "moved") + json_remote(*rt, "ask"), 0u) << rt->stats_json();
  EXPECT_EQ(json_remote(*rt, "corrupt"), 0u);
  EXPECT_EQ(rt->validate(), "");
  std::printf("reshard under load: %llu admissions, %llu remote hits, %llu failures, %llu MOVED, %llu ASK\n",
              static_cast<unsigned long long>(ops.load()), static_cast<unsigned long long>(s.remote_hits),
              static_cast<unsigned long long>(s.remote_failures),
              static_cast<unsigned long long>(json_remote(*rt, "moved")),
              static_cast<unsigned long long>(json_remote(*rt, "ask")));
}

// --- Bad values and a full server ----------------------------------------------------------

// cxlt_prefix_lookup with CXLT_LOOKUP_FETCH (Runtime::prefix_lookup, fetch): a prompt whose
// first blocks are resident here and whose next blocks only the cluster holds (written by
// another runtime's remote tier) matches through both, each fetched block verified and pinned
// with the rest; the first block the cluster lacks ends the prefix and leaves no slot behind.
// Without the flag the match stops at the local blocks.
TEST_F(RemoteCluster, PrefixLookupFetchExtendsThePrefixFromTheCluster) {
  const std::string ns = unique_ns("prefix");
  const size_t bytes = cxlt_test::small_geometry().bytes();
  constexpr size_t kLocal = 4, kRemote = 8, kAll = kLocal + kRemote + 3;
  std::vector<Key> keys;
  for (size_t i = 0; i < kAll; ++i) keys.push_back(key_from_sequence(77, i));
  {
    std::vector<unsigned char> b(bytes);
    auto tier = open_remote_tier(remote_config(ns, 2, 2, 2, true));
    for (size_t i = kLocal; i < kLocal + kRemote; ++i) {
      cxlt_test::fill_block(b.data(), bytes, keys[i], 3);
      ASSERT_TRUE(tier->store(keys[i], b.data(), bytes));
    }
  }
  auto rt = Runtime::open(remote_config(ns, 16, 16, 16, false));
  for (size_t i = 0; i < kLocal; ++i) {
    Block b = rt->admit(keys[i], nullptr, /*pin=*/true);
    cxlt_test::fill_block(b.data, bytes, keys[i], 1);
    rt->unpin(keys[i]);
  }
  std::vector<Block> out(kAll);
  EXPECT_EQ(rt->prefix_lookup(keys.data(), kAll, /*pin=*/false, /*fetch=*/false, out.data()), kLocal);

  const cxlt_stats_t before = rt->stats();
  const size_t matched = rt->prefix_lookup(keys.data(), kAll, /*pin=*/true, /*fetch=*/true, out.data());
  ASSERT_EQ(matched, kLocal + kRemote);
  for (size_t i = 0; i < matched; ++i) {
    uint64_t version = 0;
    EXPECT_TRUE(cxlt_test::check_block(out[i].data, bytes, keys[i], &version)) << "block " << i;
    EXPECT_EQ(version, i < kLocal ? 1u : 3u) << "block " << i;
    EXPECT_EQ(cxlt_test::code_of([&] { rt->release(keys[i], true); }), CXLT_ERROR_BUSY) << "block " << i << " is pinned";
  }
  EXPECT_FALSE(rt->lookup(keys[kLocal + kRemote], nullptr)) << "the block the cluster lacks got no slot";
  const cxlt_stats_t after = rt->stats();
  EXPECT_EQ(after.misses - before.misses, 1u) << "only the block the cluster lacks is a miss";
  EXPECT_EQ(json_remote(*rt, "hits"), kRemote);
  rt->unpin_batch(keys.data(), matched);
  EXPECT_EQ(rt->validate(), "");
}

TEST_F(RemoteCluster, CorruptValuesAreMisses) {
  const std::string ns = unique_ns("corrupt");
  const Key k = key_from_sequence(5, 0), k2 = key_from_sequence(5, 1);
  const size_t bytes = cxlt_test::small_geometry().bytes();
  {
    // Write k and k2 out through the remote tier's own write path.
    std::vector<unsigned char> b(bytes);
    auto tier = open_remote_tier(remote_config(ns, 2, 2, 2, true));
    for (const Key &x : {k, k2}) {
      cxlt_test::fill_block(b.data(), bytes, x, 1);
      ASSERT_TRUE(tier->store(x, b.data(), bytes));
    }
  }
  const std::string key = block_key(ns, k);
  const std::string port = std::to_string(ports()[0]);
  auto fetch_placed = [&](const Key &which_key, uint64_t *corrupt) {
    auto rt = Runtime::open(remote_config(ns, 2, 2, 2, true));
    bool placed = false;
    Block b = rt->admit(which_key, &placed);
    if (!placed) {
      EXPECT_TRUE(cxlt_test::check_block(b.data, b.bytes, which_key));
    }
    *corrupt = json_remote(*rt, "corrupt");
    EXPECT_EQ(rt->validate(), "");
    return placed;
  };
  uint64_t corrupt = 0;
  ASSERT_FALSE(fetch_placed(k, &corrupt));  // intact: a hit
  EXPECT_EQ(corrupt, 0u);

  // 1. A value written by hand with redis-cli: not ours at all.
  auto r = redis_cli({"-c", "-p", port, "SET", key, "garbage"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fetch_placed(k, &corrupt));
  EXPECT_EQ(corrupt, 1u);

  // 2. The right header and size, one payload byte flipped (written with redis-cli -x).
  std::vector<unsigned char> payload(bytes);
  cxlt_test::fill_block(payload.data(), bytes, k, 1);
  ValueHeader h = make_header(k, namespace_hash(ns), payload.data(), bytes);
  payload[bytes / 2] ^= 0x01;
  const cxlt_test::TempDir tmp("remote-corrupt");
  const std::string file = tmp / "value.bin";
  {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char *>(&h), sizeof h);
    out.write(reinterpret_cast<const char *>(payload.data()), static_cast<std::streamsize>(bytes));
  }
  r = shell(which("redis-cli") + " -c -p " + port + " -x SET " + key + " < " + file);
  ASSERT_EQ(r.status, 0) << r.err;
  Reply len = command(static_cast<uint16_t>(std::stoul(port)), {"STRLEN", key});
  if (len.type == Reply::integer) {
    EXPECT_EQ(static_cast<size_t>(len.integer_value), sizeof h + bytes);
  }
  EXPECT_TRUE(fetch_placed(k, &corrupt));
  EXPECT_EQ(corrupt, 1u);

  // 3. A whole, valid value of another block stored under k's key.
  payload[bytes / 2] ^= 0x01;
  std::vector<unsigned char> p2(bytes);
  cxlt_test::fill_block(p2.data(), bytes, k2, 1);
  ValueHeader h2 = make_header(k2, namespace_hash(ns), p2.data(), bytes);
  ClusterOptions o;
  o.seeds.push_back(parse_node_addr("127.0.0.1:" + port, "seed"));
  Cluster c(o);
  Op set;
  set.kind = Op::set;
  set.key = key;
  set.head = &h2;
  set.head_bytes = sizeof h2;
  set.body = p2.data();
  set.body_bytes = bytes;
  c.execute(&set, 1, soon());
  ASSERT_EQ(set.status, OpStatus::ok) << set.error;
  EXPECT_TRUE(fetch_placed(k, &corrupt));
  EXPECT_EQ(corrupt, 1u);
  // k2's own copy is still good.
  EXPECT_FALSE(fetch_placed(k2, &corrupt));
}

// Restores the masters' memory settings whatever the test does.
struct MemoryGuard {
  ~MemoryGuard() {
    for (uint16_t p : ports()) {
      command(p, {"CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"});
      command(p, {"CONFIG", "SET", "maxmemory", "256mb"});
    }
  }
};

TEST_F(RemoteCluster, FullServerUnderNoevictionRefusesWritesCleanly) {
  MemoryGuard guard;
  for (uint16_t p : ports()) {
    Reply info = command(p, {"INFO", "memory"});
    size_t at = info.str.find("used_memory:");
    ASSERT_NE(at, std::string::npos);
    uint64_t used = std::stoull(info.str.substr(at + 12));
    command(p, {"CONFIG", "SET", "maxmemory-policy", "noeviction"});
    command(p, {"CONFIG", "SET", "maxmemory", std::to_string(used + 200 * 1024)});
  }
  auto rt = Runtime::open(remote_config(unique_ns("full"), 2, 2, 2, false));
  for (uint64_t i = 0; i < 80; ++i) {
    Key k = key_from_sequence(31, i);
    bool placed = false;
    Block b = rt->admit(k, &placed, true);
    cxlt_test::fill_block(b.data, b.bytes, k, 1);
    rt->unpin(k);
  }
  ASSERT_TRUE(rt->wait_idle(60000)) << "write-outs did not finish";
  cxlt_stats_t s = rt->stats();
  EXPECT_GT(s.remote_failures, 0u) << rt->stats_json();   // -OOM replies
  EXPECT_LT(s.remote_writeouts, s.drops);
  EXPECT_EQ(rt->validate(), "");
  // Blocks refused by the server are plain misses later; those it took are hits.
  uint64_t hits = 0;
  for (uint64_t i = 0; i < 80; ++i) {
    Key k = key_from_sequence(31, i);
    bool placed = false;
    Block b = rt->admit(k, &placed, true);
    if (!placed) {
      ++hits;
      EXPECT_TRUE(cxlt_test::check_block(b.data, b.bytes, k));
    }
    rt->unpin(k);
  }
  EXPECT_EQ(json_remote(*rt, "corrupt"), 0u);
}

// --- Fleet through the CLI ------------------------------------------------------------------

TEST_F(RemoteCluster, TwoCxltierRunProcessesShareBlocks) {
  const std::string ns = unique_ns("cli");
  std::vector<std::string> args = {"run", "--json", "--quiet", "--steps", "30", "--seed", "11", "--topology", "emulated",
                                    "--set", "remote.enabled=true", "--set", "remote.seeds=" + env("CXLT_TEST_REDIS_SEEDS"),
                                    "--set", "remote.namespace=" + ns, "--set", "runtime.huge_pages=none",
                                    "--set", "geometry.layers=8"};  // 512 KiB blocks: a quick run
  const char *kinds[3] = {"hbm", "dram", "cxl"};
  for (int t = 0; t < 3; ++t)
    for (const std::string &kv : {"tiers." + std::to_string(t) + ".kind=" + kinds[t],
                                  "tiers." + std::to_string(t) + ".budget=" + std::to_string(t == 0 ? 8 : 16) + "MiB"}) {
      args.push_back("--set");
      args.push_back(kv);
    }
  auto first = cxlt_test::run_tool(args);
  ASSERT_EQ(first.status, 0) << first.err;
  auto second = cxlt_test::run_tool(args);
  ASSERT_EQ(second.status, 0) << second.err;
  nlohmann::json a = nlohmann::json::parse(first.out), b = nlohmann::json::parse(second.out);
  EXPECT_GT(a["remote"]["writeouts"].get<uint64_t>(), 0u) << first.out;
  // The second process's blocks, the shared prefixes among them, came from the first's.
  EXPECT_GT(b["remote"]["hits"].get<uint64_t>(), 0u) << second.out;
  EXPECT_EQ(b["run"]["integrity_errors"].get<uint64_t>(), 0u);
  EXPECT_EQ(b["remote"]["corrupt"].get<uint64_t>(), 0u);
  std::printf("cxltier run x2: first wrote %llu blocks out; second: %llu remote hits, %llu blocks computed\n",
              static_cast<unsigned long long>(a["remote"]["writeouts"].get<uint64_t>()),
              static_cast<unsigned long long>(b["remote"]["hits"].get<uint64_t>()),
              static_cast<unsigned long long>(b["run"]["blocks_computed"].get<uint64_t>()));
}

// --- Failover (last: it leaves the cluster with a master gone) -------------------------------

TEST_F(RemoteCluster, ZMastersKilledUnderLoadWithAndWithoutReplica) {
  auto rt = Runtime::open(remote_config(unique_ns("failover"), 4, 4, 4, false));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> ops{0}, integrity_errors{0};
  std::thread load([&] {
    std::mt19937_64 rng(8);
    while (!stop) {
      Key k = key_from_sequence(123, rng() % 200);
      bool placed = false;
      Block b = rt->admit(k, &placed, true);
      if (placed) cxlt_test::fill_block(b.data, b.bytes, k, 1);
      else if (!cxlt_test::check_block(b.data, b.bytes, k)) ++integrity_errors;
      rt->unpin(k);
      ++ops;
    }
  });
  // A failed ASSERT returns from here: stop and join the load thread on every path.
  struct Joiner {
    std::atomic<bool> &stop;
    std::thread &t;
    ~Joiner() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } joiner{stop, load};
  auto run_for = [&](uint64_t n) {
    const uint64_t until = ops + n;
    while (ops < until) std::this_thread::sleep_for(5ms);
  };
  run_for(1000);
  const uint16_t observer = ports()[0];
  std::vector<NodeInfo> ms = masters_seen_by(observer);
  ASSERT_EQ(ms.size(), 3u);
  // A master other than the observer, with its replica.
  NodeInfo victim;
  for (const NodeInfo &m : ms)
    if (m.port != observer) victim = m;
  NodeInfo replica;
  for (const NodeInfo &n : cluster_nodes(observer))
    if (n.master_id == victim.id) replica = n;
  ASSERT_NE(replica.port, 0) << "the victim has no replica";
  cxlt_stats_t before = rt->stats();

  // 1. With a replica: killed, the replica takes over after the node timeout (1 s here).
  ASSERT_EQ(::kill(pid_of(victim.port), SIGKILL), 0);
  const auto killed = Clock::now();
  const uint64_t ops_at_kill = ops;
  bool promoted = false;
  while (Clock::now() - killed < 30s && !promoted) {
    for (const NodeInfo &m : masters_seen_by(observer)) promoted = promoted || m.port == replica.port;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(promoted) << "the replica on port " << replica.port << " was not promoted within 30 s";
  const double failover_s = std::chrono::duration<double>(Clock::now() - killed).count();
  EXPECT_GT(ops.load(), ops_at_kill) << "the runtime stopped serving while the master was down";
  run_for(1500);
  cxlt_stats_t mid = rt->stats();
  EXPECT_GT(mid.remote_failures, before.remote_failures);  // the dead master's slots, until the failover
  EXPECT_GT(mid.remote_writeouts, before.remote_writeouts);

  // 2. Without a replica: the promoted one is killed too; its slots stay unserved
  // (cluster-require-full-coverage no keeps the others serving), so they are misses.
  ASSERT_EQ(::kill(pid_of(replica.port), SIGKILL), 0);
  const uint64_t ops_at_kill2 = ops;
  std::this_thread::sleep_for(3s);
  EXPECT_GT(ops.load(), ops_at_kill2) << "the runtime stopped serving after the second kill";
  run_for(1500);
  stop = true;
  load.join();
  ASSERT_TRUE(rt->wait_idle(60000));
  cxlt_stats_t after = rt->stats();
  EXPECT_GT(after.remote_failures, mid.remote_failures);
  EXPECT_GT(after.remote_writeouts, mid.remote_writeouts);  // the other masters still take blocks
  EXPECT_GT(after.remote_hits, mid.remote_hits);
  EXPECT_EQ(integrity_errors.load(), 0u);
  EXPECT_EQ(json_remote(*rt, "corrupt"), 0u);
  EXPECT_EQ(rt->validate(), "");
  std::printf("failover: replica promoted %.1f s after the kill; %llu admissions, remote failures %llu -> %llu -> %llu\n",
              failover_s, static_cast<unsigned long long>(ops.load()),
              static_cast<unsigned long long>(before.remote_failures), static_cast<unsigned long long>(mid.remote_failures),
              static_cast<unsigned long long>(after.remote_failures));
}

}  // namespace
