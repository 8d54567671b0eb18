// SPDX-License-Identifier: Apache-2.0
// `cxltier replay`: one block-reference trace through the runtime (null tiers, synchronous) under
// one policy and budget; hit rate, hits per tier, drops, restored re-admissions, the OPT bound
// on request. Table or JSON on stdout, progress on stderr. docs/replay.md.
#include "commands.hpp"
#include "replay_cli.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/replay.hpp>
#include <cxltier/tools/units.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <string>

namespace {

using namespace cxltier;

struct ReplayFlags {
  cxltier::cli::TraceFlags trace;
  std::string policy = "lrfu";
  std::string persist;
  std::string capacity_blocks;
  std::string budget;
  std::string block_bytes = "5MiB";
  std::string alpha = "0.05";
  std::string beta = "0.001";
  std::string score_mode = "touch";
  unsigned index_buckets = 256;
  std::string tiers;
  std::string promotion = "score-above-victim";
  bool check_opt = false;
  bool json = false;
  bool quiet = false;
};

void print_table(const replay::Result &r, uint64_t rss) {
  auto pct = [&](uint64_t n) { return r.references ? 100.0 * static_cast<double>(n) / static_cast<double>(r.references) : 0.0; };
  std::printf("trace          %s (%s, %u-token blocks)\n", r.trace.c_str(), trace::format_name(r.format), r.block_size_tokens);
  std::printf("policy         %s", replay::policy_label(r.policy).c_str());
  if (r.policy.kind == PolicyKind::lrfu)
    std::printf(" (alpha %g, beta %g per decode step, %s mode)", r.lrfu.alpha, r.lrfu.beta, score_mode_name(r.lrfu.mode));
  std::printf(", policy state %s across eviction%s\n", r.policy.persist ? "kept" : "reset",
              replay::persist_matters(r.policy.kind) ? "" : " (no effect on this policy)");
  std::printf("capacity       %llu blocks (%s at %s per block; a block count: the trace's blocks are %u tokens)%s\n",
              static_cast<unsigned long long>(r.capacity_blocks),
              format_bytes(r.capacity_blocks * r.block_bytes).c_str(), format_bytes(r.block_bytes).c_str(),
              r.block_size_tokens, r.opt_single_tier ? ", opt on one tier of the total" : "");
  std::printf("stream         %llu requests, %llu references, %llu unique blocks, decode clock %llu steps\n",
              static_cast<unsigned long long>(r.requests), static_cast<unsigned long long>(r.references),
              static_cast<unsigned long long>(r.unique_blocks), static_cast<unsigned long long>(r.steps));
  std::printf("attention      %s\n", r.trace_attention ? "from the trace"
                                                       : "constant 1.0 (the trace has no attention values)");
  std::printf("hits           %llu of %llu references: hit rate %.2f %% (higher is better)\n",
              static_cast<unsigned long long>(r.hits), static_cast<unsigned long long>(r.references), pct(r.hits));
  if (r.opt_hits)
    std::printf("opt bound      %llu hits: %.2f %% on one tier of %llu blocks (no policy can do better)%s\n",
                static_cast<unsigned long long>(*r.opt_hits), pct(*r.opt_hits),
                static_cast<unsigned long long>(r.capacity_blocks), r.opt_violation.empty() ? "" : "  VIOLATED");
  if (r.tiers.size() > 1 || r.drops) {
    std::printf("\n%-6s %12s %10s %12s %10s %12s\n", "tier", "budget", "blocks", "hits", "hit rate", "admissions");
    for (const replay::TierResult &t : r.tiers)
      std::printf("%-6s %12s %10llu %12llu %8.2f %% %12llu\n", t.name.c_str(), format_bytes(t.budget_bytes).c_str(),
                  static_cast<unsigned long long>(t.capacity_blocks), static_cast<unsigned long long>(t.hits), pct(t.hits),
                  static_cast<unsigned long long>(t.admissions));
    std::printf("(hit rate: share of all references found in that tier, higher is better)\n");
    if (r.tiers.size() > 1)
      std::printf("promotion rule %s; %llu promotions, %llu demotions\n", promotion_rule_name(r.promotion),
                  static_cast<unsigned long long>(r.promotions), static_cast<unsigned long long>(r.demotions));
    std::printf("drops          %llu blocks left the last tier (state kept in the store)\n",
                static_cast<unsigned long long>(r.drops));
    std::printf("re-admissions  %llu with restored state\n", static_cast<unsigned long long>(r.readmissions_restored));
  }
  if (r.policy.kind == PolicyKind::opt)
    std::printf("opt bypassed   %llu misses not kept (their next use was the farthest)\n",
                static_cast<unsigned long long>(r.opt_bypassed));
  if (r.malformed_lines) {
    std::printf("malformed      %llu lines skipped:", static_cast<unsigned long long>(r.malformed_lines));
    for (const trace::Issue &i : r.issues) std::printf(" %llu", static_cast<unsigned long long>(i.line));
    std::printf("%s (--strict stops at the first)\n", r.issues.size() < r.malformed_lines ? " ..." : "");
    for (const trace::Issue &i : r.issues)
      std::printf("               line %llu: %s\n", static_cast<unsigned long long>(i.line), i.reason.c_str());
  }
  std::printf("speed          %.2f M references/s (higher is better), %.3f s, max RSS %s (lower is better)\n",
              r.seconds > 0 ? static_cast<double>(r.references) / r.seconds / 1e6 : 0.0, r.seconds,
              format_bytes(rss).c_str());
}

}  // namespace

