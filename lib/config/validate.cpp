// SPDX-License-Identifier: Apache-2.0
// RuntimeConfig::validate(): the checks across keys (ranges, names and nodes unique per tier,
// budgets that hold a block, a known backend), each naming the key and where it was set.
#include "lib/config/keys.hpp"

#include <cxltier/tools/units.hpp>

#include "lib/memory/copy.hpp"
#include "lib/memory/tier_ops.hpp"
#include "lib/runtime/remote.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace cxltier {

using namespace cfg;

namespace {

// One backend option of tier prefix `p` ("tiers.0."): a key some backend declares, with a value
// it accepts (TierOption). `bad(key, message...)` fails naming the key and where it was set.
template <class Bad>
void check_option(const std::string &p, const std::string &key, const std::string &value, const Bad &bad) {
  const Field *f = find_tier_field(key);
  if (f == nullptr || f->option == nullptr)
    fail(CXLT_ERROR_CONFIG, "unknown key '", p, key, "' in ", p, "options", did_you_mean(key, tier_field_names()),
         " (tier keys: ", tier_keys_listed(), ")");
  const TierOption &o = *f->option;
  if (o.type == TierOptionType::number) {
    double x = 0;
    try {
      x = parse_double(value, p + key);
    } catch (const Error &e) {
      fail(CXLT_ERROR_CONFIG, e.what());
    }
    if (const char *why = o.check ? o.check(x) : nullptr) bad(p + key, p, key, " = ", fmt_double(x), " ", why);
    if (!(x >= o.min_value)) bad(p + key, p, key, " = ", fmt_double(x), " must be >= ", o.min_value);
  } else if (o.choices) {
    const char *const *c = o.choices;
    while (*c && value != *c) ++c;
    if (*c == nullptr) bad(p + key, p, key, " = '", value, "' is not a known ", o.noun);
  }
}

}  // namespace

