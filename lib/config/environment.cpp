// SPDX-License-Identifier: Apache-2.0
// CXLT_* environment variables: each configuration key has one (CXLT_POLICY_ALPHA,
// CXLT_TIERS_0_BUDGET); a variable that looks like one but is not is warned about, by name.
#include "lib/config/keys.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include <unistd.h>  // environ (declared with _GNU_SOURCE)

namespace cxltier {

using namespace cfg;

namespace {

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
  for (const Field &f : tier_fields()) known_env.push_back("CXLT_TIERS_0_" + upper(f.name));

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
        for (const Field &tf : tier_fields())
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

}  // namespace cxltier
