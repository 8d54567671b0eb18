// SPDX-License-Identifier: Apache-2.0
// The runtime configuration: every key through TOML, set() and the environment; precedence
// (default < file < environment < set, in any call order); the to_toml round trip; every
// error with the field named; validate(); default budgets; the cxlt_config_* C functions.
#include <cxltier/config.hpp>
#include <cxltier/error.hpp>

#include "lib/capi/config_handle.hpp"
#include "../common/temp_dir.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using cxltier::ConfigLayer;
using cxltier::Error;
using cxltier::RuntimeConfig;
using cxltier::TierConfig;
using cxltier::TierKind;

using cxlt_test::TempDir;

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

// Runs `f`, expects an Error with `code`, returns its message.
std::string error_of(const std::function<void()> &f, cxlt_result_t code = CXLT_ERROR_CONFIG) {
  try {
    f();
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << "'" << (text) << "' lacks '" << (part) << "'"

// Sets environment variables for the scope of a test and restores them.
struct EnvGuard {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  void set(const std::string &name, const std::string &value) {
    const char *old = std::getenv(name.c_str());
    saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~EnvGuard() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }
};

// One non-default value per key (as text for set() and the environment, as TOML for a file)
// and a check that the configuration holds it. Tier keys are written for tier 1 (so tier 0 is
// created on the way).
struct KeyCase {
  std::string key;    // as keys() lists it, tiers.<n>.* for tier fields
  std::string text;   // set() / environment value
  std::string toml;   // TOML literal
  std::function<bool(const RuntimeConfig &)> holds;
};

const TierConfig &t1(const RuntimeConfig &c) { return c.tiers.at(1); }

std::vector<KeyCase> key_cases() {
  using C = const RuntimeConfig &;
  return {
      {"topology", "emulated", "\"emulated\"", [](C c) { return c.topology == "emulated"; }},
      {"geometry.layers", "32", "32", [](C c) { return c.geometry.layers == 32; }},
      {"geometry.kv_heads", "4", "4", [](C c) { return c.geometry.kv_heads == 4; }},
      {"geometry.head_dim", "64", "64", [](C c) { return c.geometry.head_dim == 64; }},
      {"geometry.bytes_per_element", "1", "1", [](C c) { return c.geometry.bytes_per_element == 1; }},
      {"geometry.tokens_per_block", "32", "32", [](C c) { return c.geometry.tokens_per_block == 32; }},
      {"geometry.k_and_v", "false", "false", [](C c) { return !c.geometry.k_and_v; }},
      {"policy.kind", "lru", "\"lru\"", [](C c) { return c.policy == cxltier::PolicyKind::lru; }},
      {"policy.alpha", "0.25", "0.25", [](C c) { return c.lrfu.alpha == 0.25; }},
      {"policy.beta", "0", "0.0", [](C c) { return c.lrfu.beta == 0.0; }},
      {"policy.score_mode", "decay", "\"decay\"", [](C c) { return c.lrfu.mode == cxltier::ScoreMode::decay; }},
      {"policy.persist", "no", "false", [](C c) { return !c.persist; }},
      {"policy.index_buckets", "1024", "1024", [](C c) { return c.index_buckets == 1024; }},
      {"policy.audit", "on", "true", [](C c) { return c.audit; }},
      {"store.capacity", "4096", "4096", [](C c) { return c.store_capacity == 4096; }},
      {"store.path", "/tmp/scores.ckpt", "\"/tmp/scores.ckpt\"", [](C c) { return c.store_path == "/tmp/scores.ckpt"; }},
      {"store.checkpoint_every_steps", "500", "500", [](C c) { return c.checkpoint_every_steps == 500; }},
      {"runtime.migration_threads", "7", "7", [](C c) { return c.migration_threads == 7; }},
      {"runtime.migration_batch", "3", "3", [](C c) { return c.migration_batch == 3; }},
      {"runtime.high_watermark", "0.8", "0.8", [](C c) { return c.high_watermark == 0.8; }},
      {"runtime.low_watermark", "0.5", "0.5", [](C c) { return c.low_watermark == 0.5; }},
      {"runtime.promotion", "always", "\"always\"", [](C c) { return c.promotion == cxltier::PromotionRule::always; }},
      {"runtime.copy_kernel", "nt", "\"nt\"", [](C c) { return c.copy_kernel == "nt"; }},
      {"runtime.huge_pages", "thp", "\"thp\"", [](C c) { return c.huge_pages == cxltier::HugePages::thp; }},
      {"runtime.verify_placement", "false", "false", [](C c) { return !c.verify_placement; }},
      {"runtime.reserve_memory", "true", "true", [](C c) { return c.reserve_memory; }},
      {"runtime.extent_blocks", "64", "64", [](C c) { return c.extent_blocks == 64; }},
      {"runtime.verify_copies", "yes", "true", [](C c) { return c.verify_copies; }},
      {"runtime.state_huge_pages", "no", "false", [](C c) { return !c.state_huge_pages; }},
      {"remote.enabled", "on", "true", [](C c) { return c.remote.enabled; }},
      {"remote.seeds", "127.0.0.1:7000,127.0.0.1:7001", "\"127.0.0.1:7000,127.0.0.1:7001\"",
       [](C c) { return c.remote.seeds == std::vector<std::string>{"127.0.0.1:7000", "127.0.0.1:7001"}; }},
      {"remote.namespace", "fleet-a", "\"fleet-a\"", [](C c) { return c.remote.ns == "fleet-a"; }},
      {"remote.model", "llama3-70b", "\"llama3-70b\"", [](C c) { return c.remote.model == "llama3-70b"; }},
      {"remote.dtype", "bf16", "\"bf16\"", [](C c) { return c.remote.dtype == "bf16"; }},
      {"remote.tp_rank", "3", "3", [](C c) { return c.remote.tp_rank == 3; }},
      {"remote.deadline_ms", "250", "250", [](C c) { return c.remote.deadline_ms == 250; }},
      {"remote.write_threshold", "0.25", "0.25", [](C c) { return c.remote.write_threshold == 0.25; }},
      {"remote.concurrency", "4", "4", [](C c) { return c.remote.concurrency == 4; }},
      {"remote.max_pending", "32", "32", [](C c) { return c.remote.max_pending == 32; }},
      {"remote.user", "cxlt", "\"cxlt\"", [](C c) { return c.remote.user == "cxlt"; }},
      {"remote.password_file", "/etc/cxlt/redis.pw", "\"/etc/cxlt/redis.pw\"",
       [](C c) { return c.remote.password_file == "/etc/cxlt/redis.pw"; }},
      {"tiers.<n>.name", "fast", "\"fast\"", [](C c) { return t1(c).name == "fast"; }},
      {"tiers.<n>.kind", "cxl", "\"cxl\"", [](C c) { return t1(c).kind == TierKind::cxl; }},
      {"tiers.<n>.numa_nodes", "2, 3", "[2, 3]", [](C c) { return t1(c).numa_nodes == std::vector<unsigned>{2, 3}; }},
      {"tiers.<n>.budget", "4GiB", "\"4GiB\"", [](C c) { return t1(c).budget_bytes == 4 * GiB; }},
      {"tiers.<n>.backend", "emulated", "\"emulated\"", [](C c) { return t1(c).backend == "emulated"; }},
      {"tiers.<n>.memkind_kind", "dax_kmem", "\"dax_kmem\"", [](C c) { return t1(c).options.count("memkind_kind") && t1(c).options.at("memkind_kind") == "dax_kmem"; }},
      {"tiers.<n>.pace_mib_s", "2000", "2000.5", [](C c) { double v = t1(c).options.count("pace_mib_s") ? std::stod(t1(c).options.at("pace_mib_s")) : 0; return v == 2000 || v == 2000.5; }},
      {"tiers.<n>.bandwidth_mib_s", "30000", "30000", [](C c) { return t1(c).bandwidth_mib_s == 30000.0; }},
      {"tiers.<n>.latency_ns", "250.5", "250.5", [](C c) { return t1(c).latency_ns == 250.5; }},
      {"tiers.<n>.layout", "per-layer", "\"per-layer\"", [](C c) { return t1(c).layout == "per-layer"; }},
  };
}

std::string concrete(const std::string &key) {
  const std::string pat = "tiers.<n>.";
  return key.rfind(pat, 0) == 0 ? "tiers.1." + key.substr(pat.size()) : key;
}

TEST(Config, KeyCasesCoverEveryKey) {
  std::set<std::string> covered;
  for (const KeyCase &k : key_cases()) covered.insert(k.key);
  for (const std::string &k : RuntimeConfig::keys()) EXPECT_TRUE(covered.count(k)) << k << " has no test case";
  EXPECT_EQ(covered.size(), RuntimeConfig::keys().size());
}

TEST(Config, DefaultsAreValidAndAsDocumented) {
  RuntimeConfig c;
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.geometry.bytes(), 5u * MiB);
  EXPECT_EQ(c.topology, "auto");
  EXPECT_EQ(c.lrfu.alpha, 0.05);
  EXPECT_EQ(c.lrfu.beta, 0.001);
  EXPECT_EQ(c.index_buckets, 256u);
  EXPECT_EQ(c.high_watermark, 0.95);
  EXPECT_EQ(c.low_watermark, 0.90);
  EXPECT_TRUE(c.tiers.empty());
  EXPECT_TRUE(c.origins.empty());
}

TEST(Config, EveryKeyThroughSet) {
  for (const KeyCase &k : key_cases()) {
    RuntimeConfig c;
    c.set(concrete(k.key), k.text);
    EXPECT_TRUE(k.holds(c)) << k.key << " = " << k.text;
    EXPECT_EQ(c.origins.at(concrete(k.key)).layer, ConfigLayer::api) << k.key;
  }
}

TEST(Config, EveryKeyThroughToml) {
  for (const KeyCase &k : key_cases()) {
    std::string key = concrete(k.key), text;
    if (key.rfind("tiers.1.", 0) == 0) {
      text = "[[tiers]]\nkind = \"hbm\"\n[[tiers]]\n" + key.substr(8) + " = " + k.toml + "\n";
    } else if (size_t dot = key.find('.'); dot != std::string::npos) {
      text = "[" + key.substr(0, dot) + "]\n" + key.substr(dot + 1) + " = " + k.toml + "\n";
    } else {
      text = key + " = " + k.toml + "\n";
    }
    RuntimeConfig c;
    ASSERT_NO_THROW(c.load_toml_string(text, "case.toml")) << text;
    EXPECT_TRUE(k.holds(c)) << text;
    EXPECT_EQ(c.origins.at(key).layer, ConfigLayer::file);
    EXPECT_HAS(c.origins.at(key).where, "case.toml:");
  }
}

TEST(Config, EveryKeyThroughEnvironment) {
  for (const KeyCase &k : key_cases()) {
    std::string key = concrete(k.key);
    std::string var = RuntimeConfig::env_name(key);
    {
      EnvGuard env;
      env.set(var, k.text);
      RuntimeConfig c;
      c.apply_environment();
      EXPECT_TRUE(k.holds(c)) << var << "=" << k.text;
      EXPECT_EQ(c.origins.at(key).layer, ConfigLayer::environment);
      EXPECT_EQ(c.origins.at(key).where, var);
    }
    // The explicit-list form, same result.
    RuntimeConfig c;
    EXPECT_TRUE(c.apply_environment_vars({{var, k.text}}).empty());
    EXPECT_TRUE(k.holds(c)) << var;
  }
}

TEST(Config, EnvironmentNames) {
  EXPECT_EQ(RuntimeConfig::env_name("policy.alpha"), "CXLT_POLICY_ALPHA");
  EXPECT_EQ(RuntimeConfig::env_name("tiers.0.budget"), "CXLT_TIERS_0_BUDGET");
  EXPECT_EQ(RuntimeConfig::env_name("topology"), "CXLT_TOPOLOGY");
  EXPECT_EQ(RuntimeConfig::env_name("runtime.high_watermark"), "CXLT_RUNTIME_HIGH_WATERMARK");
  // Names are matched without regard to case, as mimalloc's options are.
  RuntimeConfig c;
  c.apply_environment_vars({{"cxlt_policy_beta", "0.5"}});
  EXPECT_EQ(c.lrfu.beta, 0.5);
}

TEST(Config, SetCreatesTiersUpToTheIndex) {
  RuntimeConfig c;
  c.set("tiers.2.budget", "1GiB");
  ASSERT_EQ(c.tiers.size(), 3u);
  EXPECT_EQ(c.tiers[2].budget_bytes, GiB);
  EXPECT_EQ(c.tiers[0].budget_bytes, 0u);
  // Tiers 0 and 1 do not say what they are yet.
  EXPECT_HAS(error_of([&] { c.validate(); }), "tiers.0: neither kind nor numa_nodes");
  c.set("tiers.0.kind", "hbm");
  c.set("tiers.1.kind", "dram");
  c.set("tiers.2.numa_nodes", "2");
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(cxltier::tier_config_name(c.tiers[2], 2), "node2");
  EXPECT_EQ(cxltier::tier_config_name(c.tiers[0], 0), "hbm");
}

TEST(Config, OptionalValuesClearWithEmptyText) {
  RuntimeConfig c;
  c.set("tiers.0.kind", "cxl");
  c.set("tiers.0.bandwidth_mib_s", "1000");
  c.set("tiers.0.latency_ns", "300");
  c.set("tiers.0.numa_nodes", "1,2");
  c.set("tiers.0.bandwidth_mib_s", "");
  c.set("tiers.0.latency_ns", "");
  c.set("tiers.0.numa_nodes", "");
  EXPECT_FALSE(c.tiers[0].bandwidth_mib_s);
  EXPECT_FALSE(c.tiers[0].latency_ns);
  EXPECT_TRUE(c.tiers[0].numa_nodes.empty());
  c.set("tiers.0.numa_nodes", "3");
  c.set("tiers.0.kind", "");
  EXPECT_FALSE(c.tiers[0].kind);
}

// --- precedence --------------------------------------------------------------------------

TEST(Config, PrecedenceDefaultFileEnvironmentSet) {
  TempDir dir;
  std::string path = dir.write("p.toml",
                               "[policy]\nalpha = 0.1\nbeta = 0.2\nscore_mode = \"decay\"\n"
                               "[runtime]\nmigration_threads = 3\n");
  auto check = [](const RuntimeConfig &c) {
    EXPECT_EQ(c.lrfu.alpha, 0.4);      // set
    EXPECT_EQ(c.lrfu.beta, 0.3);       // environment over file
    EXPECT_EQ(c.lrfu.mode, cxltier::ScoreMode::decay);  // file over default
    EXPECT_EQ(c.migration_threads, 5u);  // set over environment over file
    EXPECT_EQ(c.index_buckets, 256u);    // default
  };
  std::vector<std::pair<std::string, std::string>> env = {
      {"CXLT_POLICY_BETA", "0.3"}, {"CXLT_RUNTIME_MIGRATION_THREADS", "4"}, {"CXLT_POLICY_ALPHA", "0.9"}};
  // The documented order.
  {
    RuntimeConfig c;
    c.load_toml_file(path);
    c.apply_environment_vars(env);
    c.set("policy.alpha", "0.4");
    c.set("runtime.migration_threads", "5");
    check(c);
  }
  // The reverse order gives the same result: a lower layer never replaces a higher one.
  {
    RuntimeConfig c;
    c.set("policy.alpha", "0.4");
    c.set("runtime.migration_threads", "5");
    c.apply_environment_vars(env);
    c.load_toml_file(path);
    check(c);
    EXPECT_EQ(c.origins.at("policy.beta").where, "CXLT_POLICY_BETA");
    EXPECT_EQ(c.origins.at("policy.score_mode").where, path + ":4:14");
  }
  // A value a higher layer overrides is still checked.
  {
    RuntimeConfig c;
    c.set("policy.alpha", "0.4");
    EXPECT_HAS(error_of([&] { c.load_toml_string("[policy]\nalpha = 7.0\n", "x.toml"); }), "x.toml:2:9: policy.alpha = 7.0 is outside (0, 1]");
  }
  // from_sources: defaults, file, environment.
  {
    EnvGuard g;
    g.set("CXLT_POLICY_BETA", "0.3");
    RuntimeConfig c = RuntimeConfig::from_sources(path);
    EXPECT_EQ(c.lrfu.alpha, 0.1);
    EXPECT_EQ(c.lrfu.beta, 0.3);
    RuntimeConfig d = RuntimeConfig::from_sources("");
    EXPECT_EQ(d.lrfu.alpha, 0.05);
    EXPECT_EQ(d.lrfu.beta, 0.3);
  }
}

// --- round trip --------------------------------------------------------------------------

// The dump without comments (they name where each value came from, which a reload changes).
std::string strip_comments(const std::string &s) {
  std::istringstream in(s);
  std::string out, l;
  while (std::getline(in, l)) {
    if (l.rfind("#", 0) == 0) continue;
    size_t hash = l.find("  #");
    out += (hash == std::string::npos ? l : l.substr(0, hash)) + "\n";
  }
  return out;
}

TEST(Config, ToTomlRoundTrip) {
  RuntimeConfig c;
  for (const KeyCase &k : key_cases()) c.set(concrete(k.key), k.text);
  c.set("tiers.0.kind", "hbm");
  c.set("tiers.2.numa_nodes", "4");
  c.set("tiers.2.budget", "12345678");               // not a whole KiB: written as bytes
  c.set("store.path", "dir with \"quotes\"\\x.ckpt");  // escapes
  c.set("policy.alpha", "0.1");                        // not exact in binary
  c.set("policy.beta", "1e-9");
  c.set("runtime.high_watermark", "1");
  std::string text = c.to_toml();
  RuntimeConfig d;
  ASSERT_NO_THROW(d.load_toml_string(text, "dump.toml")) << text;
  // Same values (origins differ: the copy's come from dump.toml).
  EXPECT_EQ(d.lrfu.alpha, 0.1);
  EXPECT_EQ(d.lrfu.beta, 1e-9);
  EXPECT_EQ(d.high_watermark, 1.0);
  EXPECT_EQ(d.store_path, "dir with \"quotes\"\\x.ckpt");
  ASSERT_EQ(d.tiers.size(), 3u);
  EXPECT_EQ(d.tiers[2].budget_bytes, 12345678u);
  EXPECT_EQ(d.tiers[1].budget_bytes, 4 * GiB);
  EXPECT_EQ(d.tiers[1].numa_nodes, (std::vector<unsigned>{2, 3}));
  EXPECT_EQ(d.tiers[1].latency_ns, 250.5);
  EXPECT_FALSE(d.tiers[0].latency_ns);
  EXPECT_EQ(d.tiers[0].name, "hbm");  // the effective name is written out
  for (const KeyCase &k : key_cases())
    if (k.key != "policy.alpha" && k.key != "policy.beta" && k.key != "store.path" && k.key != "runtime.high_watermark") {
      EXPECT_TRUE(k.holds(d)) << k.key;
    }
  // Every key is in the dump (optional ones unset are written as comments).
  for (const std::string &key : RuntimeConfig::keys()) {
    size_t dot = key.rfind('.');
    std::string leaf = dot == std::string::npos ? key : key.substr(dot + 1);
    EXPECT_HAS(text, "\n" + leaf + " = ");
  }
  EXPECT_HAS(text, "[set()]");
  // Without the comments (which name origins), the text is identical.
  EXPECT_EQ(strip_comments(d.to_toml()), strip_comments(text));
}

TEST(Config, DefaultsRoundTripAndShowUnsetOptionals) {
  RuntimeConfig c;
  std::string text = c.to_toml();
  EXPECT_HAS(text, "none configured");
  RuntimeConfig d;
  d.load_toml_string(text);
  EXPECT_EQ(strip_comments(d.to_toml()), strip_comments(text));
  EXPECT_TRUE(d.tiers.empty());
  c.set("tiers.0.kind", "dram");
  text = c.to_toml();
  EXPECT_HAS(text, "# bandwidth_mib_s: not set");
  EXPECT_HAS(text, "# latency_ns: not set");
}

// --- errors: file, line, key, reason -----------------------------------------------------

TEST(ConfigErrors, UnknownKeysWithSuggestions) {
  RuntimeConfig c;
  std::string m = error_of([&] { c.load_toml_string("topology = \"auto\"\n[policy]\nalpah = 0.1\n", "f.toml"); });
  EXPECT_HAS(m, "f.toml:3:1: unknown key 'policy.alpah' (did you mean 'policy.alpha'?)");
  m = error_of([&] { c.load_toml_string("alpha = 0.1\n", "f.toml"); });
  EXPECT_HAS(m, "f.toml:1:1: unknown key 'alpha' (did you mean 'policy.alpha', in [policy]?)");
  m = error_of([&] { c.load_toml_string("[polcy]\nalpha = 0.1\n", "f.toml"); });
  EXPECT_HAS(m, "unknown key 'polcy' (did you mean 'policy'?)");
  m = error_of([&] { c.load_toml_string("[[tiers]]\nkind = \"cxl\"\nbugdet = \"1GiB\"\n", "f.toml"); });
  EXPECT_HAS(m, "f.toml:3:1: unknown key 'tiers.0.bugdet' (did you mean 'budget'?)");
  m = error_of([&] { c.load_toml_string("[runtime]\ncompletely_unrelated = 1\n", "f.toml"); });
  EXPECT_HAS(m, "unknown key 'runtime.completely_unrelated'");
  EXPECT_EQ(m.find("did you mean"), std::string::npos) << m;

  m = error_of([&] { c.set("runtime.hig_watermark", "0.5"); });
  EXPECT_HAS(m, "unknown key 'runtime.hig_watermark' (did you mean 'runtime.high_watermark'?)");
  m = error_of([&] { c.set("tiers.0.kidn", "cxl"); });
  EXPECT_HAS(m, "did you mean 'kind'?");
  m = error_of([&] { c.set("tiers.8.kind", "cxl"); });
  EXPECT_HAS(m, "tier index 8 is out of range");
  m = error_of([&] { c.set("tiers.x.kind", "cxl"); });
  EXPECT_HAS(m, "unknown key 'tiers.x.kind'");
  EXPECT_TRUE(c.tiers.empty());
}

TEST(ConfigErrors, WrongTypes) {
  struct Case { const char *toml; const char *message; };
  const Case cases[] = {
      {"[geometry]\nlayers = \"80\"\n", "f.toml:2:10: geometry.layers: expected an integer, got a string"},
      {"[geometry]\nk_and_v = 1\n", "f.toml:2:11: geometry.k_and_v: expected a boolean (true or false), got an integer"},
      {"[policy]\nalpha = \"0.1\"\n", "policy.alpha: expected a number, got a string"},
      {"[policy]\nkind = 3\n", "policy.kind: expected a string, got an integer"},
      {"[[tiers]]\nbudget = 1.5\n", "tiers.0.budget: expected a size (an integer of bytes or a string such as \"4GiB\"), got a float"},
      {"[[tiers]]\nnuma_nodes = 2\n", "tiers.0.numa_nodes: expected an array of NUMA node numbers ([0, 1]), got an integer"},
      {"[[tiers]]\nnuma_nodes = [\"a\"]\n", "got an array holding a string"},
      {"[[tiers]]\nnuma_nodes = [-1]\n", "node -1 must not be negative"},
      {"policy = 3\n", "f.toml:1:1: 'policy' must be a table ([policy]), got an integer"},
      {"[tiers]\nkind = \"cxl\"\n", "'tiers' must be an array of tables (write each tier as [[tiers]]), got a table"},
      {"[runtime]\nhigh_watermark = nan\n", "runtime.high_watermark = nan is not a finite number"},
  };
  for (const Case &k : cases) {
    RuntimeConfig c;
    EXPECT_HAS(error_of([&] { c.load_toml_string(k.toml, "f.toml"); }), k.message);
  }
}

TEST(ConfigErrors, OutOfRangeAndUnknownNames) {
  struct Case { const char *key, *value, *message; };
  const Case cases[] = {
      {"geometry.layers", "0", "geometry.layers = 0 is outside [1, 4294967295]"},
      {"geometry.head_dim", "4294967296", "geometry.head_dim = 4294967296 is outside"},
      {"geometry.kv_heads", "-1", "geometry.kv_heads: '-1' must not be negative"},
      {"geometry.k_and_v", "maybe", "geometry.k_and_v: 'maybe' is not a boolean"},
      {"policy.alpha", "0", "policy.alpha = 0.0 is outside (0, 1]"},
      {"policy.alpha", "1.5", "policy.alpha = 1.5 is outside (0, 1]"},
      {"policy.alpha", "abc", "policy.alpha: 'abc' is not a number"},
      {"policy.beta", "-0.1", "policy.beta = -0.1 must be >= 0"},
      {"policy.kind", "lrfx", "policy.kind = 'lrfx' is not a known policy (did you mean 'lrfu'?) (known: lrfu, lru, fifo, lfu, arc, opt)"},
      {"policy.score_mode", "decays", "policy.score_mode = 'decays' is not a known score mode (did you mean 'decay'?)"},
      {"policy.index_buckets", "100", "policy.index_buckets = 100 is not a power of two in [1, 65536]"},
      {"policy.index_buckets", "131072", "policy.index_buckets = 131072 is outside [1, 65536]"},
      {"policy.index_buckets", "0", "policy.index_buckets = 0 is outside [1, 65536]"},
      {"store.capacity", "2147483649", "store.capacity = 2147483649 is outside [0, 2147483648]"},
      {"runtime.migration_threads", "0", "runtime.migration_threads = 0 is outside [1, 64]"},
      {"runtime.migration_threads", "65", "runtime.migration_threads = 65 is outside [1, 64]"},
      {"runtime.migration_batch", "0", "runtime.migration_batch = 0 is outside"},
      {"runtime.extent_blocks", "0", "runtime.extent_blocks = 0 is outside"},
      {"runtime.high_watermark", "1.01", "runtime.high_watermark = 1.01 is outside (0, 1]"},
      {"runtime.low_watermark", "0", "runtime.low_watermark = 0.0 is outside (0, 1]"},
      {"runtime.promotion", "sometimes", "runtime.promotion = 'sometimes' is not a known promotion rule"},
      {"runtime.copy_kernel", "avx", "runtime.copy_kernel = 'avx' is not a known copy kernel"},
      {"runtime.huge_pages", "thpp", "runtime.huge_pages = 'thpp' is not a known huge page mode (did you mean 'thp'?)"},
      {"tiers.0.kind", "cxll", "tiers.0.kind = 'cxll' is not a known tier kind (did you mean 'cxl'?)"},
      {"tiers.0.backend", "numaa", "tiers.0.backend = 'numaa' is not a known backend (did you mean 'numa'?)"},
      {"tiers.0.memkind_kind", "hbm", "tiers.0.memkind_kind = 'hbm' is not a known memkind kind (did you mean 'hbw'?)"},
      {"tiers.0.layout", "per_layer", "tiers.0.layout = 'per_layer' is not a known layout (did you mean 'per-layer'?) (known: contiguous, per-layer)"},
      {"tiers.0.layout", "", "tiers.0.layout = '' is not a known layout"},
      {"tiers.0.budget", "4 GiBs", "tiers.0.budget: '4 GiBs' has an unknown unit"},
      {"tiers.0.budget", "-1", "tiers.0.budget: '-1' must not be negative"},
      {"tiers.0.numa_nodes", "1,,2", "tiers.0.numa_nodes: '1,,2' has an empty item"},
      {"tiers.0.numa_nodes", "1,1", "tiers.0.numa_nodes lists node 1 twice"},
      {"tiers.0.numa_nodes", "5000", "tiers.0.numa_nodes = 5000 is outside [0, 1023]"},
      {"tiers.0.pace_mib_s", "-5", "tiers.0.pace_mib_s = -5.0 must be >= 0"},
      {"tiers.0.bandwidth_mib_s", "0", "tiers.0.bandwidth_mib_s = 0.0 must be > 0"},
      {"tiers.0.latency_ns", "-3", "tiers.0.latency_ns = -3.0 must be > 0"},
      {"tiers.0.name", "has space", "tiers.0.name = 'has space' is not a tier name"},
      {"tiers.0.name", "a-name-that-is-far-too-long-for-the-c-struct", "is not a tier name"},
  };
  for (const Case &k : cases) {
    RuntimeConfig c;
    std::string before = c.to_toml();
    EXPECT_HAS(error_of([&] { c.set(k.key, k.value); }), k.message);
    EXPECT_EQ(c.to_toml(), before) << "half-applied: " << k.key;  // not even tiers created
    // The same value through the environment names the variable.
    std::string var = RuntimeConfig::env_name(k.key);
    std::string m = error_of([&] { c.apply_environment_vars({{var, k.value}}); });
    EXPECT_HAS(m, "environment variable " + var + "=");
    EXPECT_HAS(m, k.message);
    EXPECT_EQ(c.to_toml(), before);
  }
}

TEST(ConfigErrors, RangeErrorsInFilesNameFileLineAndKey) {
  RuntimeConfig c;
  std::string m = error_of([&] {
    c.load_toml_string("topology = \"emulated\"\n\n[runtime]\nmigration_threads = 99\n", "site.toml");
  });
  EXPECT_HAS(m, "site.toml:4:21: runtime.migration_threads = 99 is outside [1, 64]");
  m = error_of([&] { c.load_toml_string("[[tiers]]\nkind = \"cxl\"\n[[tiers]]\nkind = \"qpi\"\n", "t.toml"); });
  EXPECT_HAS(m, "t.toml:4:8: tiers.1.kind = 'qpi' is not a known tier kind");
  std::string nine;
  for (int i = 0; i < 9; ++i) nine += "[[tiers]]\nnuma_nodes = [" + std::to_string(i) + "]\n";
  m = error_of([&] { c.load_toml_string(nine, "nine.toml"); });
  EXPECT_HAS(m, "nine.toml:17:1: tiers.8: at most 8 tiers");
  EXPECT_EQ(c.topology, "auto");  // nothing of the failed loads applied
  EXPECT_TRUE(c.tiers.empty());
}

TEST(ConfigErrors, SyntaxErrorGivesLineAndColumn) {
  RuntimeConfig c;
  std::string m = error_of([&] { c.load_toml_string("[policy]\nalpha = 0.1\nbeta = = 2\n", "bad.toml"); });
  EXPECT_HAS(m, "bad.toml:3:");
  EXPECT_HAS(m, "TOML syntax error");
  m = error_of([&] { c.load_toml_string("[policy]\nalpha = 0.1\nalpha = 0.2\n", "dup.toml"); });
  EXPECT_HAS(m, "dup.toml:3:");
  EXPECT_EQ(c.lrfu.alpha, 0.05);
}

TEST(ConfigErrors, FilesNothingHalfApplied) {
  TempDir dir;
  std::string path = dir.write("half.toml", "[policy]\nalpha = 0.5\n[[tiers]]\nkind = \"cxl\"\n[runtime]\nlow_watermark = 2.0\n");
  RuntimeConfig c;
  std::string m = error_of([&] { c.load_toml_file(path); });
  EXPECT_HAS(m, path + ":6:17: runtime.low_watermark = 2.0 is outside (0, 1]");
  EXPECT_EQ(c.lrfu.alpha, 0.05);
  EXPECT_TRUE(c.tiers.empty());
  EXPECT_TRUE(c.origins.empty());
  // Environment: one bad variable among good ones applies none.
  m = error_of([&] {
    c.apply_environment_vars({{"CXLT_POLICY_ALPHA", "0.5"}, {"CXLT_TIERS_0_BUDGET", "lots"}});
  });
  EXPECT_HAS(m, "environment variable CXLT_TIERS_0_BUDGET=lots: tiers.0.budget: 'lots'");
  EXPECT_EQ(c.lrfu.alpha, 0.05);
  EXPECT_TRUE(c.tiers.empty());
}

TEST(ConfigErrors, UnreadableFileIsIoError) {
  TempDir dir;
  RuntimeConfig c;
  std::string missing = (dir.path() / "nope.toml").string();
  std::string m = error_of([&] { c.load_toml_file(missing); }, CXLT_ERROR_IO);
  EXPECT_HAS(m, "cannot open config file '" + missing + "'");
  m = error_of([&] { c.load_toml_file(dir.path().string()); }, CXLT_ERROR_IO);
  EXPECT_HAS(m, dir.path().string());
}

TEST(ConfigErrors, EnvironmentWarningsAndErrors) {
  RuntimeConfig c;
  auto w = c.apply_environment_vars({{"CXLT_POLICY_ALPAH", "0.1"},      // typo: warned, with a suggestion
                                     {"CXLT_RUNTIME_NOTHING", "1"},     // a group prefix: warned
                                     {"CXLT_TIERS_0_BUGDET", "1GiB"},  // tier typo: warned
                                     {"CXLT_TOOL", "/x/cxltier"},       // non-config: silent
                                     {"CXLT_TEST_DATA", "/x"},           // non-config: silent
                                     {"CXLT_QEMU_CACHE", "/x"},          // non-config prefix: silent
                                     {"CXLT_SOMETHING_ELSE", "1"},       // not like a key: silent
                                     {"PATH", "/bin"}});
  ASSERT_EQ(w.size(), 3u);
  EXPECT_HAS(w[0], "CXLT_POLICY_ALPAH is not a configuration variable (did you mean 'CXLT_POLICY_ALPHA'?); ignored");
  EXPECT_HAS(w[1], "CXLT_RUNTIME_NOTHING is not a configuration variable");
  EXPECT_HAS(w[2], "did you mean 'CXLT_TIERS_0_BUDGET'?");
  EXPECT_EQ(c.lrfu.alpha, 0.05);
  EXPECT_HAS(error_of([&] { c.apply_environment_vars({{"CXLT_TIERS_9_BUDGET", "1GiB"}}); }),
             "environment variable CXLT_TIERS_9_BUDGET: tier index 9 is out of range");
  EXPECT_HAS(error_of([&] { c.apply_environment_vars({{"CXLT_POLICY_ALPHA", "0.1"}, {"cxlt_policy_alpha", "0.2"}}); }),
             "both set policy.alpha");
  // apply_environment() prints the warnings on stderr.
  EnvGuard g;
  g.set("CXLT_STORE_PATHS", "/tmp/x");
  testing::internal::CaptureStderr();
  c.apply_environment();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_HAS(err, "cxltier: warning: CXLT_STORE_PATHS is not a configuration variable (did you mean 'CXLT_STORE_PATH'?)");
  EXPECT_EQ(err.find("CXLT_TEST_DATA"), std::string::npos) << err;
}

// --- validate ----------------------------------------------------------------------------

TEST(ConfigValidate, NamesTheField) {
  struct Case {
    std::function<void(RuntimeConfig &)> change;
    const char *message;
  };
  const Case cases[] = {
      {[](RuntimeConfig &c) { c.geometry.layers = 0; }, "geometry.layers = 0 must be >= 1"},
      {[](RuntimeConfig &c) { c.geometry.head_dim = 1u << 31; c.geometry.layers = 1u << 31; c.geometry.kv_heads = 1u << 31; }, "geometry: "},
      {[](RuntimeConfig &c) { c.lrfu.alpha = 0; }, "policy.alpha = 0.0 is outside (0, 1]"},
      {[](RuntimeConfig &c) { c.lrfu.alpha = 1.5; }, "policy.alpha = 1.5 is outside (0, 1]"},
      {[](RuntimeConfig &c) { c.lrfu.beta = -1; }, "policy.beta = -1.0 must be a finite number >= 0"},
      {[](RuntimeConfig &c) { c.index_buckets = 3; }, "policy.index_buckets = 3 is not a power of two"},
      {[](RuntimeConfig &c) { c.index_buckets = 131072; }, "policy.index_buckets = 131072 is not a power of two in [1, 65536]"},
      {[](RuntimeConfig &c) { c.store_capacity = (1ull << 31) + 1; }, "store.capacity = 2147483649 is above 2^31"},
      {[](RuntimeConfig &c) { c.checkpoint_every_steps = 10; }, "store.checkpoint_every_steps = 10 needs store.path"},
      {[](RuntimeConfig &c) { c.migration_threads = 0; }, "runtime.migration_threads = 0 is outside [1, 64]"},
      {[](RuntimeConfig &c) { c.migration_threads = 65; }, "runtime.migration_threads = 65 is outside [1, 64]"},
      {[](RuntimeConfig &c) { c.migration_batch = 0; }, "runtime.migration_batch = 0 must be >= 1"},
      {[](RuntimeConfig &c) { c.extent_blocks = 0; }, "runtime.extent_blocks = 0 must be >= 1"},
      {[](RuntimeConfig &c) { c.low_watermark = 0; }, "runtime.low_watermark = 0.0 is outside (0, 1]"},
      {[](RuntimeConfig &c) { c.high_watermark = 1.5; }, "runtime.high_watermark = 1.5 is outside (0, 1]"},
      {[](RuntimeConfig &c) { c.low_watermark = 0.9; c.high_watermark = 0.8; }, "runtime.low_watermark = 0.9 is above runtime.high_watermark = 0.8"},
      {[](RuntimeConfig &c) { c.copy_kernel = "fast"; }, "runtime.copy_kernel = 'fast' is not a known copy kernel"},
      {[](RuntimeConfig &c) { c.tiers.resize(9, TierConfig{.kind = TierKind::dram}); }, "tiers: 9 tiers configured, at most 8"},
      {[](RuntimeConfig &c) { c.tiers.resize(2); c.tiers[0].kind = TierKind::hbm; }, "tiers.1: neither kind nor numa_nodes is set"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.kind = TierKind::cxl}, TierConfig{.kind = TierKind::cxl}}; }, "tiers.1.name = 'cxl' is already the name of tiers.0"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.name = "a", .kind = TierKind::cxl}, TierConfig{.name = "b", .kind = TierKind::cxl}}; }, "tiers.1.kind = cxl: tiers.0 already takes the topology's cxl tier"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.numa_nodes = {0, 1}}, TierConfig{.numa_nodes = {1}}}; }, "tiers.1.numa_nodes: node 1 already belongs to tiers.0"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.numa_nodes = {2, 2}}}; }, "tiers.0.numa_nodes lists a node twice"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.numa_nodes = {4096}}}; }, "tiers.0.numa_nodes: node 4096 is above 1023"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.kind = TierKind::hbm}, TierConfig{.kind = TierKind::dram, .budget_bytes = MiB}}; }, "tiers.1.budget = 1MiB is smaller than one block (5.00 MiB)"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.kind = TierKind::hbm, .backend = "gpu"}}; }, "tiers.0.backend = 'gpu' is not a known backend"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.kind = TierKind::hbm, .options = {{"memkind_kind", "x"}}}}; }, "tiers.0.memkind_kind = 'x' is not a known memkind kind"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.kind = TierKind::hbm, .layout = "strided"}}; }, "tiers.0.layout = 'strided' is not a known layout"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.kind = TierKind::hbm, .options = {{"pace_mib_s", "-1"}}}}; }, "tiers.0.pace_mib_s = -1.0 must be a finite number >= 0"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.kind = TierKind::hbm, .bandwidth_mib_s = 0.0}}; }, "tiers.0.bandwidth_mib_s = 0.0 must be > 0"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.kind = TierKind::hbm, .latency_ns = -2.0}}; }, "tiers.0.latency_ns = -2.0 must be > 0"},
      {[](RuntimeConfig &c) { c.tiers = {TierConfig{.name = "a b", .kind = TierKind::hbm}}; }, "tiers.0.name = 'a b' is not a tier name"},
      {[](RuntimeConfig &c) { c.topology = ""; }, "topology is empty"},
  };
  for (const Case &k : cases) {
    RuntimeConfig c;
    k.change(c);
    EXPECT_HAS(error_of([&] { c.validate(); }), k.message);
  }
}

