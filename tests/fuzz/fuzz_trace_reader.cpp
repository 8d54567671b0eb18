// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: any bytes, read as each trace format (and detected) in both modes. The reader
// must return or throw cxltier::Error, never crash, hang or read out of bounds, and its counters
// must agree with what it returned. (Written by the trace engineer; moved here from tests/trace.)
#include "fuzz_util.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/trace.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace cxltier::trace;
  std::string bytes(reinterpret_cast<const char *>(data), size);
  const std::optional<Format> formats[] = {std::nullopt, Format::mooncake, Format::bailian, Format::dynamo,
                                           Format::attention};
  for (const auto &f : formats) {
    for (bool strict : {false, true}) {
      try {
        Reader r = Reader::from_memory(bytes, {.format = f, .strict = strict, .max_line_bytes = 1 << 16});
        Request q;
        uint64_t refs = 0, requests = 0;
        while (r.next(q)) {
          refs += q.blocks.size();
          ++requests;
          // Attention traces carry one mass and one sequence per reference; others none.
          FUZZ_CHECK(q.attention.empty() || q.attention.size() == q.blocks.size(), "%zu masses for %zu references",
                     q.attention.size(), q.blocks.size());
          FUZZ_CHECK(q.sequences.empty() || q.sequences.size() == q.blocks.size(), "%zu sequences for %zu references",
                     q.sequences.size(), q.blocks.size());
        }
        FUZZ_CHECK(requests == r.stats().requests, "returned %llu requests, stats say %llu",
                   static_cast<unsigned long long>(requests), static_cast<unsigned long long>(r.stats().requests));
        FUZZ_CHECK(refs == r.stats().references, "returned %llu block references, stats say %llu",
                   static_cast<unsigned long long>(refs), static_cast<unsigned long long>(r.stats().references));
      } catch (const cxltier::Error &) {
      }
    }
  }
  return 0;
}
