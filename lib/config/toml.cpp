// SPDX-License-Identifier: Apache-2.0
// The configuration as TOML: loading a file or a string through the key table (keys.hpp),
// with every error naming the file, line and column, and to_toml(), the effective values.
#include "lib/config/keys.hpp"
#include "lib/core/read_upto.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cxltier {

using namespace cfg;

namespace {

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

}  // namespace

void RuntimeConfig::load_toml_file(const std::string &path) {
  // O_NONBLOCK and a regular-file check: a FIFO (or a device) given as the config file is
  // refused at once instead of blocking forever waiting for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(CXLT_ERROR_IO, "cannot open config file '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || ::fcntl(fd, F_SETFL, 0) != 0) {
    ::close(fd);
    fail(CXLT_ERROR_IO, "cannot read config file '", path, "': not a regular file (a FIFO, device or directory)");
  }
  std::string text;
  int err = 0;
  try {
    err = read_upto(fd, text, std::numeric_limits<size_t>::max());
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  if (err != 0) fail(CXLT_ERROR_IO, "cannot read config file '", path, "': ", std::strerror(err));
  std::string dir = std::filesystem::path(path).parent_path().string();
  load_text(*this, text, path, dir.empty() ? "." : dir);
}

void RuntimeConfig::load_toml_string(const std::string &text, const std::string &origin) {
  load_text(*this, text, origin, "");
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
    line(f.name, std::string(dot == std::string_view::npos ? n : n.substr(dot + 1)), field_get(f, *this, nullptr), f.doc);
  }
  if (tiers.empty())
    os << "\n# [[tiers]]: none configured: the runtime uses every tier of the topology with default budgets.\n";
  for (size_t i = 0; i < tiers.size(); ++i) {
    os << "\n[[tiers]]  # tiers." << i << "\n";
    TierConfig shown = tiers[i];
    shown.name = tier_config_name(tiers[i], i);
    for (const Field &f : tier_fields())
      line("tiers." + std::to_string(i) + "." + f.name, f.name, field_get(f, *this, &shown), f.doc);
  }
  return os.str();
}

}  // namespace cxltier
