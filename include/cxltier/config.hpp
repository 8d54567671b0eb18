// SPDX-License-Identifier: Apache-2.0
// The runtime's configuration: block geometry, tiers and their budgets, the policy and its
// parameters, the topology source, the score store, migration and watermarks.
//
// Precedence, lowest first: built-in defaults < a TOML file < CXLT_* environment variables <
// API calls (RuntimeConfig::set, cxlt_config_set). Every key is documented in
// docs/configuration.md with its unit, default and what it trades.
#pragma once

#include <cxltier/cxltier.h>
#include <cxltier/key.hpp>
#include <cxltier/policy.hpp>
#include <cxltier/topology.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cxltier {

enum class PromotionRule : uint8_t {
  never,               // blocks only move down (demotion) or out (drop)
  score_above_victim,  // an accessed block moves up when it would not be the next victim there
  always,              // every accessed block outside the fastest tier moves up when room can be made
};
CXLT_API const char *promotion_rule_name(PromotionRule r) noexcept;  // "never", "score-above-victim", "always"
CXLT_API std::optional<PromotionRule> parse_promotion_rule(std::string_view s) noexcept;

enum class HugePages : uint8_t { none, thp, hugetlb };  // hugetlb: explicit 2 MiB pages, then THP, then 4 KiB
CXLT_API const char *huge_pages_name(HugePages h) noexcept;  // "none", "thp", "hugetlb"
CXLT_API std::optional<HugePages> parse_huge_pages(std::string_view s) noexcept;

// Where a key's value came from. A value from a higher layer is never overwritten by a lower
// one, whatever the order of the calls: defaults < file < environment < api (set()).
enum class ConfigLayer : uint8_t { defaults = 0, file = 1, environment = 2, api = 3 };
struct ConfigOrigin {
  ConfigLayer layer = ConfigLayer::defaults;
  std::string where;  // "three-tier.toml:12:1", "CXLT_POLICY_ALPHA", "set()"
};

struct TierConfig {
  std::string name;                      // "hbm", "dram", "cxl", ... (default: the kind's name)
  std::optional<TierKind> kind;          // pick the topology tier of this kind
  std::vector<unsigned> numa_nodes;      // or these NUMA nodes (OS indexes)
  uint64_t budget_bytes = 0;             // bytes this tier may hold; 0: the default budget
  std::string backend = "auto";          // auto, numa, memkind, emulated, null, faulty, cuda
  // Backend option keys (tiers.N.<key> that a backend declares, such as memkind_kind or
  // pace_mib_s; docs/configuration.md): key -> value as text. Absent: the backend's default.
  std::map<std::string, std::string> options;
  std::string layout = "contiguous";     // cuda backend: contiguous, or per-layer (docs/gpu.md)
  std::optional<double> bandwidth_mib_s; // override the discovered value (MiB/s, higher is better)
  std::optional<double> latency_ns;      // override the discovered value (ns, lower is better)
};

// [remote]: a Redis Cluster below the last local tier, shared by a fleet of servers
// (docs/remote.md). Blocks dropped from the last local tier are written out; a block resident
// nowhere is fetched back on admission before it counts as a miss.
struct RemoteConfig {
  bool enabled = false;
  std::vector<std::string> seeds;  // "host:port" of any cluster nodes; the rest is discovered
  std::string ns;                  // key namespace used verbatim; empty: model/geometry/dtype/tp rank
  std::string model;               // model fingerprint (a name, a hash of the weights' files)
  std::string dtype;               // element type ("bf16", "fp8"); empty: "e<bytes_per_element>"
  uint32_t tp_rank = 0;            // tensor-parallel rank whose KV shard the blocks hold
  uint32_t deadline_ms = 100;      // every remote operation ends (done or failed) within this
  double write_threshold = 0.0;    // write out only blocks whose LRFU score is at least this
  uint32_t concurrency = 2;        // write-out threads (one connection per node each)
  uint32_t max_pending = 16;       // write-outs queued or in flight; beyond, drops are not written
  std::string user;                // AUTH user (Redis 6 ACL); empty: the default user
  std::string password_file;       // AUTH password, first line of this file; empty: no AUTH
};

// The tier's effective name: `name` if set, else the kind's name ("cxl"), else "node2" /
// "node2+3" from numa_nodes, else "tier<index>".
CXLT_API std::string tier_config_name(const TierConfig &t, size_t index);

