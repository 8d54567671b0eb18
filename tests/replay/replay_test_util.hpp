// SPDX-License-Identifier: Apache-2.0
// Helpers for the replay tests: where the shared traces are, and an independent reading of a
// trace into its block-reference stream (nlohmann::json and zlib's gz* calls, not our reader).
#pragma once

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace cxlt_test {

inline std::string trace_dir() {
  const char *d = std::getenv("CXLT_TEST_DATA");
  return std::string(d ? d : "tests/data") + "/traces/";
}

inline std::string read_text(const std::string &path) {
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    gzFile g = gzopen(path.c_str(), "rb");
    std::string out;
    if (!g) return out;
    char buf[65536];
    int n;
    while ((n = gzread(g, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    gzclose(g);
    return out;
  }
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The block-reference stream: every request (or attention step) in file order, each id in
// order. Mooncake: hash_ids; Dynamo: request_end events' input_sequence_hashes; attention
// traces: each step's blocks (the header line skipped).
inline std::vector<uint64_t> reference_stream(const std::string &path, uint64_t *requests = nullptr) {
  std::vector<uint64_t> ids;
  std::istringstream in(read_text(path));
  std::string line;
  uint64_t reqs = 0;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line);
    const nlohmann::json *arr = nullptr;
    if (j.contains("hash_ids")) {
      arr = &j["hash_ids"];
    } else if (j.contains("event")) {
      if (j["event"]["event_type"] != "request_end") continue;
      arr = &j["event"]["request"]["replay"]["input_sequence_hashes"];
    } else if (j.contains("step")) {
      arr = &j["blocks"];
    } else {
      continue;  // the attention header
    }
    ++reqs;
    for (const auto &v : *arr) ids.push_back(v.get<uint64_t>());
  }
  if (requests) *requests = reqs;
  return ids;
}

}  // namespace cxlt_test
