// SPDX-License-Identifier: Apache-2.0
// RuntimeConfig: one table of keys drives TOML loading, set(), CXLT_* environment variables,
// to_toml() and keys(), so the four can never disagree. Every value goes through the parsers
// of units.hpp; every change is made on a copy that replaces the configuration only on success.
#include <cxltier/config.hpp>
#include <cxltier/error.hpp>
#include <cxltier/units.hpp>

#include "memory/copy.hpp"
#include "runtime/remote.hpp"
#include "memory/tier_ops.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>  // environ (declared with _GNU_SOURCE)

namespace cxltier {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;
constexpr unsigned kMaxTiers = CXLT_MAX_TIERS;
constexpr unsigned kMaxNumaNode = 1023;  // Linux: MAX_NUMNODES is at most 1024

// --- small text helpers ---------------------------------------------------------------------

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char &c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

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

// Edit distance with adjacent transpositions counting one edit (optimal string alignment):
// "alpah" is one edit from "alpha", as a typist would count it.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The closest candidate when it is close enough to be a typo (at most 2 edits, and less than
// a third of the word), else "".
std::string closest(std::string_view word, const std::vector<std::string> &candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  const std::string w = upper(word);
  for (const std::string &c : candidates) {
    // The distance is at least the length difference, and only 2 edits count as a typo: skip
    // the O(length^2) table for the others (a mistyped 4 KiB name used to cost seconds of
    // tables against every key; found by fuzz_config, docs/reliability.md).
    if (std::max(w.size(), c.size()) - std::min(w.size(), c.size()) > 2) continue;
    size_t d = edit_distance(w, upper(c));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  if (best_d == 0 || best_d > 2 || best_d * 3 > std::max<size_t>(word.size(), 3)) return "";
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string> &candidates) {
  std::string c = closest(word, candidates);
  return c.empty() ? std::string() : " (did you mean '" + c + "'?)";
}

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

// "auto" (lib/memory/choose.hpp), then every backend a tier may name (tiers/registry.cpp).
const std::vector<std::string> &backend_choices() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v{"auto"};
    for (const std::string &n : tier_backend_choices()) v.push_back(n);
    return v;
  }();
  return names;
}
const char *const kLayouts[] = {"contiguous", "per-layer"};  // cuda backend (docs/gpu.md)
const char *const kMemkindKinds[] = {"regular", "hbw", "hbw_all", "hbw_preferred",
                                     "dax_kmem", "dax_kmem_all", "dax_kmem_preferred"};

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

bool valid_tier_name(std::string_view s) {
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-' || c == '+' || c == '.'))
      return false;
  return s.size() <= 31;
}

// --- the key table ------------------------------------------------------------------------

// How a TOML value is accepted (set() and the environment always take text).
enum class Type {
  size,     // integer of bytes, or a string with a unit ("4GiB")
  uint,     // integer
  number,   // float or integer
  boolean,  // true / false
  text,     // string
  nodes,    // array of integers
};

const char *type_noun(Type t) {
  switch (t) {
    case Type::size: return "a size (an integer of bytes or a string such as \"4GiB\")";
    case Type::uint: return "an integer";
    case Type::number: return "a number";
    case Type::boolean: return "a boolean (true or false)";
    case Type::text: return "a string";
    case Type::nodes: return "an array of NUMA node numbers ([0, 1])";
  }
  return "?";
}

struct Field {
  const char *name;  // "geometry.layers"; for tier fields the part after "tiers.N."
  Type type;
  bool is_path;      // relative paths in a file are taken relative to the file's folder
  const char *doc;   // the comment to_toml() writes
  // Parse `v` (text) into the configuration; `t` is the tier for tier fields.
  void (*set)(RuntimeConfig &c, TierConfig *t, std::string_view v, const std::string &what);
  // The value as a TOML literal; "" when not set (optional values).
  std::string (*get)(const RuntimeConfig &c, const TierConfig *t);
};

