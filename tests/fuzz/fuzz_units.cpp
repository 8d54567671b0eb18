// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the parsers of sizes, numbers and comma lists that every command-line
// option and configuration value goes through (include/cxltier/tools/units.hpp). Each must return or
// throw cxltier::Error with CXLT_ERROR_INVALID_ARGUMENT, never crash or throw anything else;
// a value they accept must mean what it says (a size printed as plain bytes parses back to
// itself, every list item parses alone as it did in the list).
#include "fuzz_util.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

using namespace cxltier;

namespace {

template <typename F>
void expect_ok_or_invalid(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    FUZZ_CHECK(e.code() == CXLT_ERROR_INVALID_ARGUMENT, "code %d: %s", static_cast<int>(e.code()), e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view text(reinterpret_cast<const char *>(data), size);
  expect_ok_or_invalid([&] {
    uint64_t v = parse_size(text, "fuzz size");
    FUZZ_CHECK(parse_size(std::to_string(v), "round trip") == v, "%llu", static_cast<unsigned long long>(v));
    (void)format_bytes(v);
  });
  expect_ok_or_invalid([&] {
    uint64_t v = parse_u64(text, "fuzz u64");
    FUZZ_CHECK(parse_u64(std::to_string(v), "round trip") == v, "%llu", static_cast<unsigned long long>(v));
  });
  expect_ok_or_invalid([&] {
    int64_t v = parse_i64(text, "fuzz i64");
    FUZZ_CHECK(parse_i64(std::to_string(v), "round trip") == v, "%lld", static_cast<long long>(v));
  });
  expect_ok_or_invalid([&] {
    double v = parse_double(text, "fuzz double");
    FUZZ_CHECK(std::isfinite(v), "parse_double accepted a non-finite value");
  });
  expect_ok_or_invalid([&] { (void)parse_bool(text, "fuzz bool"); });
  expect_ok_or_invalid([&] {
    auto items = split_list(text, "fuzz list");
    for (const std::string &item : items) FUZZ_CHECK(!item.empty(), "an empty list item was accepted");
  });
  expect_ok_or_invalid([&] {
    auto sizes = parse_size_list(text, "fuzz size list");
    auto items = split_list(text, "fuzz size list");
    FUZZ_CHECK(sizes.size() == items.size(), "%zu sizes from %zu items", sizes.size(), items.size());
    for (size_t i = 0; i < items.size(); ++i)
      FUZZ_CHECK(parse_size(items[i], "item") == sizes[i], "item %zu parses differently alone", i);
  });
  expect_ok_or_invalid([&] {
    auto values = parse_double_list(text, "fuzz double list");
    for (double v : values) FUZZ_CHECK(std::isfinite(v), "a non-finite list value was accepted");
  });
  return 0;
}
