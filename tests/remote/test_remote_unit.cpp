// SPDX-License-Identifier: Apache-2.0
// The remote tier without a server: CRC16 and key slots (the cluster specification's examples),
// the value header and its checks, namespaces and keys, seed parsing, the [remote] keys, and a
// runtime whose cluster refuses connections or never answers: every admission is a miss within
// the deadline, every write-out a failure, nothing stalls and nothing is corrupted.
#include "lib/runtime/remote.hpp"
#include "runtime_test_util.hpp"
#include "tiers/remote/slot.hpp"
#include "tiers/remote/value.hpp"

#include "cxlt_config.h"

#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#if CXLT_HAVE_REMOTE
#include "tiers/remote/cluster.hpp"
#endif

using namespace cxltier;
using namespace cxltier::remote;

namespace {

TEST(RemoteSlot, Crc16MatchesTheSpecification) {
  // The cluster specification's reference value: CRC16("123456789") = 0x31C3.
  EXPECT_EQ(crc16("123456789"), 0x31C3);
  EXPECT_EQ(crc16(""), 0);
}

TEST(RemoteSlot, HashTagsAsTheServersDo) {
  // Examples of the specification: only the first {...} counts, and an empty one does not.
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("foo{}{bar}"), crc16("foo{}{bar}") & 16383);
  EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
  EXPECT_EQ(key_slot("{unclosed"), crc16("{unclosed") & 16383);
  // Known slots (CLUSTER KEYSLOT on Redis 7.0).
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("bar"), 5061);
  EXPECT_EQ(key_slot("hello"), 866);
}

TEST(RemoteValue, HeaderRoundTripAndEveryCheck) {
  std::vector<unsigned char> payload(4096);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<unsigned char>(i * 7);
  const Key k{0x1111, 0x2222};
  const uint64_t ns = namespace_hash("m/1x1x1x1x16kv/e1/tp0");
  ValueHeader h = make_header(k, ns, payload.data(), payload.size());
  EXPECT_EQ(check_header(h, k, ns, payload.size()), "");
  EXPECT_TRUE(check_payload(h, payload.data(), payload.size()));
  // The payload changed by one bit: refused.
  payload[100] ^= 1;
  EXPECT_FALSE(check_payload(h, payload.data(), payload.size()));
  payload[100] ^= 1;
  // Another key, namespace, size: refused with the reason.
  EXPECT_NE(check_header(h, Key{0x1111, 0x2223}, ns, payload.size()).find("holds block"), std::string::npos);
  EXPECT_NE(check_header(h, k, ns + 1, payload.size()).find("namespace"), std::string::npos);
  EXPECT_NE(check_header(h, k, ns, payload.size() * 2).find("bytes"), std::string::npos);
  // Any header byte changed: its own checksum catches it (or the magic).
  for (size_t i = 0; i < sizeof h; ++i) {
    ValueHeader bad = h;
    reinterpret_cast<unsigned char *>(&bad)[i] ^= 0x40;
    EXPECT_NE(check_header(bad, k, ns, payload.size()), "") << "byte " << i;
  }
}

TEST(RemoteValue, KeysAndNamespaces) {
  EXPECT_EQ(block_key("ns", Key{1, 2}), "cxlt:ns:" + (Key{1, 2}).hex());
  EXPECT_EQ(check_namespace("llama3-70b/80x8x128x2x16kv/bf16/tp0"), "");
  EXPECT_NE(check_namespace(""), "");
  EXPECT_NE(check_namespace("has space"), "");
  EXPECT_NE(check_namespace("{tag}"), "");
  EXPECT_NE(check_namespace(std::string(201, 'a')), "");
  RuntimeConfig c;
  EXPECT_EQ(remote_namespace(c), "model/80x8x128x2x16kv/e2/tp0");
  c.set("remote.model", "llama3-70b");
  c.set("remote.dtype", "bf16");
  c.set("remote.tp_rank", "3");
  EXPECT_EQ(remote_namespace(c), "llama3-70b/80x8x128x2x16kv/bf16/tp3");
  c.set("remote.namespace", "fleet-a");
  EXPECT_EQ(remote_namespace(c), "fleet-a");
  // Two geometries never share keys.
  RuntimeConfig d;
  d.set("geometry.layers", "32");
  EXPECT_NE(remote_namespace(d), remote_namespace(RuntimeConfig{}));
}