#define CXLT_SET [](RuntimeConfig & c, TierConfig * t, std::string_view v, const std::string &what)
#define CXLT_GET [](const RuntimeConfig &c, const TierConfig *t) -> std::string

const Field kFields[] = {
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

const Field kTierFields[] = {
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
    {"memkind_kind", Type::text, false, "memkind backend: regular, hbw, dax_kmem, ...",
     CXLT_SET { (void)c; t->memkind_kind = pick(v, kMemkindKinds, what, "memkind kind"); },
     CXLT_GET { (void)c; return toml_quote(t->memkind_kind); }},
    {"pace_mib_s", Type::number, false, "MiB/s; emulated copies into the tier; 0: off",
     CXLT_SET { (void)c; t->pace_mib_s = get_nonnegative(v, what); },
     CXLT_GET { (void)c; return fmt_double(t->pace_mib_s); }},
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

const char *const kGroups[] = {"geometry", "policy", "store", "runtime", "remote"};

const Field *find_field(std::string_view name) {
  for (const Field &f : kFields)
    if (name == f.name) return &f;
  return nullptr;
}

const Field *find_tier_field(std::string_view name) {
  for (const Field &f : kTierFields)
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
  for (const Field &f : kTierFields) out.emplace_back(f.name);
  return out;
}

// Every key spelled out for tier 0, for suggestions on a whole key.
std::vector<std::string> all_key_names(unsigned tier) {
  std::vector<std::string> out = global_key_names();
  for (const Field &f : kTierFields) out.push_back("tiers." + std::to_string(tier) + "." + f.name);
  return out;
}

struct Resolved {
  const Field *field = nullptr;
  int tier = -1;    // -1: a global key
  std::string key;  // canonical spelling
};

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
             " (tier keys: name, kind, numa_nodes, budget, backend, memkind_kind, pace_mib_s, layout, bandwidth_mib_s, latency_ns)");
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

// Apply one value at `layer`. A key whose value came from a higher layer keeps it (the value
// is still parsed, so a bad one is an error wherever it comes from). `what` names the key in
// messages; `where` is recorded as the origin.
void apply_value(RuntimeConfig &c, const Resolved &r, std::string_view text, ConfigLayer layer, const std::string &where) {
  auto it = c.origins.find(r.key);
  if (it != c.origins.end() && it->second.layer > layer) {
    RuntimeConfig scratch;
    TierConfig scratch_tier;
    r.field->set(scratch, &scratch_tier, text, r.key);
    return;
  }
  TierConfig *t = nullptr;
  if (r.tier >= 0) {
    auto n = static_cast<size_t>(r.tier);
    if (c.tiers.size() <= n) c.tiers.resize(n + 1);
    t = &c.tiers[n];
  }
  r.field->set(c, t, text, r.key);
  c.origins[r.key] = ConfigOrigin{layer, where};
}

// Re-throw any error with `prefix` in front of its message and the CONFIG code (the unit
// parsers say INVALID_ARGUMENT; to a configuration's user it is a configuration error).
template <typename F>
void with_prefix(const std::string &prefix, F &&body) {
  try {
    body();
  } catch (const Error &e) {
    throw Error(CXLT_ERROR_CONFIG, prefix + e.what());
  }
}

// --- TOML ---------------------------------------------------------------------------------

std::string toml_type_name(const toml::node &n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

std::string position(const std::string &origin, const toml::source_region &src) {
  return origin + ":" + std::to_string(src.begin.line) + ":" + std::to_string(src.begin.column);
}

// The node as the text set() takes, or an error naming the expected type.
std::string node_text(const toml::node &n, const Field &f, const std::string &key) {
  auto wrong = [&]() -> std::string {
    fail(CXLT_ERROR_CONFIG, key, ": expected ", type_noun(f.type), ", got ", toml_type_name(n));
  };
  switch (f.type) {
    case Type::size:
      if (auto i = n.as_integer()) return std::to_string(i->get());
      if (auto s = n.as_string()) return s->get();
      return wrong();
    case Type::uint:
      if (auto i = n.as_integer()) return std::to_string(i->get());
      return wrong();
    case Type::number:
      if (auto i = n.as_integer()) return std::to_string(i->get());
      if (auto d = n.as_floating_point()) {
        if (!std::isfinite(d->get())) fail(CXLT_ERROR_CONFIG, key, " = ", d->get(), " is not a finite number");
        return fmt_double(d->get());
      }
      return wrong();
    case Type::boolean:
      if (auto b = n.as_boolean()) return b->get() ? "true" : "false";
      return wrong();
    case Type::text:
      if (auto s = n.as_string()) return s->get();
      return wrong();
    case Type::nodes: {
      const toml::array *a = n.as_array();
      if (a == nullptr) return wrong();
      std::string s;
      for (const toml::node &e : *a) {
        const auto *i = e.as_integer();
        if (i == nullptr)
          fail(CXLT_ERROR_CONFIG, key, ": expected ", type_noun(f.type), ", got an array holding ", toml_type_name(e));
        if (i->get() < 0) fail(CXLT_ERROR_CONFIG, key, ": node ", i->get(), " must not be negative");
        s += (s.empty() ? "" : ",") + std::to_string(i->get());
      }
      return s;
    }
  }
  return wrong();
}

void apply_node(RuntimeConfig &c, const Resolved &r, const toml::node &n, const std::string &origin,
                const std::string &base_dir) {
  std::string where = position(origin, n.source());
  with_prefix(where + ": ", [&] {
    std::string text = node_text(n, *r.field, r.key);
    if (r.field->is_path && !base_dir.empty() && !(r.key == "topology" && is_topology_keyword(trim(text)))) {
      std::filesystem::path p(std::string(trim(text)));
      if (!p.empty() && p.is_relative()) text = (std::filesystem::path(base_dir) / p).lexically_normal().string();
    }
    apply_value(c, r, text, ConfigLayer::file, where);
  });
}

[[noreturn]] void unknown_in_toml(const std::string &where, const std::string &key, const std::string &hint) {
  fail(CXLT_ERROR_CONFIG, where, ": unknown key '", key, "'", hint);
}

void load_table(RuntimeConfig &c, const toml::table &root, const std::string &origin, const std::string &base_dir) {
  for (auto &&[k, node] : root) {
    std::string key(k.str());
    std::string kwhere = position(origin, k.source());
    if (key == "topology") {
      apply_node(c, resolve_key(key), node, origin, base_dir);
      continue;
    }
    if (std::find_if(std::begin(kGroups), std::end(kGroups), [&](const char *g) { return key == g; }) != std::end(kGroups)) {
      const toml::table *t = node.as_table();
      if (t == nullptr)
        fail(CXLT_ERROR_CONFIG, kwhere, ": '", key, "' must be a table ([", key, "]), got ", toml_type_name(node));
      for (auto &&[k2, n2] : *t) {
        std::string full = key + "." + std::string(k2.str());
        const Field *f = find_field(full);
        if (f == nullptr) unknown_in_toml(position(origin, k2.source()), full, did_you_mean(full, global_key_names()));
        apply_node(c, Resolved{f, -1, full}, n2, origin, base_dir);
      }
      continue;
    }
    if (key == "tiers") {
      const toml::array *a = node.as_array();
      if (a == nullptr || !a->is_array_of_tables())
        fail(CXLT_ERROR_CONFIG, kwhere, ": 'tiers' must be an array of tables (write each tier as [[tiers]]), got ",
             toml_type_name(node));
      for (size_t i = 0; i < a->size(); ++i) {
        const toml::table &t = *(*a)[i].as_table();
        if (i >= kMaxTiers)
          fail(CXLT_ERROR_CONFIG, position(origin, t.source()), ": tiers.", i, ": at most ", kMaxTiers,
               " tiers (CXLT_MAX_TIERS)");
        for (auto &&[k2, n2] : t) {
          std::string fname(k2.str());
          std::string full = "tiers." + std::to_string(i) + "." + fname;
          const Field *f = find_tier_field(fname);
          if (f == nullptr) unknown_in_toml(position(origin, k2.source()), full, did_you_mean(fname, tier_field_names()));
          apply_node(c, Resolved{f, static_cast<int>(i), full}, n2, origin, base_dir);
        }
        if (c.tiers.size() <= i) c.tiers.resize(i + 1);  // an empty [[tiers]] still counts
      }
      continue;
    }
    // A key of a group written at the top ("alpha" for policy.alpha) gets its full name.
    std::string hint;
    for (const Field &f : kFields) {
      std::string_view n = f.name;
      size_t dot = n.find('.');
      if (dot != std::string_view::npos && n.substr(dot + 1) == key)
        hint = " (did you mean '" + std::string(n.substr(0, dot)) + "." + key + "', in [" + std::string(n.substr(0, dot)) + "]?)";
    }
    if (hint.empty())
      hint = did_you_mean(key, {"topology", "geometry", "policy", "store", "runtime", "remote", "tiers"});
    unknown_in_toml(kwhere, key, hint);
  }
}

void load_text(RuntimeConfig &self, const std::string &text, const std::string &origin, const std::string &base_dir) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error &e) {
    fail(CXLT_ERROR_CONFIG, origin, ":", e.source().begin.line, ":", e.source().begin.column, ": TOML syntax error: ",
         e.description());
  }
  RuntimeConfig next = self;
  load_table(next, root, origin, base_dir);
  self = std::move(next);
}