struct CXLT_API RuntimeConfig {
  BlockGeometry geometry;
  std::string topology = "auto";  // auto, this-system, emulated, or an hwloc XML path
  std::vector<TierConfig> tiers;  // empty: every tier of the topology, default budgets

  // [policy]
  PolicyKind policy = PolicyKind::lrfu;
  LrfuParams lrfu;
  bool persist = true;            // keep policy state across eviction and restore it
  unsigned index_buckets = 256;
  bool audit = false;             // check every LRFU victim against a full scan (slow; debugging)

  // [store]
  uint64_t store_capacity = 1u << 20;  // policy states kept (resident or not); 0: unbounded
  std::string store_path;              // checkpoint file; empty: no persistence across restarts
  uint64_t checkpoint_every_steps = 0; // also checkpoint every N decode steps (0: only at close / on demand)

  // [runtime]
  unsigned migration_threads = 2;
  unsigned migration_batch = 8;        // blocks one background pass moves per tier at most
  double high_watermark = 0.95;        // background demotion starts above this fraction of a budget
  double low_watermark = 0.90;         // and stops at or below this one
  PromotionRule promotion = PromotionRule::score_above_victim;
  std::string copy_kernel = "auto";    // auto, memcpy, nt (non-temporal stores)
  HugePages huge_pages = HugePages::hugetlb;
  bool verify_placement = true;        // numa/memkind: check every page's node after first touch
  bool reserve_memory = false;         // map every tier's whole budget at open
  uint32_t extent_blocks = 16;         // blocks per backend extent (grow granularity)
  bool verify_copies = false;          // checksum each block before and after every copy
  bool state_huge_pages = true;        // the per-state arrays (store, LRFU records) ask for THP

  // [remote]
  RemoteConfig remote;

  // Key ("policy.alpha", "tiers.0.budget") -> where its value came from; absent: the default.
  // Maintained by load_toml_*, apply_environment* and set(); assigning a field directly leaves
  // it alone (such a value then counts as a default and a file or variable may replace it).
  std::map<std::string, ConfigOrigin> origins;
  bool synchronous = false;            // no background threads: every move happens inside the
                                       // call that needs it, promotions included (trace replay:
                                       // deterministic results); watermarks are not used

  // Merge a TOML file. Throws Error(CXLT_ERROR_IO) for an unreadable file and
  // Error(CXLT_ERROR_CONFIG) naming the file, line, key and reason for anything else.
  void load_toml_file(const std::string &path);
  void load_toml_string(const std::string &text, const std::string &origin = "<string>");
  // Apply CXLT_<KEY> environment variables (key upper-cased, dots to underscores:
  // CXLT_POLICY_ALPHA, CXLT_TIERS_0_BUDGET). Throws Error(CXLT_ERROR_CONFIG) naming the variable.
  // Unknown CXLT_ variables that look like configuration keys are warned about on stderr.
  void apply_environment();
  // The same over an explicit list of (name, value) pairs; returns the warnings instead of
  // printing them.
  std::vector<std::string> apply_environment_vars(const std::vector<std::pair<std::string, std::string>> &vars);
  // Set one key from text ("policy.alpha" = "0.05", "tiers.1.budget" = "4GiB").
  void set(const std::string &key, const std::string &value);
  // Check every field that can be checked without the machine (ranges, names, watermark order).
  // Throws Error(CXLT_ERROR_CONFIG) naming the field and the bad value.
  void validate() const;
  // The effective configuration as TOML (every key, defaults included).
  std::string to_toml() const;
  // Every key this configuration understands (tiers.N.* shown once as tiers.<n>.*).
  static std::vector<std::string> keys();
  // The environment variable of a key: "policy.alpha" -> "CXLT_POLICY_ALPHA".
  static std::string env_name(std::string_view key);
  // Defaults, then the TOML file `path` (none when empty), then the environment: what
  // cxlt_runtime_open(path) and `cxltier run --config` start from. Not validated.
  static RuntimeConfig from_sources(const std::string &path);
};

// Defaults for `cxltier run` and the runtime with no tiers configured: budgets that fit a
// 24 GiB machine when tiers are emulated on host memory.
CXLT_API uint64_t default_tier_budget(const TierDesc &tier, bool emulated);

}  // namespace cxltier
