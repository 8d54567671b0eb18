// SPDX-License-Identifier: Apache-2.0
// The LRFU policy (Lee et al., ACM SIGMETRICS 1999) as the spec states it, its parameters,
// and the per-block policy state that the score store keeps.
//
//   score[t]      = alpha * attention[t] + (1 - alpha) * score[t-1]      (starts at 0.0)
//   priority      = (1 - score) * (1 - exp(-beta * steps_since_access))  (higher evicts sooner)
//   beta == 0     : priority = 1 - score (the recency term is removed, as the spec says)
//
// What happens to the score on a step that does not touch the block is a choice the spec's
// per-step formula leaves open; both readings are offered (ScoreMode):
//   touch (default): the score changes only when the block is touched. The spec updates
//       "once per decode step for each block that the step touches"; recency is beta's job.
//   decay: every step updates every block, untouched blocks with attention 0, so the score
//       decays by (1 - alpha) per idle step: score_now = score * (1 - alpha)^steps_idle. This
//       is the original LRFU's CRF; recency is then counted twice (alpha and beta), which the
//       source document warns about.
// Both are computed lazily in O(1) per block (no per-step sweep over all blocks).
#pragma once

#include <cxltier/cxltier.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cxltier {

enum class ScoreMode : uint8_t { touch = 0, decay = 1 };
CXLT_API const char *score_mode_name(ScoreMode m) noexcept;
CXLT_API std::optional<ScoreMode> parse_score_mode(std::string_view s) noexcept;

struct LrfuParams {
  double alpha = 0.05;  // weight of the newest attention, in (0, 1]; simulated optimum, provisional
  double beta = 0.001;  // recency decay per decode step, >= 0; uncalibrated design parameter
  ScoreMode mode = ScoreMode::touch;
  // Throws Error(CXLT_ERROR_INVALID_ARGUMENT) naming the parameter and the value.
  void validate() const;
};

// One LRFU score update.
constexpr double lrfu_update(double score, double attention, double alpha) noexcept {
  return alpha * attention + (1.0 - alpha) * score;
}

// Batched update: scores[i] = alpha*attention[i] + (1-alpha)*scores[i] (touch mode). Written
// as a plain loop over contiguous arrays so that the compiler vectorizes it.
CXLT_API void lrfu_update_batch(double *scores, const float *attention, size_t n, double alpha) noexcept;

// The score of a block whose stored score is `score`, idle for `steps_idle` steps (decay mode
// multiplies by (1-alpha)^steps_idle; touch mode returns `score`).
CXLT_API double lrfu_effective_score(double score, uint64_t steps_idle, const LrfuParams &p) noexcept;

// The stored score after one access with `attention`, for a block whose stored score is
// `score` and whose previous access was `steps_idle` steps ago: touch mode applies
// lrfu_update once; decay mode first applies the idle steps in between (attention 0 each:
// (1-alpha)^(steps_idle-1)) and then the update, so it equals the per-step formula run on every
// step. Two accesses within one step are two updates in both modes.
CXLT_API double lrfu_access(double score, uint64_t steps_idle, double attention, const LrfuParams &p) noexcept;

// recency_decay = 1 - exp(-beta * steps_since_access); exactly 1.0 once beta * steps reaches
// kRecencySaturation (where 1.0 is the correctly rounded value).
inline constexpr double kRecencySaturation = 40.0;
CXLT_API double lrfu_recency_decay(uint64_t steps_since_access, double beta) noexcept;

// Eviction priority of a block with stored score `score`, idle `steps_since_access` steps.
// Higher evicts sooner. Every eviction decision in the library goes through this function.
CXLT_API double lrfu_priority(double score, uint64_t steps_since_access, const LrfuParams &p) noexcept;

// Half-life of the score in decode steps: ln 0.5 / ln(1 - alpha) (13.51 for alpha = 0.05;
// 0 for alpha = 1).
CXLT_API double lrfu_half_life(double alpha) noexcept;

// A block's policy state, kept in the score store whether or not the block is resident.
struct PolicyState {
  double score = 0.0;         // LRFU score, stored at last_access (see lrfu_effective_score)
  uint64_t last_access = 0;   // decode step of the last access or admission
  uint64_t accesses = 0;      // accesses ever recorded (LFU's count)
  uint64_t tick = 0;          // global reference sequence number of the last access (LRU/LFU order within a step)
};

// Eviction policies available to the runtime and the replay.
enum class PolicyKind : uint8_t { lrfu, lru, fifo, lfu, arc, opt };
CXLT_API const char *policy_kind_name(PolicyKind k) noexcept;
CXLT_API std::optional<PolicyKind> parse_policy_kind(std::string_view s) noexcept;

// Every policy parameter in one place, with its default and its status (the source's
// appendix K.7, extended by the parameters this library adds). `cxltier params` prints it.
struct ParameterInfo {
  const char *name;     // config key
  const char *value;    // default, as text
  const char *unit;
  const char *status;   // "uncalibrated", "simulated (provisional)", "withdrawn", "derived", "design choice", "measured"
  const char *meaning;
};
CXLT_API const std::vector<ParameterInfo> &parameter_table();

}  // namespace cxltier
