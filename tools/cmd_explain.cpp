// SPDX-License-Identifier: Apache-2.0
// `cxltier explain`: the LRFU policy worked step by step, so a user can see it work (per-step
// scores in exact and in the source document's rounded form, the half-life, and the recency
// decay and priority of a block with a given score and idle time). `cxltier params`: every
// policy parameter with its default and its status.
#include "commands.hpp"

#include <cxltier/policy.hpp>
#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

namespace {

struct ExplainOptions {
  std::string alpha = "0.05";
  std::string beta = "0.001";
  std::string mode = "touch";
  std::string attention;
  std::string score;
  std::string steps = "0";
  bool json = false;
};

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

int run_explain(const ExplainOptions &o) {
  using namespace cxltier;
  LrfuParams p;
  p.alpha = parse_double(o.alpha, "--alpha");
  p.beta = parse_double(o.beta, "--beta");
  auto m = parse_score_mode(o.mode);
  if (!m) fail(CXLT_ERROR_INVALID_ARGUMENT, "--mode: '", o.mode, "' is not touch or decay");
  p.mode = *m;
  p.validate();
  std::vector<double> att;
  if (!o.attention.empty()) att = parse_double_list(o.attention, "--attention");
  for (double a : att)
    if (a < 0.0 || a > 1.0) fail(CXLT_ERROR_INVALID_ARGUMENT, "--attention: ", a, " is outside [0, 1]");
  if (p.alpha == 0.2)
    std::fprintf(stderr, "cxltier explain: warning: alpha = 0.2 was never validated and is withdrawn; "
                         "the default (0.05) is the provisional simulated optimum\n");

  std::vector<double> scores, rounded;
  double s = 0, r = 0;
  for (double a : att) {
    s = lrfu_update(s, a, p.alpha);  // one touch per step, as the spec's table
    r = std::round(lrfu_update(r, a, p.alpha) * 1000.0) / 1000.0;
    scores.push_back(s);
    rounded.push_back(r);
  }
  double score = o.score.empty() ? s : parse_double(o.score, "--score");
  if (score < 0.0 || score > 1.0) fail(CXLT_ERROR_INVALID_ARGUMENT, "--score: ", score, " is outside [0, 1]");
  uint64_t idle = parse_u64(o.steps, "--steps-since-access");
  double decay = lrfu_recency_decay(idle, p.beta);
  double prio = lrfu_priority(score, idle, p);
  double half = lrfu_half_life(p.alpha);

  if (o.json) {
    // Scores are printed to 15 significant digits, the decimal precision a double carries, so
    // that binary noise (0.05830814062499999) does not hide the exact decimal (0.058308140625).
    auto r15 = [](double v) { return std::strtod(num(v).c_str(), nullptr); };
    std::vector<double> scores15;
    for (double v : scores) scores15.push_back(r15(v));
    nlohmann::json j;
    j["alpha"] = p.alpha;
    j["beta"] = p.beta;
    j["score_mode"] = score_mode_name(p.mode);
    j["half_life_steps"] = half;
    j["scores"] = scores15;
    j["scores_rounded_each_step"] = rounded;
    j["priority"] = {{"score", score},
                     {"steps_since_access", idle},
                     {"effective_score", lrfu_effective_score(score, idle, p)},
                     {"recency_decay", p.beta == 0.0 ? nlohmann::json(nullptr) : nlohmann::json(decay)},
                     {"priority", prio}};
    std::printf("%s\n", j.dump(2).c_str());
    return cxltier::cli::kExitOk;
  }
  std::printf("LRFU (Lee et al., SIGMETRICS 1999): score = alpha x attention + (1 - alpha) x score\n");
  std::printf("alpha = %s  (half-life ln 0.5 / ln(1 - alpha) = %.1f decode steps)\n", num(p.alpha).c_str(), half);
  std::printf("beta  = %s  (1/beta = %s decode steps)%s\n", num(p.beta).c_str(),
              p.beta > 0 ? num(1.0 / p.beta).c_str() : "inf", p.beta == 0 ? ": recency term removed" : "");
  std::printf("score mode: %s\n\n", score_mode_name(p.mode));
  if (!att.empty()) {
    std::printf("%-5s %-10s %-42s %-22s %s\n", "step", "attention", "calculation", "score (exact)", "rounded each step");
    double prev = 0, prev_r = 0;
    for (size_t i = 0; i < att.size(); ++i) {
      char calc[96];
      std::snprintf(calc, sizeof calc, "%s x %s + %s x %s", num(p.alpha).c_str(), num(att[i]).c_str(),
                    num(1.0 - p.alpha).c_str(), num(prev).c_str());
      std::printf("t%-4zu %-10s %-42s %-22s %.3f\n", i + 1, num(att[i]).c_str(), calc, num(scores[i]).c_str(), rounded[i]);
      prev = scores[i];
      (void)prev_r;
    }
    std::printf("\nThe exact column is double-precision arithmetic printed to 15 significant digits. The last\n"
                "column rounds to three decimals at every step before the next update, as the source\n"
                "document's table does (0.023, 0.028, 0.042, 0.044, 0.059 for its example); that is why the\n"
                "two differ.\n\n");
  }
  std::printf("priority = (1 - score) x recency_decay, recency_decay = 1 - exp(-beta x steps_since_access)\n");
  std::printf("  score %s, %llu steps since access%s\n", num(score).c_str(), static_cast<unsigned long long>(idle),
              p.mode == ScoreMode::decay ? (" (effective " + num(lrfu_effective_score(score, idle, p)) + ")").c_str() : "");
  if (p.beta == 0)
    std::printf("  beta = 0: priority = 1 - score = %.6f\n", prio);
  else
    std::printf("  recency_decay %.6f, priority %.6f\n", decay, prio);
  std::printf("  higher priority evicts sooner (priority is in [0, 1])\n");
  return cxltier::cli::kExitOk;
}

int run_params(bool json) {
  const auto &t = cxltier::parameter_table();
  if (json) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto &p : t)
      a.push_back({{"name", p.name}, {"default", p.value}, {"unit", p.unit}, {"status", p.status}, {"meaning", p.meaning}});
    std::printf("%s\n", a.dump(2).c_str());
    return cxltier::cli::kExitOk;
  }
  std::printf("%-26s %-20s %-20s %-24s\n", "parameter", "default", "unit", "status");
  for (const auto &p : t) std::printf("%-26s %-20s %-20s %-24s\n", p.name, p.value, p.unit, p.status);
  std::printf("\nWhat each one does:\n");
  for (const auto &p : t) std::printf("  %s: %s\n", p.name, p.meaning);
  return cxltier::cli::kExitOk;
}

}  // namespace