TEST(RemoteConfig, KeysParseAndValidate) {
  RuntimeConfig c;
  c.set("remote.seeds", "127.0.0.1:7000, [::1]:7001,redis-a.internal:6379");
  ASSERT_EQ(c.remote.seeds.size(), 3u);
  EXPECT_EQ(c.remote.seeds[1], "[::1]:7001");
  EXPECT_THROW(c.set("remote.seeds", "127.0.0.1"), Error);
  EXPECT_THROW(c.set("remote.seeds", "127.0.0.1:0"), Error);
  EXPECT_THROW(c.set("remote.seeds", "127.0.0.1:70000"), Error);
  EXPECT_THROW(c.set("remote.namespace", "a{b}"), Error);
  EXPECT_THROW(c.set("remote.write_threshold", "1.5"), Error);
  EXPECT_THROW(c.set("remote.deadline_ms", "0"), Error);
  EXPECT_THROW(c.set("remote.concurrency", "65"), Error);
  c.set("remote.enabled", "true");
  EXPECT_NO_THROW(c.validate());
  c.set("remote.seeds", "");
  try {
    c.validate();
    ADD_FAILURE() << "enabled without seeds was accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_CONFIG);
    EXPECT_NE(std::string(e.what()).find("remote.seeds"), std::string::npos) << e.what();
  }
  c.set("remote.seeds", "127.0.0.1:7000");
  c.set("remote.model", "has space");
  EXPECT_THROW(c.validate(), Error);
  // TOML, with the group's own table.
  RuntimeConfig t;
  t.load_toml_string("[remote]\nenabled = true\nseeds = \"127.0.0.1:7000\"\ndeadline_ms = 250\nwrite_threshold = 0.1\n");
  EXPECT_TRUE(t.remote.enabled);
  EXPECT_EQ(t.remote.deadline_ms, 250u);
  EXPECT_EQ(t.remote.write_threshold, 0.1);
  EXPECT_NE(t.to_toml().find("[remote]"), std::string::npos);
}

#if CXLT_HAVE_REMOTE

TEST(RemoteCluster, SeedAddresses) {
  NodeAddr a = parse_node_addr("127.0.0.1:7000", "seed");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 7000);
  NodeAddr b = parse_node_addr("[::1]:7001", "seed");
  EXPECT_EQ(b.host, "::1");
  EXPECT_EQ(b.port, 7001);
  EXPECT_THROW(parse_node_addr("nohost", "seed"), Error);
  EXPECT_THROW(parse_node_addr(":7000", "seed"), Error);
  EXPECT_THROW(parse_node_addr("h:x", "seed"), Error);
}

// A port nobody listens on: bind a socket, read its port, close it.
uint16_t closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

RuntimeConfig remote_runtime_config(const std::string &seed, bool synchronous) {
  RuntimeConfig cfg = cxlt_test::three_tier_config(2, 2, 2);
  cfg.synchronous = synchronous;
  cfg.set("remote.enabled", "true");
  cfg.set("remote.seeds", seed);
  cfg.set("remote.deadline_ms", "50");
  return cfg;
}

// Admit `n` blocks (filled) into a runtime whose tiers hold 6: at least n - 6 drops, each of
// which tries a write-out; then admit them all again (each a fetch).
void churn(Runtime &rt, int n, int *placed_again) {
  for (int i = 0; i < n; ++i) {
    Key k = key_from_sequence(7, static_cast<uint64_t>(i));
    bool placed = false;
    Block b = rt.admit(k, &placed, true);
    if (placed) cxlt_test::fill_block(b.data, b.bytes, k, 1);
    rt.unpin(k);
  }
  rt.wait_idle(-1);
  *placed_again = 0;
  for (int i = 0; i < n; ++i) {
    Key k = key_from_sequence(7, static_cast<uint64_t>(i));
    bool placed = false;
    Block b = rt.admit(k, &placed, true);
    if (placed) {
      ++*placed_again;
      cxlt_test::fill_block(b.data, b.bytes, k, 2);
    } else {
      EXPECT_TRUE(cxlt_test::check_block(b.data, b.bytes, k)) << i;
    }
    rt.unpin(k);
  }
  rt.wait_idle(-1);
}