TEST(ConfigValidate, BudgetAgainstTheBlockAndTheOrigin) {
  RuntimeConfig c;
  c.load_toml_string("[[tiers]]\nkind = \"hbm\"\nbudget = \"1MiB\"\n", "small.toml");
  std::string m = error_of([&] { c.validate(); });
  EXPECT_HAS(m, "tiers.0.budget = 1MiB is smaller than one block (5.00 MiB) (set by small.toml:3:10)");
  // A smaller block makes the same budget valid: the check is made against the geometry.
  c.set("geometry.layers", "8");
  EXPECT_NO_THROW(c.validate());
  // Exactly one block is enough.
  c.set("tiers.0.budget", std::to_string(c.geometry.bytes()));
  EXPECT_NO_THROW(c.validate());
  c.set("tiers.0.budget", std::to_string(c.geometry.bytes() - 1));
  EXPECT_HAS(error_of([&] { c.validate(); }), "(set by set())");
  // Budget 0 is the default budget, not a too-small one.
  c.set("tiers.0.budget", "0");
  EXPECT_NO_THROW(c.validate());
}

TEST(ConfigValidate, KindAndNodesTogetherAndSplitKinds) {
  RuntimeConfig c;
  c.load_toml_string(
      "[[tiers]]\nname = \"cxl-a\"\nkind = \"cxl\"\nnuma_nodes = [2]\n"
      "[[tiers]]\nname = \"cxl-b\"\nkind = \"cxl\"\nnuma_nodes = [3]\n");
  EXPECT_NO_THROW(c.validate());
}

