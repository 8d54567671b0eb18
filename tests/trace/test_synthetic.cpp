// SPDX-License-Identifier: Apache-2.0
// The synthetic attention workload: deterministic per seed (and pinned by a golden digest),
// attention sums to 1 per sequence and step, sinks, the recency window and heavy hitters get
// more mass than the rest, shared prefixes share block ids, finished sequences stay finished,
// and written traces (plain and gzip) read back identically, also through `cxltier gen-trace`.
#include "../common/cli.hpp"
#include "../common/files.hpp"
#include "../common/temp_dir.hpp"
#include "../common/thrown.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/trace.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace cxltier;
using namespace cxltier::trace;
using cxlt_test::thrown;

namespace {

SyntheticParams small() {
  SyntheticParams p;
  p.steps = 600;
  p.sequences = 64;
  p.max_active = 8;
  p.arrival_rate = 0.25;
  p.prompt_tokens_max = 1024;
  p.decode_tokens_max = 256;
  return p;
}

// A digest of everything a step carries.
uint64_t digest(SyntheticWorkload &w, uint64_t max_steps = UINT64_MAX) {
  XXH3_state_t *st = XXH3_createState();
  XXH3_64bits_reset(st);
  Step s;
  for (uint64_t i = 0; i < max_steps && w.next_step(s); ++i) {
    XXH3_64bits_update(st, &s.step, sizeof s.step);
    auto add = [&](const auto &v) {
      uint64_t n = v.size();
      XXH3_64bits_update(st, &n, sizeof n);
      if (n) XXH3_64bits_update(st, v.data(), n * sizeof v[0]);
    };
    add(s.sequence);
    add(s.block_index);
    add(s.block);
    add(s.attention);
    add(s.kind);
    add(s.created);
    add(s.started);
    add(s.finished);
  }
  uint64_t d = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return d;
}

}  // namespace

TEST(Synthetic, SameSeedSameStepsDifferentSeedDifferentSteps) {
  SyntheticWorkload a(small()), b(small());
  uint64_t da = digest(a), db = digest(b);
  EXPECT_EQ(da, db);
  EXPECT_EQ(a.steps_done(), 600u);
  SyntheticParams p = small();
  p.seed = 2;
  SyntheticWorkload c(p);
  EXPECT_NE(digest(c), da);
  // Any parameter changes the workload too.
  p = small();
  p.tail_fraction = 0.5;
  SyntheticWorkload d(p);
  EXPECT_NE(digest(d), da);
}

// The generator is specified to give the same steps on every machine and compiler (own PRNG,
// integer sampling, no libm and no fused multiply-add in the arithmetic). This digest of the
// written text (endian-free) pins it: a change means traces written by earlier builds can no
// longer be regenerated from their header, so it must come with a note in docs/traces.md,
// never as a silent update of the constant.
TEST(Synthetic, GoldenDigest) {
  SyntheticParams p = small();
  p.steps = 200;
  const cxlt_test::TempDir tmp("synth");
  const std::string path = tmp / "golden.jsonl";
  write_attention_trace(path, p);
  ASSERT_EQ(access(path.c_str(), R_OK), 0);
  const std::string text = cxlt_test::read_file(path);
  uint64_t d = XXH3_64bits(text.data(), text.size());
  EXPECT_EQ(d, 0x746618639c6792e8ull) << std::hex << "digest 0x" << d << " over " << std::dec << text.size() << " bytes";
}