// --- environment --------------------------------------------------------------------------

// CXLT_ variables of this project that are not configuration keys (tests, scripts, the
// benchmark and QEMU harnesses). Documented in docs/configuration.md.
const char *const kNonConfigVars[] = {"CXLT_TOOL", "CXLT_TEST_DATA", "CXLT_TRACE_DATA", "CXLT_SOURCE_ROOT",
                                      "CXLT_BUILD_ROOT", "CXLT_BUILD", "CXLT_ROOT", "CXLT_UPDATE_GOLDEN",
                                      "CXLT_CHECK_ALWAYS", "CXLT_PACKAGES", "CXLT_DEBUG_LEVEL"};
const char *const kNonConfigPrefixes[] = {"CXLT_QEMU_", "CXLT_BENCH_", "CXLT_TEST_", "CXLT_CUDA_", "CXLT_TORCH_"};

bool is_non_config_var(const std::string &up) {
  for (const char *n : kNonConfigVars)
    if (up == n) return true;
  for (const char *p : kNonConfigPrefixes)
    if (up.rfind(p, 0) == 0) return true;
  return false;
}

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
    if (iequal(s, promotion_rule_name(r))) return r;
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
    if (iequal(s, huge_pages_name(h))) return h;
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

void RuntimeConfig::load_toml_file(const std::string &path) {
  // O_NONBLOCK and a regular-file check: a FIFO (or a device) given as the config file is
  // refused at once instead of blocking forever waiting for a writer (docs/review.md, 18).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(CXLT_ERROR_IO, "cannot open config file '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || ::fcntl(fd, F_SETFL, 0) != 0) {
    ::close(fd);
    fail(CXLT_ERROR_IO, "cannot read config file '", path, "': not a regular file (a FIFO, device or directory)");
  }
  std::FILE *f = ::fdopen(fd, "rb");
  if (f == nullptr) {
    int err = errno;
    ::close(fd);
    fail(CXLT_ERROR_IO, "cannot open config file '", path, "': ", std::strerror(err));
  }
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  int err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (err != 0) fail(CXLT_ERROR_IO, "cannot read config file '", path, "': ", std::strerror(err));
  std::string dir = std::filesystem::path(path).parent_path().string();
  load_text(*this, text, path, dir.empty() ? "." : dir);
}