TEST(ConfigValidate, BackendsThisBuildLacks) {
  RuntimeConfig c;
  c.set("tiers.0.kind", "hbm");
  c.set("tiers.0.backend", "memkind");
  // Either it validates (built with memkind) or the message says why not.
  try {
    c.validate();
  } catch (const Error &e) {
    EXPECT_HAS(e.what(), "tiers.0.backend = 'memkind': ");
  }
  c.set("tiers.0.backend", "null");
  EXPECT_NO_THROW(c.validate());
}

// --- paths -------------------------------------------------------------------------------

TEST(Config, RelativePathsInAFileAreRelativeToTheFile) {
  TempDir dir;
  fs::create_directories(dir.path() / "conf");
  std::string path = dir.write("conf/rel.toml", "topology = \"topo/x.xml\"\n[store]\npath = \"state/s.ckpt\"\n");
  RuntimeConfig c;
  c.load_toml_file(path);
  EXPECT_EQ(c.topology, (dir.path() / "conf/topo/x.xml").string());
  EXPECT_EQ(c.store_path, (dir.path() / "conf/state/s.ckpt").string());
  // Keywords and absolute paths stay as written; set() and variables take paths as given.
  std::string path2 = dir.write("conf/kw.toml", "topology = \"emulated\"\n[store]\npath = \"/abs/s.ckpt\"\n");
  c.load_toml_file(path2);
  EXPECT_EQ(c.topology, "emulated");
  EXPECT_EQ(c.store_path, "/abs/s.ckpt");
  c.set("store.path", "here.ckpt");
  EXPECT_EQ(c.store_path, "here.ckpt");
}

