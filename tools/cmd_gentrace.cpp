// SPDX-License-Identifier: Apache-2.0
// `cxltier gen-trace`: writes the seeded synthetic attention workload as an attention trace
// (docs/traces.md), with a flag for every generator parameter and a progress line on stderr.
#include "commands.hpp"

#include "lib/core/text.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/trace.hpp>
#include <cxltier/tools/units.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using cxltier::trace::SyntheticParams;

// One flag: its text as typed (the default printed by --help) and how it sets the parameter.
struct Knob {
  const char *flag;
  const char *help;
  std::string text;
  std::function<void(SyntheticParams &, const std::string &)> apply;
};

// Sizes the generator holds in memory (blocks, tokens, sequences at once) are bounded so that
// a value it cannot generate is refused here, naming the flag, instead of ending in bad_alloc.
constexpr uint64_t kMaxBlocksPerThing = uint64_t{1} << 20;  // blocks in a prefix, sinks, ...
constexpr uint64_t kMaxTokens = uint64_t{1} << 24;           // tokens of one prompt or decode
constexpr uint64_t kMaxLiveBlocks = uint64_t{1} << 24;       // blocks held at once, all sequences

template <typename T>
std::function<void(SyntheticParams &, const std::string &)> whole(T SyntheticParams::*field, const char *flag,
                                                                  uint64_t max = std::numeric_limits<T>::max()) {
  return [field, flag, max](SyntheticParams &p, const std::string &t) {
    uint64_t v = cxltier::parse_u64(t, flag);
    if (v > max)
      cxltier::fail(CXLT_ERROR_INVALID_ARGUMENT, flag, ": '", t, "' is too large (at most ", max, ")");
    p.*field = static_cast<T>(v);
  };
}

std::function<void(SyntheticParams &, const std::string &)> real(double SyntheticParams::*field, const char *flag) {
  return [field, flag](SyntheticParams &p, const std::string &t) { p.*field = cxltier::parse_double(t, flag); };
}

std::string text(uint64_t v) { return std::to_string(v); }
std::string text(double v) { return cxltier::text::shortest(v); }

std::vector<Knob> make_knobs() {
  SyntheticParams d;
  using P = SyntheticParams;
  return {
      {"--seed", "PRNG seed: the same seed and parameters give the same trace on every machine", text(d.seed),
       whole(&P::seed, "--seed")},
      {"--steps", "decode steps to generate (0: until every sequence has finished)", text(d.steps),
       whole(&P::steps, "--steps")},
      {"--sequences", "sequences over the whole run", text(uint64_t{d.sequences}), whole(&P::sequences, "--sequences")},
      {"--max-active", "running batch: sequences decoding at once (others queue)", text(uint64_t{d.max_active}),
       whole(&P::max_active, "--max-active", kMaxBlocksPerThing)},
      {"--arrival-rate", "mean new sequences per step", text(d.arrival_rate), real(&P::arrival_rate, "--arrival-rate")},
      {"--block-size", "tokens per KV block", text(uint64_t{d.block_size_tokens}),
       whole(&P::block_size_tokens, "--block-size", kMaxBlocksPerThing)},
      {"--prefix-groups", "distinct shared system prompts (0: no shared prefixes)", text(uint64_t{d.prefix_groups}),
       whole(&P::prefix_groups, "--prefix-groups", kMaxBlocksPerThing)},
      {"--prefix-blocks", "full blocks in each shared prefix", text(uint64_t{d.prefix_blocks}),
       whole(&P::prefix_blocks, "--prefix-blocks", kMaxBlocksPerThing)},
      {"--prefix-fraction", "share of sequences that start with a shared prefix, in [0, 1]", text(d.prefix_fraction),
       real(&P::prefix_fraction, "--prefix-fraction")},
      {"--prompt-tokens-min", "private prompt tokens, lower bound (log-uniform)", text(uint64_t{d.prompt_tokens_min}),
       whole(&P::prompt_tokens_min, "--prompt-tokens-min", kMaxTokens)},
      {"--prompt-tokens-max", "private prompt tokens, upper bound", text(uint64_t{d.prompt_tokens_max}),
       whole(&P::prompt_tokens_max, "--prompt-tokens-max", kMaxTokens)},
      {"--decode-tokens-min", "tokens generated per sequence, lower bound (log-uniform)",
       text(uint64_t{d.decode_tokens_min}), whole(&P::decode_tokens_min, "--decode-tokens-min", kMaxTokens)},
      {"--decode-tokens-max", "tokens generated per sequence, upper bound", text(uint64_t{d.decode_tokens_max}),
       whole(&P::decode_tokens_max, "--decode-tokens-max", kMaxTokens)},
      {"--sink-blocks", "attention sinks: the first blocks of each sequence", text(uint64_t{d.sink_blocks}),
       whole(&P::sink_blocks, "--sink-blocks", kMaxBlocksPerThing)},
      {"--recent-blocks", "recency window: the last blocks of each sequence", text(uint64_t{d.recent_blocks}),
       whole(&P::recent_blocks, "--recent-blocks", kMaxBlocksPerThing)},
      {"--heavy-hitters", "blocks per sequence with persistent high attention", text(uint64_t{d.heavy_hitters}),
       whole(&P::heavy_hitters, "--heavy-hitters", kMaxBlocksPerThing)},
      {"--heavy-drift", "per step and sequence, chance that a heavy hitter moves, in [0, 1]", text(d.heavy_drift),
       real(&P::heavy_drift, "--heavy-drift")},
      {"--sink-mass", "attention mass per step shared by the sinks, in [0, 1]", text(d.sink_mass),
       real(&P::sink_mass, "--sink-mass")},
      {"--recent-mass", "attention mass per step shared by the recency window", text(d.recent_mass),
       real(&P::recent_mass, "--recent-mass")},
      {"--heavy-mass", "attention mass per step shared by the heavy hitters (the tail gets 1 - the three)",
       text(d.heavy_mass), real(&P::heavy_mass, "--heavy-mass")},
      {"--tail-fraction", "share of the other blocks touched per step (1: dense attention)", text(d.tail_fraction),
       real(&P::tail_fraction, "--tail-fraction")},
      {"--jitter", "relative noise on every block's weight, in [0, 1)", text(d.jitter), real(&P::jitter, "--jitter")},
  };
}

