// SPDX-License-Identifier: Apache-2.0
// `cxltier run`: the main job. A decode-like workload (many sequences sharing system-prompt
// prefixes, attention on sinks, recent blocks and heavy hitters; seeded) driven through the
// runtime on real memory: this machine's tiers, or the embedded default laid on host memory.
// Every block carries its key and a checksum of its bytes, written when it is (re)computed and
// verified whenever the engine finds it in a different tier than when last verified (that is,
// after every move) and once more for every resident block at the end.
#include "commands.hpp"

#include <cxltier/config.hpp>
#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>
#include <cxltier/tools/trace.hpp>
#include <cxltier/tools/units.hpp>

#include <nlohmann/json.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace {

using namespace cxltier;

struct RunOptions {
  std::string config;
  std::string topology;
  std::string store;
  std::vector<std::string> sets;
  uint64_t steps = 200;
  uint64_t seed = 1;
  uint32_t sequences = 512;
  uint32_t active = 12;
  bool json = false;
  bool quiet = false;
  bool settle = false;  // wait for the mover to go idle after every step
  std::string workload = "decode";
};

// Block content: [key.hi][key.lo][version][xxh3(bytes 32..end)] then a pattern from the key.
constexpr uint64_t kHeaderBytes = 32;

void fill(void *data, size_t bytes, const Key &k, uint64_t version) {
  auto *w = static_cast<uint64_t *>(data);
  const size_t n = bytes / 8;
  const uint64_t base = k.lo ^ (version * 0x9e3779b97f4a7c15ull);
  for (size_t i = 4; i < n; ++i) w[i] = base + i * 0xbf58476d1ce4e5b9ull;  // vectorizes
  w[0] = k.hi;
  w[1] = k.lo;
  w[2] = version;
  w[3] = XXH3_64bits(static_cast<char *>(data) + 32, bytes - 32);
}

bool verify(const void *data, size_t bytes, const Key &k) {
  const auto *w = static_cast<const uint64_t *>(data);
  return w[0] == k.hi && w[1] == k.lo && w[3] == XXH3_64bits(static_cast<const char *>(data) + 32, bytes - 32);
}

// A block pinned for the check at the end of a run; nothing when it is resident nowhere (or
// stopped being so between the look-up and the pin). The pin matters: the background mover
// goes on after wait_idle (the promotions the last accesses queued, headroom under the
// watermarks), and a block it moves frees its old slot for the next copy to land in, so a
// pointer from lookup() is only good until the move completes (migration.cpp, step 3). A
// pinned block never moves. The caller unpins.
std::optional<Block> pin_for_check(Runtime &rt, const Key &k) {
  if (!rt.lookup(k, nullptr)) return std::nullopt;
  try {
    return rt.pin(k);
  } catch (const Error &e) {
    if (e.code() != CXLT_ERROR_NOT_FOUND) throw;
    return std::nullopt;
  }
}

struct Tracked {
  int verified_tier = -1;  // tier where its bytes were last checked or written
};

struct Counters {
  uint64_t computed = 0;       // blocks whose KV was computed (first time)
  uint64_t recomputed = 0;     // blocks that had to be recomputed (resident nowhere when needed)
  uint64_t shared_touches = 0; // touches of a block that another sequence also touched that step (shared prefixes)
  uint64_t verified = 0;       // content checks
  uint64_t integrity_errors = 0;
  uint64_t touches = 0;        // block touches (after merging a step's duplicates)
  uint64_t found[CXLT_MAX_TIERS] = {};  // touches that found the block resident, by tier
  uint64_t refused = 0;        // admissions refused: every block pinned or moving, even after a wait
};

class Engine {
public:
  Engine(Runtime &rt, Counters &c) : rt_(rt), c_(c) {}

