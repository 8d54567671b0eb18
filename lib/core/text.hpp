// SPDX-License-Identifier: Apache-2.0
// Small ASCII text helpers shared by the parsers of outside input (configuration keys and
// values, units, policy and topology names). Internal to the library.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cxltier::text {

// ASCII case-insensitive equality ("LRFU" equals "lrfu"); other bytes compare as they are.
bool iequal(std::string_view a, std::string_view b) noexcept;

// ASCII upper / lower case copies.
std::string upper(std::string_view s);
std::string lower(std::string_view s);

// `s` without leading and trailing spaces and tabs.
std::string_view trim(std::string_view s) noexcept;

// The shortest "%g" form of `v` that reads back as the same double (0.05, not
// 0.050000000000000003).
std::string shortest(double v);

// Edit distance with adjacent transpositions counting one edit (optimal string alignment).
size_t edit_distance(std::string_view a, std::string_view b);

// The closest candidate when it is close enough to be a typo (case-insensitive; at most 2
// edits, and less than a third of the word), else "".
std::string closest(std::string_view word, const std::vector<std::string> &candidates);

// " (did you mean 'X'?)" for the closest candidate, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string> &candidates);

}  // namespace cxltier::text
