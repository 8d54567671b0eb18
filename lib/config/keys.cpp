// SPDX-License-Identifier: Apache-2.0
// The key table (keys.hpp): every key's name, type, documentation, parser and printer, and the
// lookup of a key by its name. Every value goes through the parsers of units.hpp.
#include "lib/config/keys.hpp"

#include <cxltier/tools/units.hpp>

#include "lib/memory/copy.hpp"
#include "lib/memory/tier_ops.hpp"
#include "lib/runtime/remote.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>

namespace cxltier::cfg {

// Shortest text that reads back as the same double, always with a '.' or an exponent so that
// TOML sees a float ("1.0", not "1").
std::string fmt_double(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s = ec == std::errc() ? std::string(buf, p) : std::to_string(v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

// A byte count as the largest binary unit that divides it ("4GiB", "1536MiB"), else bytes.
std::string fmt_size(uint64_t bytes) {
  if (bytes == 0) return "0";
  static constexpr struct { uint64_t mult; const char *name; } units[] = {
      {1ull << 40, "TiB"}, {1ull << 30, "GiB"}, {1ull << 20, "MiB"}, {1ull << 10, "KiB"}};
  for (const auto &u : units)
    if (bytes % u.mult == 0) return std::to_string(bytes / u.mult) + u.name;
  return std::to_string(bytes);
}

std::string toml_quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

namespace {

// --- value parsers: range checks name the key and the value ---------------------------------

uint64_t get_uint(std::string_view v, const std::string &what, uint64_t lo, uint64_t hi) {
  uint64_t x = parse_u64(v, what);
  if (x < lo || x > hi) fail(CXLT_ERROR_CONFIG, what, " = ", x, " is outside [", lo, ", ", hi, "]");
  return x;
}

bool get_bool(std::string_view v, const std::string &what) { return parse_bool(v, what); }

double get_fraction(std::string_view v, const std::string &what) {  // (0, 1]
  double x = parse_double(v, what);
  if (!(x > 0.0 && x <= 1.0)) fail(CXLT_ERROR_CONFIG, what, " = ", fmt_double(x), " is outside (0, 1]");
  return x;
}

double get_nonnegative(std::string_view v, const std::string &what) {
  double x = parse_double(v, what);
  if (!(x >= 0.0)) fail(CXLT_ERROR_CONFIG, what, " = ", fmt_double(x), " must be >= 0");
  return x;
}

std::optional<double> get_positive_or_unset(std::string_view v, const std::string &what) {
  if (trim(v).empty()) return std::nullopt;
  double x = parse_double(v, what);
  if (!(x > 0.0)) fail(CXLT_ERROR_CONFIG, what, " = ", fmt_double(x), " must be > 0 (or empty: discovered)");
  return x;
}

std::string opt_double_literal(const std::optional<double> &v) { return v ? fmt_double(*v) : std::string(); }

template <class Names>  // an array of const char *, or a vector of strings
std::string pick(std::string_view v, const Names &names, const std::string &what, const char *noun) {
  std::string t(trim(v));
  for (const auto &n : names)
    if (t == n) return t;
  std::string known;
  std::vector<std::string> cands;
  for (const auto &n : names) {
    known += (known.empty() ? "" : ", ") + std::string(n);
    cands.emplace_back(n);
  }
  fail(CXLT_ERROR_CONFIG, what, " = '", t, "' is not a known ", noun, did_you_mean(t, cands), " (known: ", known, ")");
}

}  // namespace

// "auto" (lib/memory/choose.hpp), then every backend a tier may name (tiers/registry.cpp).
const std::vector<std::string> &backend_choices() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v{"auto"};
    for (const std::string &n : tier_backend_choices()) v.push_back(n);
    return v;
  }();
  return names;
}

bool valid_tier_name(std::string_view s) {
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-' || c == '+' || c == '.'))
      return false;
  return s.size() <= 31;
}

namespace {

#define CXLT_SET [](RuntimeConfig & c, TierConfig * t, std::string_view v, const std::string &what)
#define CXLT_GET [](const RuntimeConfig &c, const TierConfig *t) -> std::string

const Field kGlobalFieldTable[] = {
    {"topology", Type::text, true, "auto, this-system, emulated, or an hwloc XML file",
     CXLT_SET {
       (void)t, (void)what;
       std::string s(trim(v));
       c.topology = s.empty() ? "auto" : s;
     },
     CXLT_GET { (void)t; return toml_quote(c.topology); }},

    {"geometry.layers", Type::uint, false, "transformer layers",
     CXLT_SET { (void)t; c.geometry.layers = static_cast<uint32_t>(get_uint(v, what, 1, UINT32_MAX)); },
     CXLT_GET { (void)t; return std::to_string(c.geometry.layers); }},
    {"geometry.kv_heads", Type::uint, false, "KV heads per layer",
     CXLT_SET { (void)t; c.geometry.kv_heads = static_cast<uint32_t>(get_uint(v, what, 1, UINT32_MAX)); },
     CXLT_GET { (void)t; return std::to_string(c.geometry.kv_heads); }},
    {"geometry.head_dim", Type::uint, false, "elements per head",
     CXLT_SET { (void)t; c.geometry.head_dim = static_cast<uint32_t>(get_uint(v, what, 1, UINT32_MAX)); },
     CXLT_GET { (void)t; return std::to_string(c.geometry.head_dim); }},
    {"geometry.bytes_per_element", Type::uint, false, "bytes; 2 for bf16/fp16, 1 for fp8",
     CXLT_SET { (void)t; c.geometry.bytes_per_element = static_cast<uint32_t>(get_uint(v, what, 1, UINT32_MAX)); },
     CXLT_GET { (void)t; return std::to_string(c.geometry.bytes_per_element); }},
    {"geometry.tokens_per_block", Type::uint, false, "tokens of one sequence per block",
     CXLT_SET { (void)t; c.geometry.tokens_per_block = static_cast<uint32_t>(get_uint(v, what, 1, UINT32_MAX)); },
     CXLT_GET { (void)t; return std::to_string(c.geometry.tokens_per_block); }},
    {"geometry.k_and_v", Type::boolean, false, "true: K and V tensors; false: one (MLA latent)",
     CXLT_SET { (void)t; c.geometry.k_and_v = get_bool(v, what); },
     CXLT_GET { (void)t; return c.geometry.k_and_v ? "true" : "false"; }},

    {"policy.kind", Type::text, false, "lrfu, lru, fifo, lfu, arc, opt",
     CXLT_SET {
       (void)t;
       auto k = parse_policy_kind(trim(v));
       if (!k) {
         std::vector<std::string> names;
         for (PolicyKind p : {PolicyKind::lrfu, PolicyKind::lru, PolicyKind::fifo, PolicyKind::lfu, PolicyKind::arc, PolicyKind::opt})
           names.emplace_back(policy_kind_name(p));
         fail(CXLT_ERROR_CONFIG, what, " = '", trim(v), "' is not a known policy", did_you_mean(trim(v), names),
              " (known: lrfu, lru, fifo, lfu, arc, opt)");
       }
       c.policy = *k;
     },
     CXLT_GET { (void)t; return toml_quote(policy_kind_name(c.policy)); }},
    {"policy.alpha", Type::number, false, "(0, 1]: LRFU weight of the newest attention",
     CXLT_SET { (void)t; c.lrfu.alpha = get_fraction(v, what); },
     CXLT_GET { (void)t; return fmt_double(c.lrfu.alpha); }},
    {"policy.beta", Type::number, false, ">= 0, per decode step: LRFU recency decay",
     CXLT_SET { (void)t; c.lrfu.beta = get_nonnegative(v, what); },
     CXLT_GET { (void)t; return fmt_double(c.lrfu.beta); }},
    {"policy.score_mode", Type::text, false, "touch or decay",
     CXLT_SET {
       (void)t;
       auto m = parse_score_mode(trim(v));
       if (!m)
         fail(CXLT_ERROR_CONFIG, what, " = '", trim(v), "' is not a known score mode",
              did_you_mean(trim(v), {"touch", "decay"}), " (known: touch, decay)");
       c.lrfu.mode = *m;
     },
     CXLT_GET { (void)t; return toml_quote(score_mode_name(c.lrfu.mode)); }},
    {"policy.persist", Type::boolean, false, "keep policy state across eviction",
     CXLT_SET { (void)t; c.persist = get_bool(v, what); },
     CXLT_GET { (void)t; return c.persist ? "true" : "false"; }},
    {"policy.index_buckets", Type::uint, false, "power of two in [1, 65536]",
     CXLT_SET {
       (void)t;
       uint64_t b = get_uint(v, what, 1, 65536);
       if ((b & (b - 1)) != 0) fail(CXLT_ERROR_CONFIG, what, " = ", b, " is not a power of two in [1, 65536]");
       c.index_buckets = static_cast<unsigned>(b);
     },
     CXLT_GET { (void)t; return std::to_string(c.index_buckets); }},
    {"policy.audit", Type::boolean, false, "check every victim with a full scan (slow)",
     CXLT_SET { (void)t; c.audit = get_bool(v, what); },
     CXLT_GET { (void)t; return c.audit ? "true" : "false"; }},

    {"store.capacity", Type::uint, false, "policy states kept, at most 2^31; 0: unbounded",
     CXLT_SET { (void)t; c.store_capacity = get_uint(v, what, 0, 1ull << 31); },
     CXLT_GET { (void)t; return std::to_string(c.store_capacity); }},
    {"store.path", Type::text, true, "checkpoint file; empty: none",
     CXLT_SET { (void)t, (void)what; c.store_path = std::string(trim(v)); },
     CXLT_GET { (void)t; return toml_quote(c.store_path); }},
    {"store.checkpoint_every_steps", Type::uint, false, "decode steps; 0: only at close",
     CXLT_SET { (void)t; c.checkpoint_every_steps = get_uint(v, what, 0, UINT64_MAX); },
     CXLT_GET { (void)t; return std::to_string(c.checkpoint_every_steps); }},

    {"runtime.migration_threads", Type::uint, false, "threads, [1, 64]",
     CXLT_SET { (void)t; c.migration_threads = static_cast<unsigned>(get_uint(v, what, 1, 64)); },
     CXLT_GET { (void)t; return std::to_string(c.migration_threads); }},
    {"runtime.migration_batch", Type::uint, false, "blocks per background pass and tier, >= 1",
     CXLT_SET { (void)t; c.migration_batch = static_cast<unsigned>(get_uint(v, what, 1, UINT32_MAX)); },
     CXLT_GET { (void)t; return std::to_string(c.migration_batch); }},
    {"runtime.high_watermark", Type::number, false, "fraction of a budget, (0, 1]",
     CXLT_SET { (void)t; c.high_watermark = get_fraction(v, what); },
     CXLT_GET { (void)t; return fmt_double(c.high_watermark); }},
    {"runtime.low_watermark", Type::number, false, "fraction of a budget, (0, high_watermark]",
     CXLT_SET { (void)t; c.low_watermark = get_fraction(v, what); },
     CXLT_GET { (void)t; return fmt_double(c.low_watermark); }},
    {"runtime.promotion", Type::text, false, "never, score-above-victim, always",
     CXLT_SET {
       (void)t;
       auto r = parse_promotion_rule(trim(v));
       if (!r)
         fail(CXLT_ERROR_CONFIG, what, " = '", trim(v), "' is not a known promotion rule",
              did_you_mean(trim(v), {"never", "score-above-victim", "always"}), " (known: never, score-above-victim, always)");
       c.promotion = *r;
     },
     CXLT_GET { (void)t; return toml_quote(promotion_rule_name(c.promotion)); }},
    {"runtime.copy_kernel", Type::text, false, "auto, memcpy, nt, nt-avx2, nt-sse2, nt-scalar",
     CXLT_SET {
       (void)t;
       std::string s(trim(v));
       if (s == "auto") {
         c.copy_kernel = s;
         return;
       }
       auto k = parse_copy_kernel(s);
       if (!k)
         fail(CXLT_ERROR_CONFIG, what, " = '", s, "' is not a known copy kernel",
              did_you_mean(s, {"auto", "memcpy", "nt", "nt-avx2", "nt-sse2", "nt-scalar"}),
              " (known: auto, memcpy, nt, nt-avx2, nt-sse2, nt-scalar)");
       c.copy_kernel = copy_kernel_name(*k);
     },
     CXLT_GET { (void)t; return toml_quote(c.copy_kernel); }},
    {"runtime.huge_pages", Type::text, false, "none, thp, hugetlb",
     CXLT_SET {
       (void)t;
       auto h = parse_huge_pages(trim(v));
       if (!h)
         fail(CXLT_ERROR_CONFIG, what, " = '", trim(v), "' is not a known huge page mode",
              did_you_mean(trim(v), {"none", "thp", "hugetlb"}), " (known: none, thp, hugetlb)");
       c.huge_pages = *h;
     },
     CXLT_GET { (void)t; return toml_quote(huge_pages_name(c.huge_pages)); }},
    {"runtime.verify_placement", Type::boolean, false, "check every page's node after first touch",
     CXLT_SET { (void)t; c.verify_placement = get_bool(v, what); },
     CXLT_GET { (void)t; return c.verify_placement ? "true" : "false"; }},
    {"runtime.state_huge_pages", Type::boolean, false, "the runtime's per-state arrays ask for transparent huge pages",
     CXLT_SET { (void)t; c.state_huge_pages = get_bool(v, what); },
     CXLT_GET { (void)t; return c.state_huge_pages ? "true" : "false"; }},
    {"runtime.reserve_memory", Type::boolean, false, "map every tier's whole budget at open",
     CXLT_SET { (void)t; c.reserve_memory = get_bool(v, what); },
     CXLT_GET { (void)t; return c.reserve_memory ? "true" : "false"; }},
    {"runtime.extent_blocks", Type::uint, false, "blocks per backend extent, >= 1",
     CXLT_SET { (void)t; c.extent_blocks = static_cast<uint32_t>(get_uint(v, what, 1, UINT32_MAX)); },
     CXLT_GET { (void)t; return std::to_string(c.extent_blocks); }},
    {"runtime.verify_copies", Type::boolean, false, "checksum each block around every copy",
     CXLT_SET { (void)t; c.verify_copies = get_bool(v, what); },
     CXLT_GET { (void)t; return c.verify_copies ? "true" : "false"; }},

    // [remote]: the Redis Cluster tier (docs/remote.md).
    {"remote.enabled", Type::boolean, false, "write dropped blocks out and fetch them back",
     CXLT_SET { (void)t; c.remote.enabled = get_bool(v, what); },
     CXLT_GET { (void)t; return c.remote.enabled ? "true" : "false"; }},
    {"remote.seeds", Type::text, false, "HOST:PORT of cluster servers, comma-separated",
     CXLT_SET {
       (void)t;
       std::vector<std::string> seeds;
       if (!trim(v).empty())
         for (std::string &s : split_list(v, what)) {
           size_t colon = s.rfind(':');
           uint64_t port = 0;
           if (colon == std::string::npos || colon == 0 ||
               std::from_chars(s.data() + colon + 1, s.data() + s.size(), port).ptr != s.data() + s.size() ||
               colon + 1 == s.size() || port == 0 || port > 65535)
             fail(CXLT_ERROR_CONFIG, what, ": '", s, "' is not HOST:PORT with a port in 1-65535 (e.g. 127.0.0.1:7000)");
           seeds.push_back(std::move(s));
         }
       c.remote.seeds = std::move(seeds);
     },
     CXLT_GET {
       (void)t;
       std::string s;
       for (const std::string &x : c.remote.seeds) s += (s.empty() ? "" : ",") + x;
       return toml_quote(s);
     }},
    {"remote.namespace", Type::text, false, "key namespace used as is; empty: model/geometry/dtype/tp rank",
     CXLT_SET {
       (void)t;
       std::string s(trim(v));
       if (std::string why = remote::check_namespace(s); !s.empty() && !why.empty())
         fail(CXLT_ERROR_CONFIG, what, " = '", s, "' ", why);
       c.remote.ns = s;
     },
     CXLT_GET { (void)t; return toml_quote(c.remote.ns); }},
    {"remote.model", Type::text, false, "model fingerprint in the namespace; empty: \"model\"",
     CXLT_SET { (void)t, (void)what; c.remote.model = std::string(trim(v)); },
     CXLT_GET { (void)t; return toml_quote(c.remote.model); }},
    {"remote.dtype", Type::text, false, "element type in the namespace; empty: e<bytes_per_element>",
     CXLT_SET { (void)t, (void)what; c.remote.dtype = std::string(trim(v)); },
     CXLT_GET { (void)t; return toml_quote(c.remote.dtype); }},
    {"remote.tp_rank", Type::uint, false, "tensor-parallel rank in the namespace",
     CXLT_SET { (void)t; c.remote.tp_rank = static_cast<uint32_t>(get_uint(v, what, 0, 65535)); },
     CXLT_GET { (void)t; return std::to_string(c.remote.tp_rank); }},
    {"remote.deadline_ms", Type::uint, false, "ms per block operation, [1, 60000]",
     CXLT_SET { (void)t; c.remote.deadline_ms = static_cast<uint32_t>(get_uint(v, what, 1, 60000)); },
     CXLT_GET { (void)t; return std::to_string(c.remote.deadline_ms); }},
    {"remote.write_threshold", Type::number, false, "LRFU score in [0, 1] a dropped block needs to be written out",
     CXLT_SET {
       (void)t;
       double x = parse_double(v, what);
       if (!(x >= 0.0 && x <= 1.0)) fail(CXLT_ERROR_CONFIG, what, " = ", fmt_double(x), " is outside [0, 1]");
       c.remote.write_threshold = x;
     },
     CXLT_GET { (void)t; return fmt_double(c.remote.write_threshold); }},
    {"remote.concurrency", Type::uint, false, "write-out threads, [1, 64]",
     CXLT_SET { (void)t; c.remote.concurrency = static_cast<uint32_t>(get_uint(v, what, 1, 64)); },
     CXLT_GET { (void)t; return std::to_string(c.remote.concurrency); }},
    {"remote.max_pending", Type::uint, false, "write-outs queued or in flight, [1, 65536]",
     CXLT_SET { (void)t; c.remote.max_pending = static_cast<uint32_t>(get_uint(v, what, 1, 65536)); },
     CXLT_GET { (void)t; return std::to_string(c.remote.max_pending); }},
    {"remote.user", Type::text, false, "AUTH user (ACL); empty: the default user",
     CXLT_SET { (void)t, (void)what; c.remote.user = std::string(trim(v)); },
     CXLT_GET { (void)t; return toml_quote(c.remote.user); }},
    {"remote.password_file", Type::text, true, "file whose first line is the AUTH password; empty: no AUTH",
     CXLT_SET { (void)t, (void)what; c.remote.password_file = std::string(trim(v)); },
     CXLT_GET { (void)t; return toml_quote(c.remote.password_file); }},
};

const Field kTierFieldTable[] = {
    {"name", Type::text, false, "default: the kind's name, else node<N>",
     CXLT_SET {
       (void)c;
       std::string s(trim(v));
       if (!valid_tier_name(s))
         fail(CXLT_ERROR_CONFIG, what, " = '", s, "' is not a tier name (at most 31 of A-Z a-z 0-9 _ - + .)");
       t->name = s;
     },
     CXLT_GET { (void)c; return toml_quote(t->name); }},
    {"kind", Type::text, false, "hbm, gpu, dram, cxl, nvm, spm, unknown, remote",
     CXLT_SET {
       (void)c;
       std::string s(trim(v));
       if (s.empty()) {
         t->kind.reset();
         return;
       }
       auto k = parse_tier_kind(s);
       if (!k)
         fail(CXLT_ERROR_CONFIG, what, " = '", s, "' is not a known tier kind",
              did_you_mean(s, {"hbm", "gpu", "dram", "cxl", "nvm", "spm", "unknown", "remote"}),
              " (known: hbm, gpu, dram, cxl, nvm, spm, unknown, remote)");
       t->kind = *k;
     },
     CXLT_GET { (void)c; return t->kind ? toml_quote(tier_kind_name(*t->kind)) : std::string(); }},
    {"numa_nodes", Type::nodes, false, "OS NUMA node numbers",
     CXLT_SET {
       (void)c;
       std::vector<unsigned> nodes;
       if (!trim(v).empty())
         for (const std::string &item : split_list(v, what)) {
           auto n = static_cast<unsigned>(get_uint(item, what, 0, kMaxNumaNode));
           if (std::find(nodes.begin(), nodes.end(), n) != nodes.end())
             fail(CXLT_ERROR_CONFIG, what, " lists node ", n, " twice");
           nodes.push_back(n);
         }
       t->numa_nodes = std::move(nodes);
     },
     CXLT_GET {
       (void)c;
       std::string s = "[";
       for (size_t i = 0; i < t->numa_nodes.size(); ++i) s += (i ? ", " : "") + std::to_string(t->numa_nodes[i]);
       return s + "]";
     }},
    {"budget", Type::size, false, "bytes; 0: the default budget",
     CXLT_SET { (void)c; t->budget_bytes = parse_size(v, what); },
     CXLT_GET {
       (void)c;
       std::string s = fmt_size(t->budget_bytes);
       return (s.back() >= '0' && s.back() <= '9') ? s : toml_quote(s);
     }},
    {"backend", Type::text, false, "auto, numa, memkind, emulated, null, faulty, cuda",
     CXLT_SET { (void)c; t->backend = pick(v, backend_choices(), what, "backend"); },
     CXLT_GET { (void)c; return toml_quote(t->backend); }},
    {"layout", Type::text, false, "cuda backend: contiguous, per-layer (K and V of each layer apart)",
     CXLT_SET { (void)c; t->layout = pick(v, kLayouts, what, "layout"); },
     CXLT_GET { (void)c; return toml_quote(t->layout); }},
    {"bandwidth_mib_s", Type::number, false, "MiB/s, higher is better; not set: discovered",
     CXLT_SET { (void)c; t->bandwidth_mib_s = get_positive_or_unset(v, what); },
     CXLT_GET { (void)c; return opt_double_literal(t->bandwidth_mib_s); }},
    {"latency_ns", Type::number, false, "ns, lower is better; not set: discovered",
     CXLT_SET { (void)c; t->latency_ns = get_positive_or_unset(v, what); },
     CXLT_GET { (void)c; return opt_double_literal(t->latency_ns); }},
};

#undef CXLT_SET
#undef CXLT_GET

// A lower bound in a message: "0", "0.5".
std::string fmt_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::vector<std::string> choice_list(const TierOption &o) {
  std::vector<std::string> out;
  for (const char *const *c = o.choices; *c; ++c) out.emplace_back(*c);
  return out;
}

// A backend's option key: checked as the backend declares it, kept as text.
void set_option(const TierOption &o, TierConfig *t, std::string_view v, const std::string &what) {
  std::string value;
  if (o.type == TierOptionType::number) {
    double x = parse_double(v, what);
    if (!(x >= o.min_value)) fail(CXLT_ERROR_CONFIG, what, " = ", fmt_double(x), " must be >= ", fmt_number(o.min_value));
    value = fmt_double(x);
  } else if (o.choices) {
    value = pick(v, choice_list(o), what, o.noun);
  } else {
    value = std::string(trim(v));
  }
  t->options[o.key] = value;
}

std::string get_option(const TierOption &o, const TierConfig *t) {
  auto it = t->options.find(o.key);
  const std::string value = it != t->options.end() ? it->second : std::string(o.default_value);
  if (o.type == TierOptionType::number) {
    try {
      return fmt_double(parse_double(value, o.key));
    } catch (const Error &) {
      return toml_quote(value);  // set directly and not yet validated: shown as it is
    }
  }
  return toml_quote(value);
}

}  // namespace

const std::span<const Field> kFields{kGlobalFieldTable};

const std::vector<Field> &tier_fields() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> out;
    for (const Field &f : kTierFieldTable) {
      out.push_back(f);
      if (std::string_view(f.name) != "backend") continue;
      for (const TierOption *o : tier_options()) {
        Field of{o->key, o->type == TierOptionType::number ? Type::number : Type::text, false, o->doc, nullptr, nullptr};
        of.option = o;
        out.push_back(of);
      }
    }
    return out;
  }();
  return fields;
}