TEST(RemoteRuntime, ConnectionRefusedIsAMissNeverAStall) {
  for (bool sync : {true, false}) {
    auto rt = Runtime::open(remote_runtime_config("127.0.0.1:" + std::to_string(closed_port()), sync));
    int again = 0;
    churn(*rt, 20, &again);
    cxlt_stats_t s = rt->stats();
    EXPECT_EQ(s.remote_hits, 0u);
    EXPECT_EQ(s.remote_writeouts, 0u);
    EXPECT_GT(s.remote_misses, 0u);
    EXPECT_GT(s.drops, 0u);
    EXPECT_EQ(rt->validate(), "");
    EXPECT_NE(rt->stats_json().find("\"remote\""), std::string::npos);
  }
}

// A server that accepts connections and never answers: every operation ends at its deadline.
TEST(RemoteRuntime, SilentServerTimesOut) {
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 64), 0);
  ::fcntl(lfd, F_SETFL, O_NONBLOCK);
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr *>(&a), &len);
  std::atomic<bool> stop{false};
  std::vector<int> accepted;
  std::thread acceptor([&] {
    while (!stop) {
      int fd = ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK);
      if (fd >= 0) accepted.push_back(fd);  // read nothing, answer nothing
      else std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  {
    // The client asks a silent "cluster" for its slot table: that times out, no slot is known,
    // so every block operation fails at once (no route) and the runtime goes on.
    auto rt = Runtime::open(remote_runtime_config("127.0.0.1:" + std::to_string(ntohs(a.sin_port)), true));
    int again = 0;
    churn(*rt, 12, &again);
    EXPECT_GE(again, 6);  // every block that was dropped came back as a miss
    cxlt_stats_t s = rt->stats();
    EXPECT_EQ(s.remote_hits, 0u);
    EXPECT_GT(s.remote_failures, 0u);
    EXPECT_EQ(rt->validate(), "");
  }
  stop = true;
  acceptor.join();
  for (int fd : accepted) ::close(fd);
  ::close(lfd);
}

// A peer that accepts, then closes its end (as a SIGKILLed server's kernel does): sending to
// it must report the closed connection and never raise SIGPIPE, with the signal at its default
// action (fatal) as in a host process that never heard of it.
TEST(RemoteConn, SendToAClosedPeerIsAnErrorNotASignal) {
  struct sigaction dfl{}, old{};
  dfl.sa_handler = SIG_DFL;
  ASSERT_EQ(::sigaction(SIGPIPE, &dfl, &old), 0);
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr *>(&a), &len);
  Conn c;
  std::string err;
  const Deadline dl = Clock::now() + std::chrono::seconds(5);
  ASSERT_TRUE(c.open("127.0.0.1", ntohs(a.sin_port), dl, Auth{}, &err)) << err;
  int peer = ::accept(lfd, nullptr, nullptr);
  ASSERT_GE(peer, 0);
  ::close(peer);
  // The first writes may still be taken by the kernel (the peer answers them with a reset);
  // the ones after that fail with EPIPE, which is where SIGPIPE would be raised.
  std::string payload(1 << 20, 'x');
  Io io = Io::ok;
  for (int i = 0; i < 64 && io == Io::ok; ++i) io = c.send(payload, dl);
  EXPECT_EQ(io, Io::closed) << io_name(io);
  ::sigaction(SIGPIPE, &old, nullptr);
  ::close(lfd);
}

#else

TEST(RemoteRuntime, BuiltWithoutTheRemoteTier) {
  RuntimeConfig cfg = cxlt_test::three_tier_config(2, 2, 2);
  cfg.set("remote.enabled", "true");
  cfg.set("remote.seeds", "127.0.0.1:7000");
  try {
    Runtime::open(cfg);
    ADD_FAILURE() << "opened with a remote tier this build lacks";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_NOT_SUPPORTED);
    EXPECT_NE(std::string(e.what()).find("hiredis"), std::string::npos) << e.what();
  }
}

#endif

}  // namespace
