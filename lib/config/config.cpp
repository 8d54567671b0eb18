// SPDX-License-Identifier: Apache-2.0
// RuntimeConfig: one table of keys (keys.hpp) drives TOML loading (toml.cpp), set(), CXLT_*
// environment variables (environment.cpp), to_toml() and keys(), so that they can never
// disagree. Every change is made on a copy that replaces the configuration only on success.
// This file: the names of the enums, the default tier names and budgets, set() and keys().
#include "lib/config/keys.hpp"

#include <algorithm>

namespace cxltier {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

}  // namespace

// --- public helpers -------------------------------------------------------------------------

const char *promotion_rule_name(PromotionRule r) noexcept {
  switch (r) {
    case PromotionRule::never: return "never";
    case PromotionRule::score_above_victim: return "score-above-victim";
    case PromotionRule::always: return "always";
  }
  return "?";
}

std::optional<PromotionRule> parse_promotion_rule(std::string_view s) noexcept {
  for (PromotionRule r : {PromotionRule::never, PromotionRule::score_above_victim, PromotionRule::always})
    if (text::iequal(s, promotion_rule_name(r))) return r;
  return std::nullopt;
}

const char *huge_pages_name(HugePages h) noexcept {
  switch (h) {
    case HugePages::none: return "none";
    case HugePages::thp: return "thp";
    case HugePages::hugetlb: return "hugetlb";
  }
  return "?";
}

std::optional<HugePages> parse_huge_pages(std::string_view s) noexcept {
  for (HugePages h : {HugePages::none, HugePages::thp, HugePages::hugetlb})
    if (text::iequal(s, huge_pages_name(h))) return h;
  return std::nullopt;
}

std::string tier_config_name(const TierConfig &t, size_t index) {
  if (!t.name.empty()) return t.name;
  if (t.kind) return tier_kind_name(*t.kind);
  if (!t.numa_nodes.empty()) {
    std::string s = "node";
    for (size_t i = 0; i < t.numa_nodes.size(); ++i) s += (i ? "+" : "") + std::to_string(t.numa_nodes[i]);
    return s;
  }
  return "tier" + std::to_string(index);
}

uint64_t default_tier_budget(const TierDesc &tier, bool emulated) {
  // Emulated tiers all live in host memory: together they must leave room on a 24 GiB machine
  // for the engine, the OS and the score store (256 MiB + 512 MiB + 1 GiB = 1.75 GiB). A real
  // tier whose capacity is unknown gets the same figures.
  if (emulated || tier.emulated || tier.capacity_bytes == 0) {
    switch (tier.kind) {
      case TierKind::hbm: return 256 * kMiB;
      case TierKind::dram: return 512 * kMiB;
      case TierKind::cxl: return 1 * kGiB;
      default: return 512 * kMiB;
    }
  }
  // A quarter of a real tier: the rest stays for the engine and the other processes sharing
  // the node. Whole MiB, at most 64 GiB.
  uint64_t q = tier.capacity_bytes / 4;
  q -= q % kMiB;
  return std::min<uint64_t>(q, 64 * kGiB);
}

// --- RuntimeConfig --------------------------------------------------------------------------

void RuntimeConfig::set(const std::string &key, const std::string &value) {
  RuntimeConfig next = *this;
  cfg::with_prefix("", [&] { cfg::apply_value(next, cfg::resolve_key(key), value, ConfigLayer::api, "set()"); });
  *this = std::move(next);
}

RuntimeConfig RuntimeConfig::from_sources(const std::string &path) {
  RuntimeConfig c;
  if (!path.empty()) c.load_toml_file(path);
  c.apply_environment();
  return c;
}

std::vector<std::string> RuntimeConfig::keys() {
  std::vector<std::string> out = cfg::global_key_names();
  for (const cfg::Field &f : cfg::tier_fields()) out.push_back(std::string("tiers.<n>.") + f.name);
  return out;
}

}  // namespace cxltier
