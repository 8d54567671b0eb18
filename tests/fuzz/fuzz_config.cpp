// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the runtime configuration as users write it. Any bytes are read as a TOML
// file (RuntimeConfig::load_toml_string), then every "NAME=value" line as a CXLT_* environment
// variable and as a set(key, value) call. Each must succeed or throw cxltier::Error, never
// crash or throw anything else; a configuration that validates must survive to_toml() and
// load back to the same values (what `cxltier params --toml` prints can be used as a file).
// The "[where]" origin comments are left out of the comparison: loading the text back makes
// every key come from "<to_toml output>:LINE:COL", which is right, not a difference in value.
#include "fuzz_util.hpp"

#include <cxltier/config.hpp>
#include <cxltier/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

using cxltier::RuntimeConfig;

namespace {

// to_toml() without the origin comments: the values only.
std::string values_toml(RuntimeConfig c) {
  c.origins.clear();
  return c.to_toml();
}

void round_trip(const RuntimeConfig &c) {
  try {
    c.validate();
  } catch (const cxltier::Error &) {
    return;  // refusing a bad configuration is the right answer
  }
  const std::string text = values_toml(c);
  RuntimeConfig back;
  try {
    back.load_toml_string(c.to_toml(), "<to_toml output>");
    back.validate();
  } catch (const cxltier::Error &e) {
    FUZZ_CHECK(false, "to_toml() output does not load back: %s\n--- text:\n%s", e.what(), c.to_toml().c_str());
  }
  const std::string again = values_toml(back);
  FUZZ_CHECK(again == text, "to_toml() differs after a round trip\n--- first:\n%s\n--- second:\n%s", text.c_str(),
             again.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  RuntimeConfig c;
  try {
    c.load_toml_string(text, "<fuzz>");
    round_trip(c);
  } catch (const cxltier::Error &) {
  }

  // The same bytes as NAME=value lines: environment variables, then set() calls.
  std::vector<std::pair<std::string, std::string>> vars;
  size_t start = 0;
  while (start <= text.size() && vars.size() < 64) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (size_t eq = line.find('='); eq != std::string::npos) vars.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    start = end + 1;
  }
  if (vars.empty()) return 0;
  RuntimeConfig e;
  try {
    e.apply_environment_vars(vars);
    round_trip(e);
  } catch (const cxltier::Error &) {
  }
  RuntimeConfig s;
  for (const auto &[k, v] : vars) {
    try {
      s.set(k, v);
    } catch (const cxltier::Error &) {
    }
  }
  round_trip(s);
  return 0;
}