void field_set(const Field &f, RuntimeConfig &c, TierConfig *t, std::string_view v, const std::string &what) {
  if (f.option)
    set_option(*f.option, t, v, what);
  else
    f.set(c, t, v, what);
}

std::string field_get(const Field &f, const RuntimeConfig &c, const TierConfig *t) {
  return f.option ? get_option(*f.option, t) : f.get(c, t);
}

const Field *find_field(std::string_view name) {
  for (const Field &f : kFields)
    if (name == f.name) return &f;
  return nullptr;
}

const Field *find_tier_field(std::string_view name) {
  for (const Field &f : tier_fields())
    if (name == f.name) return &f;
  return nullptr;
}

std::vector<std::string> global_key_names() {
  std::vector<std::string> out;
  for (const Field &f : kFields) out.emplace_back(f.name);
  return out;
}

std::vector<std::string> tier_field_names() {
  std::vector<std::string> out;
  for (const Field &f : tier_fields()) out.emplace_back(f.name);
  return out;
}

namespace {

// Every key spelled out for tier 0, for suggestions on a whole key.
std::vector<std::string> all_key_names(unsigned tier) {
  std::vector<std::string> out = global_key_names();
  for (const Field &f : tier_fields()) out.push_back("tiers." + std::to_string(tier) + "." + f.name);
  return out;
}

}  // namespace