// What the generator holds at once: every shared prefix, and each running sequence's blocks.
void check_live_blocks(const SyntheticParams &p) {
  const uint64_t prefixes = uint64_t{p.prefix_groups} * p.prefix_blocks;
  if (prefixes > kMaxLiveBlocks)
    cxltier::fail(CXLT_ERROR_INVALID_ARGUMENT, "--prefix-groups x --prefix-blocks = ", prefixes,
                  " shared-prefix blocks, more than the ", kMaxLiveBlocks, " this generator holds; lower them");
  const uint64_t per_sequence =
      p.prefix_blocks + (uint64_t{p.prompt_tokens_max} + p.decode_tokens_max) / p.block_size_tokens + 1;
  const uint64_t live = per_sequence * p.max_active;
  if (live > kMaxLiveBlocks)
    cxltier::fail(CXLT_ERROR_INVALID_ARGUMENT, "--max-active x (--prefix-blocks + (--prompt-tokens-max + ",
                  "--decode-tokens-max) / --block-size) = ", live, " blocks of running sequences, more than the ",
                  kMaxLiveBlocks, " this generator holds; lower them");
  if (p.arrival_rate > static_cast<double>(kMaxBlocksPerThing))
    cxltier::fail(CXLT_ERROR_INVALID_ARGUMENT, "--arrival-rate: ", p.arrival_rate, " is too large (at most ",
                  kMaxBlocksPerThing, " sequences per step)");
}

struct GenOptions {
  std::string out;
  bool json = false;
  std::vector<Knob> knobs = make_knobs();
};

std::string json_escape(const std::string &s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += c;
    }
  }
  return o;
}

}  // namespace

static cxltier::cli::Registrar reg(60, [](CLI::App &app) {
  auto opts = std::make_shared<GenOptions>();
  CLI::App *sub = app.add_subcommand(
      "gen-trace", "Write the seeded synthetic attention workload as an attention trace (docs/traces.md)");
  sub->add_option("--out", opts->out, "Output file (gzip when it ends in .gz)")->required()->type_name("FILE");
  for (Knob &k : opts->knobs)
    sub->add_option(k.flag, k.text, k.help)->capture_default_str()->type_name(k.text.find('.') == std::string::npos ? "N" : "X");
  sub->add_flag("--json", opts->json, "Print the summary as JSON on stdout");
  return [opts]() -> int {
    SyntheticParams params;
    for (const Knob &k : opts->knobs) k.apply(params, k.text);
    params.validate();
    check_live_blocks(params);
    // Progress on stderr once a run has taken a second: one rewritten line on a terminal, a
    // line every 5 s otherwise (logs stay short).
    const bool tty = isatty(STDERR_FILENO) != 0;
    const auto t0 = std::chrono::steady_clock::now();
    auto last = t0;
    bool shown = false;
    auto progress = [&](uint64_t done, uint64_t total) {
      auto now = std::chrono::steady_clock::now();
      if (now - t0 < std::chrono::seconds(1) || now - last < std::chrono::milliseconds(tty ? 200 : 5000)) return;
      last = now;
      shown = true;
      if (total)
        std::fprintf(stderr, "%sgen-trace: step %llu of %llu (%.0f %%)%s", tty ? "\r" : "",
                     static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                     100.0 * static_cast<double>(done) / static_cast<double>(total), tty ? "" : "\n");
      else
        std::fprintf(stderr, "%sgen-trace: step %llu%s", tty ? "\r" : "", static_cast<unsigned long long>(done),
                     tty ? "" : "\n");
    };
    cxltier::trace::WriteStats ws = cxltier::trace::write_attention_trace(opts->out, params, progress);
    if (shown && tty) std::fputc('\n', stderr);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (opts->json) {
      std::printf(
          "{\"path\":\"%s\",\"format\":\"attention\",\"steps\":%llu,\"references\":%llu,\"blocks_created\":%llu,"
          "\"sequences_started\":%llu,\"sequences_finished\":%llu,\"bytes\":%llu,\"seconds\":%.3f,\"params\":%s}\n",
          json_escape(opts->out).c_str(), static_cast<unsigned long long>(ws.steps),
          static_cast<unsigned long long>(ws.references), static_cast<unsigned long long>(ws.blocks_created),
          static_cast<unsigned long long>(ws.sequences_started), static_cast<unsigned long long>(ws.sequences_finished),
          static_cast<unsigned long long>(ws.bytes), secs, params.to_json().c_str());
    } else {
      std::printf("wrote %s: %llu decode steps, %llu block references, %llu blocks created, %llu sequences started "
                  "(%llu finished), %s uncompressed, in %.2f s\n",
                  opts->out.c_str(), static_cast<unsigned long long>(ws.steps),
                  static_cast<unsigned long long>(ws.references), static_cast<unsigned long long>(ws.blocks_created),
                  static_cast<unsigned long long>(ws.sequences_started),
                  static_cast<unsigned long long>(ws.sequences_finished), cxltier::format_bytes(ws.bytes).c_str(), secs);
    }
    return cxltier::cli::kExitOk;  // main() checks that stdout was written
  };
});