TEST(Synthetic, AttentionSumsToOnePerSequenceAndStep) {
  SyntheticWorkload w(small());
  Step s;
  uint64_t groups = 0;
  while (w.next_step(s)) {
    ASSERT_EQ(s.sequence.size(), s.block.size());
    ASSERT_EQ(s.sequence.size(), s.block_index.size());
    ASSERT_EQ(s.sequence.size(), s.attention.size());
    ASSERT_EQ(s.sequence.size(), s.kind.size());
    double sum = 0;
    for (size_t i = 0; i < s.sequence.size(); ++i) {
      ASSERT_GE(s.attention[i], 0.0f);
      ASSERT_LE(s.attention[i], 1.0f);
      sum += s.attention[i];
      if (i + 1 == s.sequence.size() || s.sequence[i + 1] != s.sequence[i]) {
        EXPECT_NEAR(sum, 1.0, 1e-5) << "step " << s.step << " sequence " << s.sequence[i];
        sum = 0;
        ++groups;
      } else {
        ASSERT_LT(s.block_index[i], s.block_index[i + 1]);  // one touch per block, in index order
      }
    }
  }
  EXPECT_GT(groups, 1000u);
}

// Per block and step (untouched blocks count as 0), sinks get the most, then the recency
// window and the heavy hitters, and the tail far less; the classes match block positions.
TEST(Synthetic, SinksRecentAndHeavyHittersGetMoreMass) {
  SyntheticParams p = small();
  SyntheticWorkload w(p);
  Step s;
  double mass[4] = {0, 0, 0, 0};
  double slots[4] = {0, 0, 0, 0};
  while (w.next_step(s)) {
    size_t i = 0;
    while (i < s.sequence.size()) {
      size_t j = i;
      while (j < s.sequence.size() && s.sequence[j] == s.sequence[i]) ++j;
      uint64_t n = s.block_index[j - 1] + 1;  // the newest block is always touched
      uint64_t sinks = std::min<uint64_t>(p.sink_blocks, n);
      uint64_t recent = std::min<uint64_t>(p.recent_blocks, n - sinks);
      uint64_t heavy = 0;
      for (size_t k = i; k < j; ++k) {
        uint32_t b = s.block_index[k];
        TouchKind kind = s.kind[k];
        if (b < sinks) {
          EXPECT_EQ(kind, TouchKind::sink);
        } else if (b >= n - recent) {
          EXPECT_EQ(kind, TouchKind::recent);
        } else {
          EXPECT_TRUE(kind == TouchKind::heavy || kind == TouchKind::tail);
        }
        heavy += kind == TouchKind::heavy;
        mass[static_cast<int>(kind)] += s.attention[k];
      }
      EXPECT_LE(heavy, p.heavy_hitters);
      slots[0] += static_cast<double>(sinks);
      slots[1] += static_cast<double>(recent);
      slots[2] += static_cast<double>(heavy);
      slots[3] += static_cast<double>(n - sinks - recent - heavy);
      i = j;
    }
  }
  double per[4];
  for (int k = 0; k < 4; ++k) {
    ASSERT_GT(slots[k], 0.0);
    per[k] = mass[k] / slots[k];
  }
  EXPECT_GT(per[0], per[1]);
  EXPECT_GT(per[1], 5 * per[3]);
  EXPECT_GT(per[2], 5 * per[3]);
  // The class totals follow the configured masses (classes a sequence lacks give theirs away).
  double total = mass[0] + mass[1] + mass[2] + mass[3];
  EXPECT_NEAR(mass[0] / total, p.sink_mass, 0.05);
  EXPECT_NEAR(mass[1] / total, p.recent_mass, 0.08);
}