  // The block resident and pinned, placed blocks with (re)computed content; nothing when the
  // runtime refused to place it because every block was pinned or moving (the engine's chunk
  // holds up to kChunk pins): it waits for the moves once and tries again, then counts the
  // refusal and goes on without the block, as an engine would recompute it later.
  std::optional<Block> pin_or_compute(uint64_t id, bool first_time, bool touch = false) {
    Key k = key_from_trace_id(id);
    bool placed = false;
    Block b;
    try {
      b = admit_retrying(k, &placed);  // resident or (re)placed, pinned either way
    } catch (const Error &e) {
      if (e.code() != CXLT_ERROR_OUT_OF_TIER_MEMORY) throw;
      ++c_.refused;
      return std::nullopt;
    }
    Tracked &t = tracked_[id];
    if (touch && !placed && b.tier >= 0) ++c_.found[b.tier];
    if (placed) {
      if (b.data != nullptr) fill(b.data, b.bytes, k, ++version_);  // the null backend holds no bytes
      t.verified_tier = b.tier;
      if (first_time) ++c_.computed; else ++c_.recomputed;
    } else if (b.data != nullptr && t.verified_tier != b.tier) {
      ++c_.verified;
      if (!verify(b.data, b.bytes, k)) {
        ++c_.integrity_errors;
        std::fprintf(stderr, "cxltier run: integrity error: block %s in tier %d does not match its checksum\n",
                     k.hex().c_str(), b.tier);
      }
      t.verified_tier = b.tier;
    }
    return b;
  }

  void final_sweep() {
    for (auto &[id, t] : tracked_) {
      Key k = key_from_trace_id(id);
      std::optional<Block> b = pin_for_check(rt_, k);
      if (!b) continue;
      if (b->data != nullptr) {
        ++c_.verified;
        if (!verify(b->data, b->bytes, k)) {
          ++c_.integrity_errors;
          std::fprintf(stderr, "cxltier run: integrity error at the end: block %s (tier %d)\n", k.hex().c_str(), b->tier);
        }
      }
      rt_.unpin(k);
    }
  }

  bool known(uint64_t id) const { return tracked_.count(id) != 0; }

private:
  Block admit_retrying(const Key &k, bool *placed) {
    try {
      return rt_.admit(k, placed, /*pin=*/true);
    } catch (const Error &e) {
      if (e.code() != CXLT_ERROR_OUT_OF_TIER_MEMORY) throw;
    }
    rt_.wait_idle(-1);
    return rt_.admit(k, placed, /*pin=*/true);
  }

  Runtime &rt_;
  Counters &c_;
  std::unordered_map<uint64_t, Tracked> tracked_;
  uint64_t version_ = 0;
};

// SIGTERM, SIGINT or SIGHUP during a run with a store: the loop stops after the current step,
// the runtime closes (writing its final checkpoint), and the signal is raised again with its
// default action, so the parent sees how the run ended and no state since open is lost.
volatile sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int sig) { g_stop_signal = sig; }

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
}

std::string gbps(uint64_t bytes, uint64_t ns) {
  char buf[32];
  if (ns == 0) return "-";
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(bytes) / static_cast<double>(ns));
  return buf;
}

// The prefill-burst workload: requests arrive with long prompts, each one of a few shared
// system prompts plus blocks of its own (as in the Mooncake traces). A request's prefill asks
// how much of its prompt is cached (prefix_lookup, pinned), admits the rest in one batch
// (admit_batch, pinned) and computes the placed blocks; then it decodes for a few steps, each
// step re-admitting its blocks in one batch (a block dropped meanwhile is recomputed) and
// accessing them (sinks and recent blocks heavily, the middle lightly). At its end its own
// blocks are released (cached, evictable). Blocks carry checksums as in the decode workload.
struct PrefillCounters {
  uint64_t requests = 0, prefill_blocks = 0, prefill_saved = 0, computed = 0, recomputed = 0, touches = 0;
  uint64_t found[CXLT_MAX_TIERS] = {};
  uint64_t verified = 0, integrity_errors = 0;
};