void RuntimeConfig::load_toml_string(const std::string &text, const std::string &origin) {
  load_text(*this, text, origin, "");
}

void RuntimeConfig::set(const std::string &key, const std::string &value) {
  RuntimeConfig next = *this;
  with_prefix("", [&] { apply_value(next, resolve_key(key), value, ConfigLayer::api, "set()"); });
  *this = std::move(next);
}

std::string RuntimeConfig::env_name(std::string_view key) {
  std::string s = "CXLT_" + upper(key);
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

void RuntimeConfig::apply_environment() {
  std::vector<std::pair<std::string, std::string>> vars;
  for (char **e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    if (!iequal(kv.substr(0, std::min<size_t>(eq, 5)), "CXLT_")) continue;
    vars.emplace_back(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  for (const std::string &w : apply_environment_vars(vars)) std::fprintf(stderr, "cxltier: warning: %s\n", w.c_str());
}

std::vector<std::string> RuntimeConfig::apply_environment_vars(const std::vector<std::pair<std::string, std::string>> &vars) {
  std::map<std::string, std::string> global_env;  // CXLT_POLICY_ALPHA -> policy.alpha
  for (const Field &f : kFields) global_env[env_name(f.name)] = f.name;
  std::vector<std::string> known_env;
  for (const auto &[env, key] : global_env) known_env.push_back(env);
  for (const Field &f : kTierFields) known_env.push_back("CXLT_TIERS_0_" + upper(f.name));

  struct Match {
    std::string var, value;
    Resolved r;
  };
  std::map<std::string, Match> matches;  // by canonical key: deterministic order, duplicates found
  std::vector<std::string> warnings;
  for (const auto &[var, value] : vars) {
    std::string up = upper(var);
    if (up.rfind("CXLT_", 0) != 0) continue;
    Resolved r;
    if (auto it = global_env.find(up); it != global_env.end()) {
      r = resolve_key(it->second);
    } else if (up.rfind("CXLT_TIERS_", 0) == 0) {
      // CXLT_TIERS_<N>_<FIELD>
      std::string rest = up.substr(11);
      size_t us = rest.find('_');
      std::string idx = rest.substr(0, us);
      bool digits = !idx.empty() && std::all_of(idx.begin(), idx.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      const Field *f = nullptr;
      if (digits && us != std::string::npos)
        for (const Field &tf : kTierFields)
          if (rest.substr(us + 1) == upper(tf.name)) f = &tf;
      if (f == nullptr) {
        warnings.push_back(var + " is not a configuration variable" + did_you_mean(up, known_env) + "; ignored");
        continue;
      }
      const unsigned long n = idx.size() <= 9 ? std::stoul(idx) : kMaxTiers;  // longer: out of range too
      if (n >= kMaxTiers)
        fail(CXLT_ERROR_CONFIG, "environment variable ", var, ": tier index ", idx, " is out of range (at most ",
             kMaxTiers, " tiers: CXLT_TIERS_0_* to CXLT_TIERS_", kMaxTiers - 1, "_*)");
      r = Resolved{f, static_cast<int>(n), "tiers." + std::to_string(n) + "." + f->name};
    } else {
      if (is_non_config_var(up)) continue;
      bool looks_like_key = up.rfind("CXLT_TOPOLOGY", 0) == 0;
      for (const char *g : kGroups)
        if (up.rfind("CXLT_" + upper(g) + "_", 0) == 0) looks_like_key = true;
      std::string hint = did_you_mean(up, known_env);
      if (looks_like_key || !hint.empty()) warnings.push_back(var + " is not a configuration variable" + hint + "; ignored");
      continue;
    }
    auto [it, inserted] = matches.try_emplace(r.key, Match{var, value, r});
    if (!inserted && it->second.value != value)
      fail(CXLT_ERROR_CONFIG, "environment variables ", it->second.var, " and ", var, " both set ", r.key,
           " with different values");
  }

  RuntimeConfig next = *this;
  for (const auto &entry : matches) {
    const Match &m = entry.second;  // not a structured binding: clang 14 (the fuzz build) cannot capture one
    with_prefix("environment variable " + m.var + "=" + m.value + ": ",
                [&] { apply_value(next, m.r, m.value, ConfigLayer::environment, m.var); });
  }
  *this = std::move(next);
  return warnings;
}

RuntimeConfig RuntimeConfig::from_sources(const std::string &path) {
  RuntimeConfig c;
  if (!path.empty()) c.load_toml_file(path);
  c.apply_environment();
  return c;
}

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
      for (const Field &f : kTierFields)
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
    if (std::find(std::begin(kMemkindKinds), std::end(kMemkindKinds), t.memkind_kind) == std::end(kMemkindKinds))
      bad(p + "memkind_kind", p, "memkind_kind = '", t.memkind_kind, "' is not a known memkind kind");
    if (std::find(std::begin(kLayouts), std::end(kLayouts), t.layout) == std::end(kLayouts))
      bad(p + "layout", p, "layout = '", t.layout, "' is not a known layout (known: contiguous, per-layer)");
    if (!(t.pace_mib_s >= 0.0) || !std::isfinite(t.pace_mib_s))
      bad(p + "pace_mib_s", p, "pace_mib_s = ", fmt_double(t.pace_mib_s), " must be a finite number >= 0");
    if (t.pace_mib_s > 0.0 && t.pace_mib_s < 1.0 / 1024.0)  // slower, one block's copy time overflows
      bad(p + "pace_mib_s", p, "pace_mib_s = ", fmt_double(t.pace_mib_s),
          " must be 0 (off) or at least 1/1024 MiB/s (1 KiB/s)");
    if (t.bandwidth_mib_s && !(*t.bandwidth_mib_s > 0.0 && std::isfinite(*t.bandwidth_mib_s)))
      bad(p + "bandwidth_mib_s", p, "bandwidth_mib_s = ", fmt_double(*t.bandwidth_mib_s), " must be > 0");
    if (t.latency_ns && !(*t.latency_ns > 0.0 && std::isfinite(*t.latency_ns)))
      bad(p + "latency_ns", p, "latency_ns = ", fmt_double(*t.latency_ns), " must be > 0");
  }
}

std::string RuntimeConfig::to_toml() const {
  std::ostringstream os;
  auto line = [&](const std::string &key, const std::string &short_name, const std::string &literal, const char *doc) {
    std::string comment = doc;
    auto it = origins.find(key);
    if (it != origins.end() && it->second.layer != ConfigLayer::defaults) comment += " [" + it->second.where + "]";
    if (literal.empty())
      os << "# " << short_name << ": not set (" << doc << ")\n";
    else
      os << short_name << " = " << literal << "  # " << comment << "\n";
  };
  os << "# cxltier runtime configuration: the effective values, every key (docs/configuration.md).\n"
     << "# [where] after a comment says which file line, variable or call set the value.\n";
  std::string group;
  for (const Field &f : kFields) {
    std::string_view n = f.name;
    size_t dot = n.find('.');
    std::string g = dot == std::string_view::npos ? "" : std::string(n.substr(0, dot));
    if (g != group) {
      os << "\n[" << g << "]\n";
      group = g;
    }
    line(f.name, std::string(dot == std::string_view::npos ? n : n.substr(dot + 1)), f.get(*this, nullptr), f.doc);
  }
  if (tiers.empty())
    os << "\n# [[tiers]]: none configured: the runtime uses every tier of the topology with default budgets.\n";
  for (size_t i = 0; i < tiers.size(); ++i) {
    os << "\n[[tiers]]  # tiers." << i << "\n";
    TierConfig shown = tiers[i];
    shown.name = tier_config_name(tiers[i], i);
    for (const Field &f : kTierFields)
      line("tiers." + std::to_string(i) + "." + f.name, f.name, f.get(*this, &shown), f.doc);
  }
  return os.str();
}

std::vector<std::string> RuntimeConfig::keys() {
  std::vector<std::string> out = global_key_names();
  for (const Field &f : kTierFields) out.push_back(std::string("tiers.<n>.") + f.name);
  return out;
}

}  // namespace cxltier