std::string tier_keys_listed() {
  std::string s;
  for (const Field &f : tier_fields()) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

// "policy.alpha" or "tiers.3.budget". Throws Error(CONFIG) for an unknown key.
Resolved resolve_key(std::string_view key) {
  Resolved r;
  if (const Field *f = find_field(key)) {
    r.field = f;
    r.key = f->name;
    return r;
  }
  if (key.substr(0, 6) == "tiers.") {
    std::string_view rest = key.substr(6);
    size_t dot = rest.find('.');
    std::string_view idx = rest.substr(0, dot);
    bool digits = !idx.empty() && idx.size() <= 9 &&
                  std::all_of(idx.begin(), idx.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (digits && dot != std::string_view::npos) {
      unsigned n = static_cast<unsigned>(std::stoul(std::string(idx)));
      std::string_view fname = rest.substr(dot + 1);
      const Field *f = find_tier_field(fname);
      if (f == nullptr)
        fail(CXLT_ERROR_CONFIG, "unknown key '", key, "'", did_you_mean(fname, tier_field_names()),
             " (tier keys: ", tier_keys_listed(), ")");
      if (n >= kMaxTiers)
        fail(CXLT_ERROR_CONFIG, "key '", key, "': tier index ", n, " is out of range (at most ", kMaxTiers,
             " tiers: tiers.0 to tiers.", kMaxTiers - 1, ")");
      r.field = f;
      r.tier = static_cast<int>(n);
      r.key = "tiers." + std::to_string(n) + "." + f->name;
      return r;
    }
    fail(CXLT_ERROR_CONFIG, "unknown key '", key, "' (tier keys are tiers.N.FIELD with N in 0..", kMaxTiers - 1,
         ", e.g. tiers.0.budget)");
  }
  fail(CXLT_ERROR_CONFIG, "unknown key '", key, "'", did_you_mean(key, all_key_names(0)));
}

void apply_value(RuntimeConfig &c, const Resolved &r, std::string_view text, ConfigLayer layer, const std::string &where) {
  auto it = c.origins.find(r.key);
  if (it != c.origins.end() && it->second.layer > layer) {
    RuntimeConfig scratch;
    TierConfig scratch_tier;
    field_set(*r.field, scratch, &scratch_tier, text, r.key);
    return;
  }
  TierConfig *t = nullptr;
  if (r.tier >= 0) {
    auto n = static_cast<size_t>(r.tier);
    if (c.tiers.size() <= n) c.tiers.resize(n + 1);
    t = &c.tiers[n];
  }
  field_set(*r.field, c, t, text, r.key);
  c.origins[r.key] = ConfigOrigin{layer, where};
}

}  // namespace cxltier::cfg