// --- default budgets ---------------------------------------------------------------------

TEST(Config, DefaultTierBudgets) {
  cxltier::TierDesc t;
  t.kind = TierKind::hbm;
  EXPECT_EQ(cxltier::default_tier_budget(t, true), 256 * MiB);
  t.kind = TierKind::dram;
  EXPECT_EQ(cxltier::default_tier_budget(t, true), 512 * MiB);
  t.kind = TierKind::cxl;
  EXPECT_EQ(cxltier::default_tier_budget(t, true), 1 * GiB);
  t.kind = TierKind::nvm;
  EXPECT_EQ(cxltier::default_tier_budget(t, true), 512 * MiB);
  // The tier's own flag counts as emulated too.
  t.kind = TierKind::cxl;
  t.capacity_bytes = 512 * GiB;
  t.emulated = true;
  EXPECT_EQ(cxltier::default_tier_budget(t, false), 1 * GiB);
  // Real tiers: 25 % of capacity, whole MiB, at most 64 GiB.
  t.emulated = false;
  t.capacity_bytes = 16 * GiB + 3;
  EXPECT_EQ(cxltier::default_tier_budget(t, false), 4 * GiB);
  t.capacity_bytes = 10 * MiB + 1000;  // 2.5 MiB + 250 B -> 2 MiB
  EXPECT_EQ(cxltier::default_tier_budget(t, false), 2 * MiB);
  t.capacity_bytes = 1024 * GiB;
  EXPECT_EQ(cxltier::default_tier_budget(t, false), 64 * GiB);
  // Unknown capacity: the emulated figure of the kind.
  t.capacity_bytes = 0;
  EXPECT_EQ(cxltier::default_tier_budget(t, false), 1 * GiB);
  // The three emulated defaults fit a 24 GiB machine with plenty to spare.
  EXPECT_LE(256 * MiB + 512 * MiB + 1 * GiB, 2 * GiB);
}

