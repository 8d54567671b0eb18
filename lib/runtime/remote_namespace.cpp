// SPDX-License-Identifier: Apache-2.0
// The remote tier's namespace rules, on the core side that declares the tier (remote.hpp): the
// configuration validates a namespace and the runtime derives one without the remote client.
#include "lib/runtime/remote.hpp"

#include <string>
#include <string_view>

namespace cxltier::remote {

std::string check_namespace(std::string_view ns) {
  if (ns.empty()) return "is empty";
  if (ns.size() > 200) return "is longer than 200 bytes";
  for (char c : ns) {
    if (c <= ' ' || c > '~') return "holds a blank, a control or a non-ASCII character";
    if (c == '{' || c == '}') return "holds a brace (a Redis Cluster hash tag would put every block on one server)";
  }
  return "";
}

}  // namespace cxltier::remote

namespace cxltier {

std::string remote_namespace(const RuntimeConfig &cfg) {
  if (!cfg.remote.ns.empty()) return cfg.remote.ns;
  const BlockGeometry &g = cfg.geometry;
  std::string ns = cfg.remote.model.empty() ? std::string("model") : cfg.remote.model;
  ns += '/' + std::to_string(g.layers) + 'x' + std::to_string(g.kv_heads) + 'x' + std::to_string(g.head_dim) + 'x' +
        std::to_string(g.bytes_per_element) + 'x' + std::to_string(g.tokens_per_block) + (g.k_and_v ? "kv" : "latent");
  ns += '/' + (cfg.remote.dtype.empty() ? "e" + std::to_string(g.bytes_per_element) : cfg.remote.dtype);
  ns += "/tp" + std::to_string(cfg.remote.tp_rank);
  return ns;
}

}  // namespace cxltier