void RuntimeConfig::validate() const {
  auto from = [&](const std::string &key) -> std::string {
    auto it = origins.find(key);
    if (it == origins.end() || it->second.layer == ConfigLayer::defaults) return "";
    return " (set by " + it->second.where + ")";
  };
  auto bad = [&](const std::string &key, const auto &...msg) { fail(CXLT_ERROR_CONFIG, msg..., from(key)); };

  // Geometry: every field >= 1 and the block size fits 64 bits.
  const std::pair<const char *, uint32_t> gfields[] = {
      {"geometry.layers", geometry.layers}, {"geometry.kv_heads", geometry.kv_heads},
      {"geometry.head_dim", geometry.head_dim}, {"geometry.bytes_per_element", geometry.bytes_per_element},
      {"geometry.tokens_per_block", geometry.tokens_per_block}};
  for (const auto &[k, v] : gfields)
    if (v == 0) bad(k, k, " = 0 must be >= 1");
  uint64_t block = 0;
  try {
    block = geometry.bytes();
  } catch (const Error &e) {
    fail(CXLT_ERROR_CONFIG, "geometry: ", e.what());
  }

  // Policy.
  if (!(lrfu.alpha > 0.0 && lrfu.alpha <= 1.0))
    bad("policy.alpha", "policy.alpha = ", fmt_double(lrfu.alpha), " is outside (0, 1]");
  if (!(lrfu.beta >= 0.0) || !std::isfinite(lrfu.beta))
    bad("policy.beta", "policy.beta = ", fmt_double(lrfu.beta), " must be a finite number >= 0");
  try {
    lrfu.validate();
  } catch (const Error &e) {
    fail(CXLT_ERROR_CONFIG, "policy: ", e.what());
  }
  if (index_buckets == 0 || index_buckets > 65536 || (index_buckets & (index_buckets - 1)) != 0)
    bad("policy.index_buckets", "policy.index_buckets = ", index_buckets, " is not a power of two in [1, 65536]");

  // Store.
  if (store_capacity > (1ull << 31))
    bad("store.capacity", "store.capacity = ", store_capacity, " is above 2^31 (2147483648) states");
  if (checkpoint_every_steps > 0 && store_path.empty())
    bad("store.checkpoint_every_steps", "store.checkpoint_every_steps = ", checkpoint_every_steps,
        " needs store.path (the file to checkpoint into)");

  // Runtime.
  if (migration_threads < 1 || migration_threads > 64)
    bad("runtime.migration_threads", "runtime.migration_threads = ", migration_threads, " is outside [1, 64]");
  if (migration_batch < 1) bad("runtime.migration_batch", "runtime.migration_batch = 0 must be >= 1");
  if (!(low_watermark > 0.0 && low_watermark <= 1.0))
    bad("runtime.low_watermark", "runtime.low_watermark = ", fmt_double(low_watermark), " is outside (0, 1]");
  if (!(high_watermark > 0.0 && high_watermark <= 1.0))
    bad("runtime.high_watermark", "runtime.high_watermark = ", fmt_double(high_watermark), " is outside (0, 1]");
  if (low_watermark > high_watermark)
    fail(CXLT_ERROR_CONFIG, "runtime.low_watermark = ", fmt_double(low_watermark),
         " is above runtime.high_watermark = ", fmt_double(high_watermark), " (need 0 < low <= high <= 1)",
         from("runtime.low_watermark"), from("runtime.high_watermark"));
  if (extent_blocks < 1) bad("runtime.extent_blocks", "runtime.extent_blocks = 0 must be >= 1");
  uint64_t extent_bytes = 0;
  if (__builtin_mul_overflow(block, uint64_t{extent_blocks}, &extent_bytes))
    bad("runtime.extent_blocks", "runtime.extent_blocks = ", extent_blocks, " times the block size (",
        format_bytes(block), ") overflows 64 bits");
  if (copy_kernel != "auto" && !parse_copy_kernel(copy_kernel))
    bad("runtime.copy_kernel", "runtime.copy_kernel = '", copy_kernel, "' is not a known copy kernel");
  if (topology.empty()) bad("topology", "topology is empty (use auto, this-system, emulated or an XML file)");

  // Remote.
  if (remote.enabled && remote.seeds.empty())
    bad("remote.seeds", "remote.enabled = true but remote.seeds is empty: name at least one cluster server (HOST:PORT)");
  if (remote.enabled && remote.ns.empty()) {
    RuntimeConfig probe;
    probe.geometry = geometry;
    probe.remote = remote;
    std::string ns = remote_namespace(probe);
    if (std::string why = remote::check_namespace(ns); !why.empty())
      fail(CXLT_ERROR_CONFIG, "the remote namespace '", ns, "' derived from remote.model and remote.dtype ", why,
           from("remote.model"), from("remote.dtype"));
  }

  // Tiers: each says what it is, names and nodes are unique, budgets hold a block.
  if (tiers.size() > kMaxTiers)
    fail(CXLT_ERROR_CONFIG, "tiers: ", tiers.size(), " tiers configured, at most ", kMaxTiers, " (CXLT_MAX_TIERS)");
  std::map<std::string, size_t> names;
  std::map<unsigned, size_t> node_owner;
  std::map<TierKind, size_t> kind_owner;
  for (size_t i = 0; i < tiers.size(); ++i) {
    const TierConfig &t = tiers[i];
    std::string p = "tiers." + std::to_string(i) + ".";
    if (!t.kind && t.numa_nodes.empty()) {
      std::string set_by;
      for (const Field &f : tier_fields())
        if (set_by.empty()) set_by = from(p + f.name);
      fail(CXLT_ERROR_CONFIG, "tiers.", i, ": neither kind nor numa_nodes is set; a tier must say what it is "
           "(kind = \"cxl\" picks the topology's tier of that kind, numa_nodes = [2] names the nodes)", set_by);
    }
    std::string name = tier_config_name(t, i);
    if (!valid_tier_name(name))
      bad(p + "name", p, "name = '", name, "' is not a tier name (at most 31 of A-Z a-z 0-9 _ - + .)");
    if (auto [it, ok] = names.try_emplace(name, i); !ok)
      bad(p + "name", p, "name = '", name, "' is already the name of tiers.", it->second,
          " (tier names must be unique; set name to tell them apart)");
    for (unsigned n : t.numa_nodes) {
      if (n > kMaxNumaNode) bad(p + "numa_nodes", p, "numa_nodes: node ", n, " is above ", kMaxNumaNode);
      if (auto [it, ok] = node_owner.try_emplace(n, i); !ok && it->second != i)
        bad(p + "numa_nodes", p, "numa_nodes: node ", n, " already belongs to tiers.", it->second);
    }
    std::vector<unsigned> sorted = t.numa_nodes;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      bad(p + "numa_nodes", p, "numa_nodes lists a node twice");
    if (t.kind && t.numa_nodes.empty()) {
      if (auto [it, ok] = kind_owner.try_emplace(*t.kind, i); !ok)
        bad(p + "kind", p, "kind = ", tier_kind_name(*t.kind), ": tiers.", it->second, " already takes the topology's ",
            tier_kind_name(*t.kind), " tier (give numa_nodes to split a kind into several tiers)");
    }
    if (t.budget_bytes != 0 && t.budget_bytes < block)
      bad(p + "budget", p, "budget = ", fmt_size(t.budget_bytes), " is smaller than one block (", format_bytes(block), ")");
    if (const std::vector<std::string> &choices = backend_choices();
        std::find(choices.begin(), choices.end(), t.backend) == choices.end()) {
      std::string known;
      for (const std::string &n : choices) known += (known.empty() ? "" : ", ") + n;
      bad(p + "backend", p, "backend = '", t.backend, "' is not a known backend (known: ", known, ")");
    }
    if (t.backend != "auto") {
      std::string why;
      if (tier_ops_find(t.backend, &why) == nullptr) bad(p + "backend", p, "backend = '", t.backend, "': ", why);
    }
    for (const auto &[key, value] : t.options) check_option(p, key, value, bad);
    if (std::find(std::begin(kLayouts), std::end(kLayouts), t.layout) == std::end(kLayouts))
      bad(p + "layout", p, "layout = '", t.layout, "' is not a known layout (known: contiguous, per-layer)");
    if (t.bandwidth_mib_s && !(*t.bandwidth_mib_s > 0.0 && std::isfinite(*t.bandwidth_mib_s)))
      bad(p + "bandwidth_mib_s", p, "bandwidth_mib_s = ", fmt_double(*t.bandwidth_mib_s), " must be > 0");
    if (t.latency_ns && !(*t.latency_ns > 0.0 && std::isfinite(*t.latency_ns)))
      bad(p + "latency_ns", p, "latency_ns = ", fmt_double(*t.latency_ns), " must be > 0");
  }
}

}  // namespace cxltier
