// SPDX-License-Identifier: Apache-2.0
// LRFU formulas, parameter validation, policy names and the parameter table.
#include <cxltier/error.hpp>
#include <cxltier/policy.hpp>

#include "lib/core/text.hpp"

#include <cmath>
#include <cstring>

namespace cxltier {

using text::iequal;

const char *score_mode_name(ScoreMode m) noexcept { return m == ScoreMode::decay ? "decay" : "touch"; }

std::optional<ScoreMode> parse_score_mode(std::string_view s) noexcept {
  if (iequal(s, "touch")) return ScoreMode::touch;
  if (iequal(s, "decay")) return ScoreMode::decay;
  return std::nullopt;
}

void LrfuParams::validate() const {
  if (!(alpha > 0.0 && alpha <= 1.0))  // also rejects NaN
    fail(CXLT_ERROR_INVALID_ARGUMENT, "alpha = ", alpha, " is outside (0, 1]");
  if (!(beta >= 0.0) || !std::isfinite(beta))
    fail(CXLT_ERROR_INVALID_ARGUMENT, "beta = ", beta, " must be a finite number >= 0");
}

void lrfu_update_batch(double *scores, const float *attention, size_t n, double alpha) noexcept {
  const double keep = 1.0 - alpha;
  for (size_t i = 0; i < n; ++i) scores[i] = alpha * static_cast<double>(attention[i]) + keep * scores[i];
}

double lrfu_effective_score(double score, uint64_t steps_idle, const LrfuParams &p) noexcept {
  if (p.mode == ScoreMode::touch || steps_idle == 0) return score;
  // (1-alpha)^d; std::pow is exact for the integer exponent's intent and monotone in d.
  return score * std::pow(1.0 - p.alpha, static_cast<double>(steps_idle));
}

double lrfu_access(double score, uint64_t steps_idle, double attention, const LrfuParams &p) noexcept {
  if (p.mode == ScoreMode::decay && steps_idle > 1) score = lrfu_effective_score(score, steps_idle - 1, p);
  return lrfu_update(score, attention, p.alpha);
}

double lrfu_recency_decay(uint64_t steps_since_access, double beta) noexcept {
  // -expm1(-x) = 1 - exp(-x), accurate for small x (beta * steps is often ~1e-3). From x = 40
  // on, exp(-x) < 2^-57, so the correctly rounded value is exactly 1.0: returned as such, the
  // function is monotone to the last bit however far out (expm1 itself need not be).
  const double x = beta * static_cast<double>(steps_since_access);
  if (x >= kRecencySaturation) return 1.0;
  return -std::expm1(-x);
}

double lrfu_priority(double score, uint64_t steps_since_access, const LrfuParams &p) noexcept {
  const double s = lrfu_effective_score(score, steps_since_access, p);
  if (p.beta == 0.0) return 1.0 - s;
  return (1.0 - s) * lrfu_recency_decay(steps_since_access, p.beta);
}

double lrfu_half_life(double alpha) noexcept {
  if (alpha >= 1.0) return 0.0;
  return std::log(0.5) / std::log(1.0 - alpha);
}

const char *policy_kind_name(PolicyKind k) noexcept {
  switch (k) {
    case PolicyKind::lrfu: return "lrfu";
    case PolicyKind::lru: return "lru";
    case PolicyKind::fifo: return "fifo";
    case PolicyKind::lfu: return "lfu";
    case PolicyKind::arc: return "arc";
    case PolicyKind::opt: return "opt";
  }
  return "?";
}

std::optional<PolicyKind> parse_policy_kind(std::string_view s) noexcept {
  for (PolicyKind k : {PolicyKind::lrfu, PolicyKind::lru, PolicyKind::fifo, PolicyKind::lfu, PolicyKind::arc, PolicyKind::opt})
    if (iequal(s, policy_kind_name(k))) return k;
  return std::nullopt;
}

const std::vector<ParameterInfo> &parameter_table() {
  static const std::vector<ParameterInfo> table = {
      {"policy.alpha", "0.05", "1", "simulated (provisional)",
       "LRFU weight of the newest attention; half-life ln 0.5 / ln(1-alpha) = 13.5 decode steps. The optimum of "
       "one synthetic simulation (alpha is non-monotonic there); not calibrated on real traffic. "
       "Sweep it jointly with beta (cxltier sweep)."},
      {"policy.alpha = 0.2", "never", "1", "withdrawn",
       "Was never validated and is withdrawn: never a default, never recommended."},
      {"policy.beta", "0.001", "1/decode step", "uncalibrated",
       "Recency decay: 1/beta = 1,000 decode steps (~100 s at 10 tokens/s) before idleness counts fully. "
       "A design parameter, not derived or fitted. beta = 0 removes the recency term."},
      {"policy.score_mode", "touch", "-", "design choice",
       "touch: a score changes only when its block is touched; decay: every idle step multiplies it by (1-alpha)."},
      {"geometry.tokens_per_block", "16", "tokens", "design choice",
       "Block size: 16 tokens of one sequence, every layer and head (5.00 MiB for the Llama-3-70B shape)."},
      {"policy.persist", "true", "-", "simulated (provisional)",
       "Keep a block's policy state when it leaves every tier and restore it on re-admission "
       "(worth +24.85 to +34.15 points in the source's synthetic simulation; measure on your traces)."},
      {"policy.index_buckets", "256", "buckets", "design choice",
       "Score buckets of the exact LRFU eviction index: more buckets tighten its bounds (fewer blocks examined "
       "per victim) and cost more per victim with many distinct scores. Never changes a decision."},
      {"store.capacity", "1048576", "policy states", "design choice",
       "Most policy states the score store keeps (resident or not); when full, the non-resident state that "
       "matters least is forgotten first (see docs/policy.md)."},
      {"runtime.high_watermark", "0.95", "fraction of budget", "uncalibrated",
       "Background demotion starts when a tier holds more than this fraction of its budget."},
      {"runtime.low_watermark", "0.90", "fraction of budget", "uncalibrated",
       "Background demotion stops when a tier is back under this fraction."},
      {"runtime.promotion", "score-above-victim", "-", "design choice",
       "When an accessed block outside the fastest tier moves up: when its score is above that of the next victim "
       "of the tier above (or 'never', or 'always')."},
      {"runtime.migration_threads", "2", "threads", "uncalibrated", "Worker threads that copy blocks between tiers."},
      {"runtime.migration_batch", "8", "blocks", "uncalibrated", "Blocks one background pass demotes per tier at most."},
  };
  return table;
}

}  // namespace cxltier