static cxltier::cli::Registrar reg(70, [](CLI::App &app) {
  auto f = std::make_shared<ReplayFlags>();
  CLI::App *sub = app.add_subcommand(
      "replay", "Replay a block-reference trace through the runtime (null tiers) under one policy and budget");
  cxltier::cli::add_trace_flags(sub, f->trace);
  sub->add_option("--policy", f->policy, "lru, fifo, lfu, arc, lrfu, opt, lrfu-nopersist, lfu-nopersist")
      ->capture_default_str();
  sub->add_option("--persist", f->persist, "on: policy state survives eviction (the default); off: reset on re-admission")
      ->type_name("on|off");
  sub->add_option("--capacity-blocks", f->capacity_blocks, "one tier holding N blocks")->type_name("N");
  sub->add_option("--budget", f->budget, "one tier of SIZE bytes (floor(SIZE / --block-bytes) blocks)")->type_name("SIZE");
  sub->add_option("--block-bytes", f->block_bytes, "bytes per block (the canonical 80-layer model: 5 MiB)")
      ->capture_default_str()
      ->type_name("SIZE");
  sub->add_option("--tiers", f->tiers, "several null tiers, fastest first: hbm=32GiB,dram=128GiB,cxl=256GiB")
      ->type_name("SPEC");
  sub->add_option("--promotion", f->promotion, "several tiers: never, score-above-victim, always")->capture_default_str();
  sub->add_option("--alpha", f->alpha, "LRFU weight of the newest attention, (0, 1]")->capture_default_str();
  sub->add_option("--beta", f->beta, "LRFU recency decay per decode step (per request on hash traces), >= 0")
      ->capture_default_str();
  sub->add_option("--score-mode", f->score_mode, "touch or decay (docs/configuration.md)")->capture_default_str();
  sub->add_option("--index-buckets", f->index_buckets,
                  "LRFU index score buckets, a power of two (speed only: the victim is exact either way)")
      ->capture_default_str();
  sub->add_flag("--check-opt", f->check_opt, "also replay OPT on one tier of the total; exit 1 if the policy beats it");
  sub->add_flag("--json", f->json, "JSON on stdout");
  sub->add_flag("--quiet", f->quiet, "no progress line on stderr");
  return [f]() -> int {
    replay::Options o;
    o.trace = f->trace.path;
    o.reader = cxltier::cli::reader_options(f->trace);
    o.policy = replay::parse_policy(f->policy);
    if (!f->persist.empty()) {
      bool p = parse_bool(f->persist, "--persist");
      if (p && !o.policy.persist)
        fail(CXLT_ERROR_INVALID_ARGUMENT, "--persist on contradicts --policy ", f->policy);
      o.policy.persist = p;
    }
    o.lrfu.alpha = parse_double(f->alpha, "--alpha");
    o.lrfu.beta = parse_double(f->beta, "--beta");
    auto mode = parse_score_mode(f->score_mode);
    if (!mode) fail(CXLT_ERROR_INVALID_ARGUMENT, "--score-mode: '", f->score_mode, "' is not touch or decay");
    o.lrfu.mode = *mode;
    o.index_buckets = f->index_buckets;
    o.block_bytes = parse_size(f->block_bytes, "--block-bytes");
    if (o.block_bytes == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "--block-bytes: 0 is not a block size");
    int given = !f->capacity_blocks.empty() + !f->budget.empty() + !f->tiers.empty();
    if (given != 1)
      fail(CXLT_ERROR_INVALID_ARGUMENT, "give exactly one of --capacity-blocks N, --budget SIZE, --tiers SPEC (",
           given, " given)");
    if (!f->capacity_blocks.empty()) {
      o.capacity_blocks = parse_u64(f->capacity_blocks, "--capacity-blocks");
      if (o.capacity_blocks == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "--capacity-blocks: 0 blocks hold nothing");
    } else if (!f->budget.empty()) {
      uint64_t b = parse_size(f->budget, "--budget");
      o.capacity_blocks = b / o.block_bytes;
      if (o.capacity_blocks == 0)
        fail(CXLT_ERROR_INVALID_ARGUMENT, "--budget ", f->budget, " is smaller than one block (",
             format_bytes(o.block_bytes), ")");
    } else {
      o.tiers = replay::parse_tiers(f->tiers);
      auto rule = parse_promotion_rule(f->promotion);
      if (!rule)
        fail(CXLT_ERROR_INVALID_ARGUMENT, "--promotion: '", f->promotion, "' is not never, score-above-victim or always");
      o.promotion = *rule;
    }
    o.opt_bound = f->check_opt;
    cxltier::cli::ProgressLine progress("replay", f->quiet, o.trace);
    o.progress = [&progress](const replay::Progress &p) { progress.references(p.references, p.bytes); };
    replay::Result r = replay::run(o);
    progress.finish();
    uint64_t rss = cxltier::cli::max_rss_bytes();
    if (f->json) {
      nlohmann::json j = nlohmann::json::parse(replay::to_json(r));
      j["max_rss_bytes"] = rss;
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      print_table(r, rss);
    }
    std::fflush(stdout);
    if (!r.opt_violation.empty()) {
      std::fprintf(stderr, "cxltier replay: CHECK FAILED: %s\n", r.opt_violation.c_str());
      return cxltier::cli::kExitCheckFailed;
    }
    return cxltier::cli::kExitOk;  // main() checks that stdout was written
  };
});
