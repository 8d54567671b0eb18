// SPDX-License-Identifier: Apache-2.0
// Inside the configuration: the one table of keys that TOML loading, set(), the CXLT_*
// environment, to_toml() and keys() all read, so that they can never disagree, and the helpers
// the configuration's files share. Internal to the library.
#pragma once

#include <cxltier/config.hpp>
#include <cxltier/error.hpp>

#include "lib/core/text.hpp"
#include "lib/memory/tier_ops.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cxltier::cfg {

using text::did_you_mean;
using text::iequal;
using text::trim;
using text::upper;

inline constexpr unsigned kMaxTiers = CXLT_MAX_TIERS;
inline constexpr unsigned kMaxNumaNode = 1023;  // Linux: MAX_NUMNODES is at most 1024

// --- values as TOML literals (keys.cpp) ---

// Shortest text that reads back as the same double, always with a '.' or an exponent so that
// TOML sees a float ("1.0", not "1").
std::string fmt_double(double v);

// A byte count as the largest binary unit that divides it ("4GiB", "1536MiB"), else bytes.
std::string fmt_size(uint64_t bytes);

// A TOML basic string, escaped.
std::string toml_quote(std::string_view s);

// --- the closed sets of names a value may take ---

// "auto" (lib/memory/choose.hpp), then every backend a tier may name (tiers/registry.cpp).
const std::vector<std::string> &backend_choices();
inline constexpr const char *kLayouts[] = {"contiguous", "per-layer"};  // cuda backend (docs/gpu.md)
inline constexpr const char *kGroups[] = {"geometry", "policy", "store", "runtime", "remote"};

// At most 31 of A-Z a-z 0-9 _ - + .
bool valid_tier_name(std::string_view s);

// --- the key table ---

// How a TOML value is accepted (set() and the environment always take text).
enum class Type {
  size,     // integer of bytes, or a string with a unit ("4GiB")
  uint,     // integer
  number,   // float or integer
  boolean,  // true / false
  text,     // string
  nodes,    // array of integers
};

inline const char *type_noun(Type t) {
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
  // A backend's option key (set and get are nullptr): its value lives in TierConfig::options.
  const TierOption *option = nullptr;
};

// Parse `v` into the configuration / the value as a TOML literal, for any field.
void field_set(const Field &f, RuntimeConfig &c, TierConfig *t, std::string_view v, const std::string &what);
std::string field_get(const Field &f, const RuntimeConfig &c, const TierConfig *t);

// Every global key ("geometry.layers", ...), in the order to_toml() writes them.
extern const std::span<const Field> kFields;
// Every tier field ("budget", ...), the backends' option keys after `backend`, in the order
// to_toml() writes them.
const std::vector<Field> &tier_fields();

const Field *find_field(std::string_view name);
const Field *find_tier_field(std::string_view name);
std::vector<std::string> global_key_names();
std::vector<std::string> tier_field_names();
std::string tier_keys_listed();  // "name, kind, ..." for messages

struct Resolved {
  const Field *field = nullptr;
  int tier = -1;    // -1: a global key
  std::string key;  // canonical spelling
};

// "policy.alpha" or "tiers.3.budget". Throws Error(CONFIG) for an unknown key.
Resolved resolve_key(std::string_view key);

// Apply one value at `layer`. A key whose value came from a higher layer keeps it (the value
// is still parsed, so a bad one is an error wherever it comes from). `what` names the key in
// messages; `where` is recorded as the origin.
void apply_value(RuntimeConfig &c, const Resolved &r, std::string_view text, ConfigLayer layer, const std::string &where);

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

}  // namespace cxltier::cfg