// Shared prefixes share ids, blocks are created once and touched only after creation, and a
// finished sequence is never seen again; its blocks are touched again only where they are
// shared-prefix blocks (same index, inside the prefix) of another sequence.
TEST(Synthetic, LifecycleAndSharedPrefixes) {
  SyntheticParams p = small();
  p.steps = 0;  // run until every sequence finished
  SyntheticWorkload w(p);
  Step s;
  std::set<uint64_t> created, finished_seqs, started_seqs, shared;
  std::map<uint64_t, std::pair<uint64_t, uint32_t>> owner;  // block -> (first sequence, index)
  std::map<uint64_t, std::set<uint64_t>> groups;            // id at index 0 -> sequences starting with it
  uint64_t last_step = 0;
  bool first = true;
  while (w.next_step(s)) {
    if (!first) {
      EXPECT_EQ(s.step, last_step + 1);
    }
    first = false;
    last_step = s.step;
    for (uint64_t b : s.created) EXPECT_TRUE(created.insert(b).second) << "block " << b << " created twice";
    for (uint64_t q : s.started) {
      EXPECT_TRUE(started_seqs.insert(q).second);
      EXPECT_EQ(finished_seqs.count(q), 0u);
    }
    for (size_t i = 0; i < s.block.size(); ++i) {
      EXPECT_EQ(created.count(s.block[i]), 1u) << "touched before created";
      EXPECT_EQ(started_seqs.count(s.sequence[i]), 1u);
      EXPECT_EQ(finished_seqs.count(s.sequence[i]), 0u) << "finished sequence touched again";
      auto [it, fresh] = owner.emplace(s.block[i], std::pair{s.sequence[i], s.block_index[i]});
      if (!fresh && it->second.first != s.sequence[i]) {
        EXPECT_EQ(it->second.second, s.block_index[i]) << "a shared block at another index";
        EXPECT_LT(s.block_index[i], p.prefix_blocks) << "a block shared outside the prefix";
        shared.insert(s.block[i]);
      }
      if (s.block_index[i] == 0) groups[s.block[i]].insert(s.sequence[i]);
    }
    for (uint64_t q : s.finished) EXPECT_TRUE(finished_seqs.insert(q).second);
  }
  EXPECT_EQ(w.sequences_started(), p.sequences);
  EXPECT_EQ(w.sequences_finished(), p.sequences);
  EXPECT_EQ(finished_seqs.size(), p.sequences);
  EXPECT_EQ(w.active(), 0u);
  EXPECT_EQ(w.blocks_created(), created.size());
  EXPECT_GT(shared.size(), 0u);
  EXPECT_LE(shared.size(), uint64_t{p.prefix_groups} * p.prefix_blocks);
  // Sequences starting with a shared block form at most prefix_groups groups, and together
  // they are about prefix_fraction of all sequences.
  size_t shared_groups = 0, in_groups = 0;
  for (auto &[b, seqs] : groups)
    if (seqs.size() > 1) ++shared_groups, in_groups += seqs.size();
  EXPECT_GE(shared_groups, 2u);
  EXPECT_LE(shared_groups, p.prefix_groups);
  EXPECT_NEAR(static_cast<double>(in_groups) / p.sequences, p.prefix_fraction, 0.15);
}

