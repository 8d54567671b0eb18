// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: any bytes, read as each format in both modes. The reader must return or
// throw cxltier::Error, never crash, hang or read out of bounds (build with -Dfuzz=true, clang).
#include <cxltier/error.hpp>
#include <cxltier/trace.hpp>

#include <cstddef>
#include <cstdint>
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
        uint64_t refs = 0;
        while (r.next(q)) refs += q.blocks.size();
        if (refs != r.stats().references) __builtin_trap();
      } catch (const cxltier::Error &) {
      }
    }
  }
  return 0;
}