static cxltier::cli::Registrar reg_explain(30, [](CLI::App &app) {
  auto o = std::make_shared<ExplainOptions>();
  CLI::App *sub = app.add_subcommand("explain", "Show the LRFU policy at work: per-step scores, half-life, priority");
  sub->add_option("--alpha", o->alpha, "LRFU alpha in (0, 1]")->capture_default_str();
  sub->add_option("--beta", o->beta, "recency decay per decode step, >= 0")->capture_default_str();
  sub->add_option("--mode", o->mode, "score on untouched steps: touch (unchanged) or decay (x (1-alpha) per step)")
      ->capture_default_str();
  sub->add_option("--attention", o->attention, "attention mass per step, comma-separated (e.g. 0.45,0.12,0.30)");
  sub->add_option("--score", o->score, "score for the priority (default: the last computed score)");
  sub->add_option("--steps-since-access", o->steps, "idle decode steps for the priority")->capture_default_str();
  sub->add_flag("--json", o->json, "Print JSON");
  return [o]() { return run_explain(*o); };
});

static cxltier::cli::Registrar reg_params(31, [](CLI::App &app) {
  auto json = std::make_shared<bool>(false);
  CLI::App *sub = app.add_subcommand("params", "List every policy parameter with its default and status (calibrated or not)");
  sub->add_flag("--json", *json, "Print JSON");
  return [json]() { return run_params(*json); };
});
