// SPDX-License-Identifier: Apache-2.0
// Parsing and printing of the quantities users type: sizes, numbers and comma lists.
// Every parser throws Error(CXLT_ERROR_INVALID_ARGUMENT) with a message that quotes the input
// and names `what` (the option or field it came from).
//
// Unstable: part of the cxltier CLI's toolkit (include/cxltier/tools/), not of the engine's
// contract. Its names, types and behaviour may change in any release; the ABI and API promise
// covers cxltier.h and the C++ headers beside it in include/cxltier/, not this file.
#pragma once

#include <cxltier/cxltier.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cxltier {

// "5242880", "5MiB", "5 MiB", "32GiB", "1.5GiB", "4K" (K/M/G/T and KiB/MiB/GiB/TiB are binary,
// kB/MB/GB/TB are decimal, B or nothing is bytes). Fractions are allowed when the result is a
// whole number of bytes. Negative, empty, overflowing or unknown-suffix input is an error.
CXLT_API uint64_t parse_size(std::string_view text, std::string_view what);
CXLT_API uint64_t parse_u64(std::string_view text, std::string_view what);
CXLT_API int64_t parse_i64(std::string_view text, std::string_view what);
CXLT_API double parse_double(std::string_view text, std::string_view what);  // finite only
CXLT_API bool parse_bool(std::string_view text, std::string_view what);      // 1/true/yes/on, 0/false/no/off
// Split on commas, trim blanks; empty items are an error ("a,,b").
CXLT_API std::vector<std::string> split_list(std::string_view text, std::string_view what);
CXLT_API std::vector<double> parse_double_list(std::string_view text, std::string_view what);
CXLT_API std::vector<uint64_t> parse_size_list(std::string_view text, std::string_view what);

// "5.00 MiB", "32.0 GiB", "512 B".
CXLT_API std::string format_bytes(uint64_t bytes);

}  // namespace cxltier