TEST(Synthetic, ValidationNamesTheField) {
  auto bad = [](auto set, const char *field) {
    SyntheticParams p;
    set(p);
    Error e = thrown([&] { SyntheticWorkload w(p); });
    EXPECT_EQ(e.code(), CXLT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  };
  bad([](SyntheticParams &p) { p.max_active = 0; }, "max_active");
  bad([](SyntheticParams &p) { p.sequences = 0; }, "sequences");
  bad([](SyntheticParams &p) { p.arrival_rate = 0; }, "arrival_rate");
  bad([](SyntheticParams &p) { p.arrival_rate = NAN; }, "arrival_rate");
  bad([](SyntheticParams &p) { p.block_size_tokens = 0; }, "block_size_tokens");
  bad([](SyntheticParams &p) { p.prefix_fraction = 1.5; }, "prefix_fraction");
  bad([](SyntheticParams &p) { p.prompt_tokens_min = 0; }, "prompt_tokens_min");
  bad([](SyntheticParams &p) { p.decode_tokens_max = 1; }, "decode_tokens_max");
  bad([](SyntheticParams &p) { p.sink_mass = 0.6, p.recent_mass = 0.6; }, "sink_mass + recent_mass");
  bad([](SyntheticParams &p) { p.tail_fraction = -0.1; }, "tail_fraction");
  bad([](SyntheticParams &p) { p.jitter = 1.0; }, "jitter");
  bad([](SyntheticParams &p) { p.heavy_drift = 2; }, "heavy_drift");
}

// Edge shapes: dense attention, no jitter, no shared prefixes, one-block sequences, and all
// mass on classes a sequence lacks (uniform fallback) still sum to 1.
TEST(Synthetic, EdgeShapes) {
  SyntheticParams p = small();
  p.tail_fraction = 1.0;
  p.jitter = 0.0;
  p.prefix_groups = 0;
  p.prompt_tokens_min = p.prompt_tokens_max = 1;
  p.decode_tokens_min = p.decode_tokens_max = 3;
  p.sink_mass = 0.0;
  p.heavy_mass = 0.0;
  p.recent_mass = 0.0;  // only the tail has mass: sequences of 1 block fall back to uniform
  SyntheticWorkload w(p);
  Step s;
  uint64_t touches = 0;
  while (w.next_step(s)) {
    std::map<uint64_t, double> sums;
    for (size_t i = 0; i < s.block.size(); ++i) sums[s.sequence[i]] += s.attention[i];
    for (auto &[q, sum] : sums) EXPECT_NEAR(sum, 1.0, 1e-6);
    touches += s.block.size();
  }
  EXPECT_GT(touches, 0u);
}

// --- Files ------------------------------------------------------------------------------------

static void expect_round_trip(const std::string &path, const SyntheticParams &p) {
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  WriteStats ws = write_attention_trace(path, p, [&](uint64_t done, uint64_t total) { calls.push_back({done, total}); });
  ASSERT_FALSE(calls.empty());
  for (size_t i = 1; i < calls.size(); ++i) EXPECT_GE(calls[i].first, calls[i - 1].first);
  EXPECT_EQ(calls.back().first, ws.steps);

  Reader r(path);
  EXPECT_EQ(r.format(), Format::attention);
  EXPECT_TRUE(r.has_attention());
  EXPECT_EQ(r.block_size_tokens(), p.block_size_tokens);
  auto header = nlohmann::json::parse(r.header());
  EXPECT_EQ(header["format"], kAttentionFormatTag);
  EXPECT_EQ(header["version"], kAttentionFormatVersion);
  EXPECT_EQ(header["generator"], nlohmann::json::parse(p.to_json()));
  EXPECT_EQ(header["generator"]["seed"], p.seed);

  SyntheticWorkload w(p);
  Step s;
  Request q;
  uint64_t steps = 0;
  while (w.next_step(s)) {
    ASSERT_TRUE(r.next(q)) << "step " << s.step;
    EXPECT_EQ(q.step, s.step);
    EXPECT_EQ(q.index, steps);
    ASSERT_EQ(std::vector<uint64_t>(q.blocks.begin(), q.blocks.end()), s.block);
    ASSERT_EQ(std::vector<uint64_t>(q.sequences.begin(), q.sequences.end()), s.sequence);
    ASSERT_EQ(std::vector<float>(q.attention.begin(), q.attention.end()), s.attention);  // bit-exact
    ASSERT_EQ(std::vector<uint64_t>(q.created.begin(), q.created.end()), s.created);
    ASSERT_EQ(std::vector<uint64_t>(q.finished.begin(), q.finished.end()), s.finished);
    ++steps;
  }
  EXPECT_FALSE(r.next(q));
  EXPECT_EQ(steps, ws.steps);
  EXPECT_EQ(r.stats().references, ws.references);
  EXPECT_EQ(r.stats().malformed, 0u);
  EXPECT_EQ(r.stats().bytes, ws.bytes);
  EXPECT_EQ(ws.blocks_created, w.blocks_created());
  EXPECT_EQ(ws.sequences_started, w.sequences_started());
}

TEST(AttentionTrace, WrittenFilesReadBackIdentically) {
  const cxlt_test::TempDir tmp("synth");
  for (const char *suffix : {".jsonl", ".jsonl.gz"}) {
    const std::string path = tmp / (std::string("round-trip") + suffix);
    expect_round_trip(path, small());
    EXPECT_EQ(access((path + ".tmp").c_str(), F_OK), -1);  // the temporary name is gone
    if (std::string(suffix) == ".jsonl.gz") {
      EXPECT_TRUE(Reader(path).compressed());
    }
  }
  // The same parameters write the same bytes.
  const std::string a = tmp / "a.jsonl", b = tmp / "b.jsonl";
  write_attention_trace(a, small());
  write_attention_trace(b, small());
  FILE *fa = std::fopen(a.c_str(), "rb"), *fb = std::fopen(b.c_str(), "rb");
  ASSERT_TRUE(fa && fb);
  int ca, cb;
  size_t n = 0;
  do {
    ca = std::fgetc(fa);
    cb = std::fgetc(fb);
    ASSERT_EQ(ca, cb) << "byte " << n;
    ++n;
  } while (ca != EOF);
  std::fclose(fa);
  std::fclose(fb);
}

TEST(AttentionTrace, UnwritablePathIsAnIoError) {
  Error e = thrown([] { write_attention_trace("/nonexistent-dir/x.jsonl", small()); });
  EXPECT_EQ(e.code(), CXLT_ERROR_IO);
  EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.jsonl"), std::string::npos) << e.what();
  // Bad parameters are refused before any file is created.
  SyntheticParams p = small();
  p.max_active = 0;
  const cxlt_test::TempDir tmp("synth");
  const std::string path = tmp / "refused.jsonl";
  EXPECT_EQ(thrown([&] { write_attention_trace(path, p); }).code(), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(access(path.c_str(), F_OK), -1);
}

// --- The CLI ----------------------------------------------------------------------------------

// The CLI's exit status; `out` gets its standard output followed by its standard error.
static int run_tool(const std::vector<std::string> &args, std::string &out) {
  const cxlt_test::ToolResult r = cxlt_test::run_tool(args);
  out = r.out + r.err;
  return r.status;
}

TEST(GenTraceCommand, WritesWhatTheLibraryWrites) {
  if (!std::getenv("CXLT_TOOL")) GTEST_SKIP() << "CXLT_TOOL is not set (run through meson test)";
  const cxlt_test::TempDir tmp("synth");
  const std::string path = tmp / "cli.jsonl";
  std::string out;
  ASSERT_EQ(run_tool({"gen-trace", "--out", path, "--steps", "600", "--sequences", "64", "--max-active", "8",
                      "--arrival-rate", "0.25", "--prompt-tokens-max", "1024", "--decode-tokens-max", "256", "--json"},
                     out),
            0)
      << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["steps"], 600);
  EXPECT_EQ(j["params"], nlohmann::json::parse(small().to_json()));
  const std::string lib = tmp / "lib.jsonl";
  write_attention_trace(lib, small());
  EXPECT_EQ(cxlt_test::read_file(path), cxlt_test::read_file(lib));  // the command writes what the library writes
  Reader r(path);
  Request q;
  while (r.next(q)) {
  }
  EXPECT_EQ(j["references"], r.stats().references);
  unlink(path.c_str());

  // A bad value names its flag and exits 2.
  EXPECT_EQ(run_tool({"gen-trace", "--out", path, "--tail-fraction", "2"}, out), 2) << out;
  EXPECT_NE(out.find("tail_fraction"), std::string::npos) << out;
  EXPECT_EQ(run_tool({"gen-trace", "--out", path, "--steps", "lots"}, out), 2) << out;
  EXPECT_NE(out.find("--steps"), std::string::npos) << out;
  EXPECT_EQ(access(path.c_str(), F_OK), -1);
  // --help lists every knob with its default.
  ASSERT_EQ(run_tool({"gen-trace", "--help"}, out), 0);
  for (const char *flag : {"--seed", "--steps", "--sequences", "--max-active", "--arrival-rate", "--block-size",
                           "--prefix-groups", "--prefix-blocks", "--prefix-fraction", "--prompt-tokens-min",
                           "--prompt-tokens-max", "--decode-tokens-min", "--decode-tokens-max", "--sink-blocks",
                           "--recent-blocks", "--heavy-hitters", "--heavy-drift", "--sink-mass", "--recent-mass",
                           "--heavy-mass", "--tail-fraction", "--jitter", "--json"})
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
}