// --- the example file and the docs ----------------------------------------------------------

std::string source_root() {
  const char *r = std::getenv("CXLT_SOURCE_ROOT");
  return r ? r : "";
}

TEST(Config, ExampleThreeTierFileLoadsAndValidates) {
  if (source_root().empty()) GTEST_SKIP() << "CXLT_SOURCE_ROOT is not set (run through meson test)";
  RuntimeConfig c;
  c.load_toml_file(source_root() + "/examples/three-tier.toml");
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.topology, "emulated");
  ASSERT_EQ(c.tiers.size(), 3u);
  EXPECT_EQ(c.tiers[0].kind, TierKind::hbm);
  EXPECT_EQ(c.tiers[0].budget_bytes, 256 * MiB);
  EXPECT_EQ(c.tiers[1].kind, TierKind::dram);
  EXPECT_EQ(c.tiers[1].budget_bytes, 512 * MiB);
  EXPECT_EQ(c.tiers[2].kind, TierKind::cxl);
  EXPECT_EQ(c.tiers[2].budget_bytes, 1 * GiB);
}

TEST(Config, DocsDescribeEveryKeyAndVariable) {
  if (source_root().empty()) GTEST_SKIP() << "CXLT_SOURCE_ROOT is not set (run through meson test)";
  std::ifstream in(source_root() + "/docs/configuration.md");
  ASSERT_TRUE(in) << "docs/configuration.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string doc = ss.str();
  for (const std::string &k : RuntimeConfig::keys()) EXPECT_HAS(doc, "`" + k + "`");
  for (const char *v : {"CXLT_TOOL", "CXLT_TEST_DATA", "CXLT_POLICY_ALPHA", "CXLT_TIERS_0_BUDGET", "CXLT_TOPOLOGY"})
    EXPECT_HAS(doc, v);
}