void prefill_burst(Runtime &rt, uint64_t steps, uint64_t seed, bool settle, PrefillCounters &c) {
  struct Request {
    std::vector<Key> keys;  // system prompt blocks, then its own
    size_t own_from = 0;
    uint64_t ends_at = 0;
  };
  constexpr size_t kSystemPrompts = 4, kSystemBlocks = 24, kMaxActive = 6;
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  auto rnd = [&x](uint64_t n) {  // splitmix64: seeded and the same on every platform
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (z ^ (z >> 31)) % n;
  };
  std::vector<Request> active;
  std::vector<Block> blocks;
  std::vector<float> att;
  std::unordered_map<Key, int, KeyHash> verified_tier;
  std::unique_ptr<bool[]> placed;
  size_t placed_cap = 0;
  uint64_t version = 0, next_request = 1;
  auto fill_placed = [&](const Key *keys, size_t n, const Block *b, const bool *p, uint64_t *counter) {
    for (size_t i = 0; i < n; ++i) {
      if (p[i]) {
        if (b[i].data) fill(b[i].data, b[i].bytes, keys[i], ++version);
        if (verified_tier.count(keys[i])) ++c.recomputed; else ++(*counter);
        verified_tier[keys[i]] = b[i].tier;
      } else {
        if (b[i].tier >= 0) ++c.found[b[i].tier];
        int &vt = verified_tier[keys[i]];
        if (b[i].data && vt != b[i].tier) {
          ++c.verified;
          if (!verify(b[i].data, b[i].bytes, keys[i])) {
            ++c.integrity_errors;
            std::fprintf(stderr, "cxltier run: integrity error: block %s in tier %d\n", keys[i].hex().c_str(), b[i].tier);
          }
          vt = b[i].tier;
        }
      }
    }
  };
  for (uint64_t step = 0; step < steps && g_stop_signal == 0; ++step) {
    // Arrivals: a burst of prefills now and then.
    const size_t arrivals = active.size() < kMaxActive ? (rnd(4) == 0 ? 2 : rnd(2)) : 0;
    for (size_t a = 0; a < arrivals; ++a) {
      Request r;
      const uint64_t sys = rnd(kSystemPrompts);
      for (size_t i = 0; i < kSystemBlocks; ++i) r.keys.push_back(key_from_sequence(1u << 20 | sys, i));
      r.own_from = r.keys.size();
      const size_t own = 8 + rnd(40);
      const uint64_t id = next_request++;
      for (size_t i = 0; i < own; ++i) r.keys.push_back(key_from_sequence(id, i));
      r.ends_at = step + 4 + rnd(12);
      const size_t n = r.keys.size();
      blocks.resize(n);
      if (placed_cap < n) {
        placed = std::make_unique<bool[]>(n);
        placed_cap = n;
      }
      const size_t matched = rt.prefix_lookup(r.keys.data(), n, true, true, blocks.data());
      for (size_t i = 0; i < matched; ++i) placed[i] = false;
      fill_placed(r.keys.data(), matched, blocks.data(), placed.get(), &c.computed);
      rt.admit_batch(r.keys.data() + matched, n - matched, true, blocks.data() + matched, placed.get() + matched);
      fill_placed(r.keys.data() + matched, n - matched, blocks.data() + matched, placed.get() + matched, &c.computed);
      rt.unpin_batch(r.keys.data(), n);
      ++c.requests;
      c.prefill_blocks += n;
      c.prefill_saved += matched;
      active.push_back(std::move(r));
    }
    // Decode: each running request attends to its context.
    for (const Request &r : active) {
      const size_t n = r.keys.size();
      blocks.resize(n);
      if (placed_cap < n) {
        placed = std::make_unique<bool[]>(n);
        placed_cap = n;
      }
      rt.admit_batch(r.keys.data(), n, true, blocks.data(), placed.get());
      fill_placed(r.keys.data(), n, blocks.data(), placed.get(), &c.recomputed);
      att.resize(n);
      for (size_t i = 0; i < n; ++i) att[i] = i < 2 || i + 4 >= n ? 1.0f : 0.02f + 0.01f * static_cast<float>(rnd(5));
      rt.access(r.keys.data(), att.data(), n);
      rt.unpin_batch(r.keys.data(), n);
      c.touches += n;
    }
    std::vector<Key> own;
    for (size_t i = 0; i < active.size();) {
      if (active[i].ends_at <= step) {
        const Request &r = active[i];
        // The request's own blocks that are still cached (unpinned between steps, some were
        // evicted); one the mover evicts meanwhile makes the batch fail whole, and then each is
        // released on its own.
        own.clear();
        Block b;
        for (size_t k = r.own_from; k < r.keys.size(); ++k)
          if (rt.lookup(r.keys[k], &b)) own.push_back(r.keys[k]);
        try {
          rt.release_batch(own.data(), own.size(), false);
        } catch (const Error &e) {
          if (e.code() != CXLT_ERROR_NOT_FOUND) throw;
          for (const Key &k : own) {
            try {
              rt.release(k, false);
            } catch (const Error &e2) {
              if (e2.code() != CXLT_ERROR_NOT_FOUND) throw;
            }
          }
        }
        active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    rt.step();
    if (settle) rt.wait_idle(-1);
  }
  rt.wait_idle(-1);
  for (auto &[k, t] : verified_tier) {  // the end: every resident block checked once more
    std::optional<Block> b = pin_for_check(rt, k);
    if (!b) continue;
    if (b->data != nullptr) {
      ++c.verified;
      if (!verify(b->data, b->bytes, k)) ++c.integrity_errors;
    }
    rt.unpin(k);
    (void)t;
  }
}

int run_prefill_burst(Runtime &rt, const RunOptions &o) {
  PrefillCounters c;
  auto t0 = std::chrono::steady_clock::now();
  prefill_burst(rt, o.steps, o.seed, o.settle, c);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const cxlt_stats_t s = rt.stats();
  const std::string validation = rt.validate();
  if (!validation.empty()) {
    ++c.integrity_errors;
    std::fprintf(stderr, "cxltier run: invariant violated: %s\n", validation.c_str());
  }
  nlohmann::json found = nlohmann::json::array(), per_block = nlohmann::json::array();
  for (uint32_t t = 0; t < s.tier_count; ++t) {
    found.push_back(c.found[t]);
    per_block.push_back(s.tier[t].blocks ? static_cast<double>(s.tier[t].hits) / static_cast<double>(s.tier[t].blocks) : 0.0);
  }
  if (o.json) {
    nlohmann::json j = nlohmann::json::parse(rt.stats_json());
    j["run"] = {{"workload", "prefill-burst"}, {"steps", o.steps}, {"seconds", secs}, {"requests", c.requests},
                {"prefill_blocks", c.prefill_blocks}, {"prefill_blocks_saved_by_prefix_hits", c.prefill_saved},
                {"blocks_computed", c.computed}, {"blocks_recomputed", c.recomputed}, {"block_touches", c.touches},
                {"touches_found_by_tier", found}, {"hits_per_resident_block", per_block},
                {"content_checks", c.verified}, {"integrity_errors", c.integrity_errors},
                {"invariants", validation.empty() ? "ok" : validation}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("\ncxltier run (prefill-burst): %llu steps in %.1f s, %llu requests\n", static_cast<unsigned long long>(o.steps),
                secs, static_cast<unsigned long long>(c.requests));
    std::printf("prefill blocks %llu, saved by prefix hits %llu (%.1f %%; higher is better), computed %llu, "
                "recomputed after a drop %llu\n",
                static_cast<unsigned long long>(c.prefill_blocks), static_cast<unsigned long long>(c.prefill_saved),
                c.prefill_blocks ? 100.0 * static_cast<double>(c.prefill_saved) / static_cast<double>(c.prefill_blocks) : 0.0,
                static_cast<unsigned long long>(c.computed), static_cast<unsigned long long>(c.recomputed));
    std::printf("placement: %llu inversions (lower is better), largest gap %.4g; hits per resident block:",
                static_cast<unsigned long long>(s.inversions), s.inversion_max_gap);
    for (uint32_t t = 0; t < s.tier_count; ++t) std::printf(" %s %.1f", rt.tier_info(t).name, per_block[t].get<double>());
    std::printf("\ncontent checks %llu, integrity errors: %llu\n", static_cast<unsigned long long>(c.verified),
                static_cast<unsigned long long>(c.integrity_errors));
  }
  std::fflush(stdout);
  return c.integrity_errors == 0 ? cxltier::cli::kExitOk : cxltier::cli::kExitCheckFailed;
}

int run(const RunOptions &o) {
  RuntimeConfig cfg;
  if (!o.config.empty()) cfg.load_toml_file(o.config);
  cfg.apply_environment();
  if (!o.topology.empty()) cfg.set("topology", o.topology);
  if (!o.store.empty()) cfg.set("store.path", o.store);
  for (const std::string &kv : o.sets) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) fail(CXLT_ERROR_INVALID_ARGUMENT, "--set '", kv, "' is not KEY=VALUE");
    cfg.set(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (o.config.empty() && std::getenv("CXLT_RUNTIME_VERIFY_COPIES") == nullptr) cfg.verify_copies = true;
  cfg.validate();
  if (cfg.geometry.bytes() < kHeaderBytes)
    fail(CXLT_ERROR_CONFIG, "the geometry gives ", cfg.geometry.bytes(), "-byte blocks; cxltier run writes a ",
         kHeaderBytes, "-byte header (key, version, checksum) into every block, so it needs blocks of at least ",
         kHeaderBytes, " bytes");
  auto rt = cxltier::cli::setup([&] { return Runtime::open(cfg); });
  const Topology &topo = rt->topology();
  if (!cfg.store_path.empty()) catch_stop_signals();
  if (o.workload == "prefill-burst") {
    const int rc = run_prefill_burst(*rt, o);
    rt->close();
    return rc;
  }

  trace::SyntheticParams wp;
  wp.seed = o.seed;
  wp.steps = o.steps;
  wp.sequences = o.sequences;
  wp.block_size_tokens = cfg.geometry.tokens_per_block;
  // A working set that the default budgets (1.75 GiB of 5 MiB blocks) can keep mostly resident,
  // with long contexts whose cold middle blocks must go down or out.
  wp.max_active = o.active;
  wp.prompt_tokens_max = 2048;
  wp.tail_fraction = 0.005;
  trace::SyntheticWorkload wl(wp);
  trace::Step step;

  if (!o.quiet) {
    // The topology's note (why these tiers, what is emulated) is `cxltier topo`'s to print, once.
    std::fprintf(stderr, "cxltier run: %zu tiers (%s topology: %s%s), %s blocks, %llu steps, seed %llu\n",
                 rt->tier_count(), topology_source_name(topo.source), topo.origin.c_str(),
                 topo.note.empty() ? "" : "; `cxltier topo` explains",
                 format_bytes(cfg.geometry.bytes()).c_str(), static_cast<unsigned long long>(o.steps),
                 static_cast<unsigned long long>(o.seed));
  }
  Counters c;
  Engine engine(*rt, c);
  std::vector<uint64_t> ids, handles, pinned;
  std::vector<float> att, chunk_att;
  std::unordered_map<uint64_t, float> merged;
  const bool tty = isatty(2);
  auto t0 = std::chrono::steady_clock::now();
  auto last_progress = t0;
  uint64_t done = 0;
  constexpr size_t kChunk = 32;  // blocks pinned at once (an engine's layer-by-layer working set)
  while (g_stop_signal == 0 && wl.next_step(step)) {
    for (uint64_t id : step.created) {
      bool first = !engine.known(id);
      if (engine.pin_or_compute(id, first)) rt->unpin(key_from_trace_id(id));
    }
    // One access per block per step: a block touched by several sequences (a shared prefix)
    // gets the largest mass any of them gave it.
    merged.clear();
    for (size_t i = 0; i < step.block.size(); ++i) {
      auto [it, fresh] = merged.try_emplace(step.block[i], step.attention[i]);
      if (!fresh) {
        ++c.shared_touches;
        it->second = std::max(it->second, step.attention[i]);
      }
    }
    ids.clear();
    att.clear();
    for (auto &[id, a] : merged) {
      ids.push_back(id);
      att.push_back(std::min(1.0f, a));
    }
    for (size_t s = 0; s < ids.size(); s += kChunk) {
      size_t e = std::min(ids.size(), s + kChunk);
      handles.clear();
      chunk_att.clear();
      pinned.clear();
      for (size_t i = s; i < e; ++i)
        if (auto b = engine.pin_or_compute(ids[i], !engine.known(ids[i]), true)) {
          handles.push_back(b->handle);
          chunk_att.push_back(att[i]);
          pinned.push_back(ids[i]);
        }
      if (!handles.empty()) rt->access_handles(handles.data(), chunk_att.data(), handles.size());
      for (uint64_t id : pinned) rt->unpin(key_from_trace_id(id));
      c.touches += e - s;
    }
    rt->step();
    if (o.settle) rt->wait_idle(-1);
    ++done;
    auto now = std::chrono::steady_clock::now();
    if (!o.quiet && (now - last_progress > std::chrono::milliseconds(tty ? 250 : 5000) || done == o.steps)) {
      last_progress = now;
      cxlt_stats_t s = rt->stats(/*measure_placement=*/false);  // the line shows no placement figure
      std::string occ;
      for (uint32_t t = 0; t < s.tier_count; ++t)
        occ += std::string(t ? "  " : "") + rt->tier_info(t).name + " " + std::to_string(s.tier[t].blocks) + "/" +
               std::to_string(s.tier[t].budget_bytes / cfg.geometry.bytes());
      std::fprintf(stderr, "%sstep %llu/%llu  %s  demoted %llu  promoted %llu  dropped %llu  integrity errors %llu%s",
                   tty ? "\r" : "", static_cast<unsigned long long>(done), static_cast<unsigned long long>(o.steps),
                   occ.c_str(), static_cast<unsigned long long>(s.demotions), static_cast<unsigned long long>(s.promotions),
                   static_cast<unsigned long long>(s.drops), static_cast<unsigned long long>(c.integrity_errors),
                   tty ? "   " : "\n");
    }
  }
  if (!o.quiet && tty) std::fprintf(stderr, "\n");
  rt->wait_idle(-1);
  engine.final_sweep();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cxlt_stats_t s = rt->stats();
  // Copies the runtime refused because the checksum of the copy did not match its source.
  const std::string validation = rt->validate();
  if (!validation.empty()) {
    ++c.integrity_errors;
    std::fprintf(stderr, "cxltier run: invariant violated: %s\n", validation.c_str());
  }

  if (o.json) {
    nlohmann::json j = nlohmann::json::parse(rt->stats_json());
    j["topology"] = {{"source", topology_source_name(topo.source)}, {"note", topo.note}};
    j["workload"] = nlohmann::json::parse(wp.to_json());
    nlohmann::json found = nlohmann::json::array(), per_block = nlohmann::json::array();
    for (uint32_t t = 0; t < s.tier_count; ++t) found.push_back(c.found[t]);
    for (uint32_t t = 0; t < s.tier_count; ++t)  // hits per block resident at the end (higher in faster tiers is right)
      per_block.push_back(s.tier[t].blocks ? static_cast<double>(s.tier[t].hits) / static_cast<double>(s.tier[t].blocks) : 0.0);
    j["run"] = {{"steps", done},
                {"touches_found_by_tier", found},
                {"hits_per_resident_block", per_block},
                {"seconds", secs},
                {"block_touches", c.touches},
                {"blocks_computed", c.computed},
                {"blocks_recomputed", c.recomputed},
                {"shared_prefix_touches", c.shared_touches},
                {"content_checks", c.verified},
                {"integrity_errors", c.integrity_errors},
                {"admissions_refused", c.refused},
                {"invariants", validation.empty() ? "ok" : validation}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("\ncxltier run: %llu decode steps in %.1f s on %s tiers (%s)\n", static_cast<unsigned long long>(done), secs,
                topology_source_name(topo.source), topo.origin.c_str());
    std::printf("\n%-6s %-9s %-9s %12s %12s %10s %12s\n", "tier", "backend", "kind", "budget", "occupancy", "blocks",
                "hits");
    for (uint32_t t = 0; t < s.tier_count; ++t) {
      cxlt_tier_info_t info = rt->tier_info(t);
      char occ[32];
      std::snprintf(occ, sizeof occ, "%.1f %%", 100.0 * static_cast<double>(s.tier[t].used_bytes) /
                                                     static_cast<double>(s.tier[t].budget_bytes));
      std::printf("%-6s %-9s %-9s %12s %12s %10llu %12llu\n", info.name, info.backend,
                  cxlt_tier_kind_name(info.kind), format_bytes(s.tier[t].budget_bytes).c_str(), occ,
                  static_cast<unsigned long long>(s.tier[t].blocks), static_cast<unsigned long long>(s.tier[t].hits));
    }
    uint64_t hits = 0;
    std::string per;
    for (uint32_t t = 0; t < s.tier_count; ++t) {
      hits += c.found[t];
      char b[64];
      std::snprintf(b, sizeof b, "%s%s %.1f %%", t ? ", " : "", rt->tier_info(t).name,
                    c.touches ? 100.0 * static_cast<double>(c.found[t]) / static_cast<double>(c.touches) : 0.0);
      per += b;
    }
    std::printf("\nblock touches %llu: found resident %.1f %% (%s), recomputed after a drop %llu (%.1f %%)\n",
                static_cast<unsigned long long>(c.touches),
                c.touches ? 100.0 * static_cast<double>(hits) / static_cast<double>(c.touches) : 0.0, per.c_str(),
                static_cast<unsigned long long>(c.recomputed),
                c.touches ? 100.0 * static_cast<double>(c.recomputed) / static_cast<double>(c.touches) : 0.0);
    std::printf("blocks computed %llu; touches of a block another sequence also used that step (shared prefixes) %llu\n",
                static_cast<unsigned long long>(c.computed), static_cast<unsigned long long>(c.shared_touches));
    std::printf("\n%-6s %-6s %-14s %10s %12s %10s\n", "from", "to", "method", "blocks", "bytes", "GB/s");
    for (uint32_t a = 0; a < s.tier_count; ++a)
      for (uint32_t b = 0; b < s.tier_count; ++b) {
        if (a == b || s.pair_blocks[a][b] == 0) continue;
        std::printf("%-6s %-6s %-14s %10llu %12s %10s\n", rt->tier_info(a).name, rt->tier_info(b).name,
                    rt->copy_method(a, b).c_str(), static_cast<unsigned long long>(s.pair_blocks[a][b]),
                    format_bytes(s.pair_bytes[a][b]).c_str(), gbps(s.pair_bytes[a][b], s.pair_ns[a][b]).c_str());
      }
    std::printf("\npromotions %llu, demotions %llu, drops %llu (state kept), re-admissions with restored state %llu\n",
                static_cast<unsigned long long>(s.promotions), static_cast<unsigned long long>(s.demotions),
                static_cast<unsigned long long>(s.drops), static_cast<unsigned long long>(s.readmissions_restored));
    std::printf("migration failures %llu, score store %llu states (%llu forgotten)\n",
                static_cast<unsigned long long>(s.migration_failures), static_cast<unsigned long long>(s.store_entries),
                static_cast<unsigned long long>(s.store_forgotten));
    if (rt->config().remote.enabled)  // the remote tier (docs/remote.md)
      std::printf("remote tier: %llu hits (blocks fetched, not recomputed), %llu misses, %llu written out, %llu failures; "
                  "%s in, %s out\n",
                  static_cast<unsigned long long>(s.remote_hits), static_cast<unsigned long long>(s.remote_misses),
                  static_cast<unsigned long long>(s.remote_writeouts), static_cast<unsigned long long>(s.remote_failures),
                  format_bytes(s.remote_bytes_in).c_str(), format_bytes(s.remote_bytes_out).c_str());
    if (c.refused != 0)
      std::printf("admissions refused (every block pinned or moving, after waiting for the moves): %llu; "
                  "those touches went without their block\n",
                  static_cast<unsigned long long>(c.refused));
    std::printf("placement: %llu inversions (lower is better; 0 is right), largest gap %.4g, %llu steps since none; "
                "hits per resident block:",
                static_cast<unsigned long long>(s.inversions), s.inversion_max_gap,
                static_cast<unsigned long long>(s.steps_since_no_inversion));
    for (uint32_t t = 0; t < s.tier_count; ++t)
      std::printf(" %s %.1f", rt->tier_info(t).name,
                  s.tier[t].blocks ? static_cast<double>(s.tier[t].hits) / static_cast<double>(s.tier[t].blocks) : 0.0);
    std::printf("\n");
    std::printf("content checks %llu, integrity errors: %llu\n", static_cast<unsigned long long>(c.verified),
                static_cast<unsigned long long>(c.integrity_errors));
    std::printf("(GB/s: 10^9 bytes per second of copy time, higher is better; hits: higher is better)\n");
  }
  std::fflush(stdout);
  rt->close();  // the final checkpoint: its failure is this command's error
  if (const int sig = g_stop_signal) {
    std::fprintf(stderr, "cxltier run: stopped by signal %d after %llu of %llu steps; the score store %s is checkpointed\n",
                 sig, static_cast<unsigned long long>(done), static_cast<unsigned long long>(o.steps),
                 cfg.store_path.c_str());
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  return c.integrity_errors == 0 ? cxltier::cli::kExitOk : cxltier::cli::kExitCheckFailed;
}

}  // namespace

static cxltier::cli::Registrar reg(20, [](CLI::App &app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App *sub = app.add_subcommand("run", "The main job: a seeded decode workload through the runtime on real memory, "
                                            "with per-tier hits, migrations and byte-integrity checks");
  sub->add_option("--config", o->config, "TOML configuration file (see docs/configuration.md)")
      ->check(cxltier::cli::non_empty("--config"));
  sub->add_option("--topology", o->topology, "auto, this-system, emulated or an hwloc XML file (overrides the config)")
      ->check(cxltier::cli::non_empty("--topology"));
  sub->add_option("--store", o->store, "score-store checkpoint file (persistence across restarts)")
      ->check(cxltier::cli::non_empty("--store"));
  sub->add_option("--set", o->sets, "KEY=VALUE configuration override, repeatable (e.g. policy.alpha=0.1)");
  sub->add_option("--steps", o->steps, "decode steps to run")->capture_default_str();
  sub->add_option("--seed", o->seed, "workload seed")->capture_default_str();
  sub->add_option("--sequences", o->sequences, "sequences over the whole run")->capture_default_str();
  sub->add_option("--active", o->active, "sequences decoding at once (the running batch)")->capture_default_str();
  sub->add_option("--workload", o->workload,
                  "decode (sequences decoding, the default) or prefill-burst (long prompts sharing system prompts, "
                  "through the batch and prefix calls)")
      ->check(CLI::IsMember({"decode", "prefill-burst"}))
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print the summary as JSON");
  sub->add_flag("--quiet", o->quiet, "No progress line");
  sub->add_flag("--settle", o->settle,
                "Wait for the background mover to go idle after every step, so the tiers are in policy order "
                "when the next step begins (the hits then depend little on the machine's speed)");
  return [o]() { return run(*o); };
});