// --- C ABI -------------------------------------------------------------------------------

TEST(ConfigCApi, CreateSetValidateDumpDestroy) {
  cxlt_config_t *h = nullptr;
  ASSERT_EQ(cxlt_config_create(&h), CXLT_OK);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(cxlt_config_validate(h), CXLT_OK);
  EXPECT_EQ(cxlt_config_set(h, "policy.alpha", "0.2"), CXLT_OK);
  EXPECT_EQ(cxlt_config_set(h, "policy.alpah", "0.2"), CXLT_ERROR_CONFIG);
  EXPECT_HAS(cxlt_last_error(), "did you mean 'policy.alpha'");
  EXPECT_EQ(cxlt_config_set(h, "policy.alpha", "2"), CXLT_ERROR_CONFIG);
  EXPECT_HAS(cxlt_last_error(), "policy.alpha = 2.0 is outside (0, 1]");
  EXPECT_EQ(cxlt_config_set(h, "tiers.0.kind", "hbm"), CXLT_OK);
  EXPECT_EQ(cxlt_config_set(h, "tiers.0.budget", "1KiB"), CXLT_OK);
  EXPECT_EQ(cxlt_config_validate(h), CXLT_ERROR_CONFIG);
  EXPECT_HAS(cxlt_last_error(), "tiers.0.budget = 1KiB is smaller than one block");
  EXPECT_EQ(cxlt_config_set(h, "tiers.0.budget", "256MiB"), CXLT_OK);
  EXPECT_EQ(cxlt_config_validate(h), CXLT_OK);

  // Dump: the size query, a short buffer, an exact one.
  size_t needed = 0;
  EXPECT_EQ(cxlt_config_dump(h, nullptr, 0, &needed), CXLT_ERROR_INVALID_ARGUMENT);
  ASSERT_GT(needed, 100u);
  std::vector<char> small(needed - 1, 'x');
  size_t needed2 = 0;
  EXPECT_EQ(cxlt_config_dump(h, small.data(), small.size(), &needed2), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(needed2, needed);
  EXPECT_EQ(small[0], 'x');  // nothing written
  EXPECT_HAS(cxlt_last_error(), "are needed");
  std::vector<char> buf(needed, 'x');
  size_t needed3 = 0;
  ASSERT_EQ(cxlt_config_dump(h, buf.data(), buf.size(), &needed3), CXLT_OK);
  EXPECT_EQ(needed3, needed);
  EXPECT_EQ(buf[needed - 1], '\0');
  std::string text(buf.data());
  EXPECT_EQ(text.size() + 1, needed);
  EXPECT_HAS(text, "alpha = 0.2");
  EXPECT_HAS(text, "budget = \"256MiB\"");
  EXPECT_EQ(cxlt_config_dump(h, buf.data(), buf.size(), nullptr), CXLT_OK);  // needed is optional
  EXPECT_EQ(cxlt_config_dump(h, nullptr, 0, nullptr), CXLT_ERROR_INVALID_ARGUMENT);
  RuntimeConfig back;
  EXPECT_NO_THROW(back.load_toml_string(text));
  EXPECT_EQ(back.lrfu.alpha, 0.2);
  cxlt_config_destroy(h);
  cxlt_config_destroy(nullptr);
}

TEST(ConfigCApi, CreateAppliesTheEnvironmentBelowSet) {
  TempDir dir;
  std::string file = dir.write("f.toml", "[policy]\nalpha = 0.5\nbeta = 0.5\n[runtime]\nmigration_threads = 3\n");
  EnvGuard g;
  g.set("CXLT_POLICY_ALPHA", "0.25");
  g.set("CXLT_RUNTIME_MIGRATION_THREADS", "6");
  cxlt_config_t *h = nullptr;
  ASSERT_EQ(cxlt_config_create(&h), CXLT_OK);
  EXPECT_EQ(h->cfg.lrfu.alpha, 0.25);
  EXPECT_EQ(cxlt_config_set(h, "runtime.migration_threads", "9"), CXLT_OK);
  EXPECT_EQ(cxlt_config_load_file(h, file.c_str()), CXLT_OK);
  EXPECT_EQ(h->cfg.lrfu.alpha, 0.25);       // environment over file
  EXPECT_EQ(h->cfg.lrfu.beta, 0.5);         // file over default
  EXPECT_EQ(h->cfg.migration_threads, 9u);  // set over environment and file
  cxlt_config_destroy(h);
  g.set("CXLT_POLICY_BETA", "-2");
  h = nullptr;
  EXPECT_EQ(cxlt_config_create(&h), CXLT_ERROR_CONFIG);
  EXPECT_EQ(h, nullptr);
  EXPECT_HAS(cxlt_last_error(), "environment variable CXLT_POLICY_BETA=-2: policy.beta = -2.0 must be >= 0");
}

TEST(ConfigCApi, LoadFileAndNullArguments) {
  TempDir dir;
  std::string good = dir.write("g.toml", "[policy]\nbeta = 0.5\n");
  std::string bad = dir.write("b.toml", "[policy]\nbeta = -1.0\n");
  cxlt_config_t *h = nullptr;
  ASSERT_EQ(cxlt_config_create(&h), CXLT_OK);
  EXPECT_EQ(cxlt_config_load_file(h, good.c_str()), CXLT_OK);
  EXPECT_EQ(cxlt_config_load_file(h, bad.c_str()), CXLT_ERROR_CONFIG);
  EXPECT_HAS(cxlt_last_error(), bad + ":2:8: policy.beta = -1.0 must be >= 0");
  EXPECT_EQ(cxlt_config_load_file(h, (dir.path() / "none.toml").c_str()), CXLT_ERROR_IO);
  EXPECT_EQ(cxlt_config_create(nullptr), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cxlt_config_load_file(nullptr, good.c_str()), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cxlt_config_load_file(h, nullptr), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cxlt_config_set(nullptr, "policy.alpha", "0.1"), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cxlt_config_set(h, nullptr, "0.1"), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cxlt_config_set(h, "policy.alpha", nullptr), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_HAS(cxlt_last_error(), "value is NULL");
  EXPECT_EQ(cxlt_config_validate(nullptr), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cxlt_config_dump(nullptr, nullptr, 0, nullptr), CXLT_ERROR_INVALID_ARGUMENT);
  size_t needed = 0;
  char buf[4096];
  ASSERT_EQ(cxlt_config_dump(h, buf, sizeof buf, &needed), CXLT_OK);
  EXPECT_HAS(std::string(buf), "beta = 0.5");
  cxlt_config_destroy(h);
}

}  // namespace
