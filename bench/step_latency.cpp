// SPDX-License-Identifier: Apache-2.0
// How long an engine's decode step waits beside the mover: batches of random blocks of N
// resident ones, random attention, each `access_handles` and `step()` timed apart, on two
// tiers with the mover, its reconciliation and the migration workers running (60 % of the
// blocks fitting the first tier, promotion off, 1 KiB null blocks), and on one synchronous tier
// holding every block (no mover: the baseline, measured in the same run). The slow steps come
// from whatever holds the runtime's lock for long: the figures that matter are the 99th and
// 99.9th percentiles and the slowest step (bench/README.md, section 2). The ratios compare a
// decode step's whole wait, access_handles and step() together: where the batch is applied
// (at the call when the lock is free, else at step()) moves time between the two.
//
//   bench_step_latency [--blocks N] [--batch K] [--seconds S] [--pause-us P] [--json]
#include <cxltier/config.hpp>
#include <cxltier/key.hpp>
#include <cxltier/runtime.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
  size_t blocks = size_t{1} << 20;
  size_t batch = 4096;
  double seconds = 8.0;
  unsigned pause_us = 0;  // after each batch: a slower engine
  bool json = false;
};

void usage(FILE *to) {
  std::fprintf(to,
               "usage: bench_step_latency [--blocks N] [--batch K] [--seconds S] [--pause-us P] [--json]\n"
               "  --blocks N    resident blocks (default 1048576)\n"
               "  --batch K     random blocks accessed per step (default 4096)\n"
               "  --seconds S   time per runtime (default 8; the 99.9th percentile needs seconds)\n"
               "  --pause-us P  pause after each step, microseconds (default 0)\n"
               "  --json        one JSON object instead of text\n"
               "Times in microseconds, lower is better; ratios are beside the mover over one\n"
               "synchronous tier (no mover), of access and step together, lower is better.\n");
}

struct Quantiles {
  size_t n = 0;
  double mean = 0, p50 = 0, p99 = 0, p999 = 0, max = 0;
};

// Nearest rank: the smallest time at or above which the given share of the samples lie.
Quantiles quantiles(std::vector<double> v) {
  Quantiles q;
  if (v.empty()) return q;
  std::sort(v.begin(), v.end());
  q.n = v.size();
  double sum = 0;
  for (double x : v) sum += x;
  q.mean = sum / static_cast<double>(v.size());
  auto rank = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1)]; };
  q.p50 = rank(0.5);
  q.p99 = rank(0.99);
  q.p999 = rank(0.999);
  q.max = v.back();
  return q;
}

struct Run {
  Quantiles access, step, total;  // total: access and step of one decode step together
  uint64_t moves = 0;
};

Run run(const Options &o, bool tiered) {
  cxltier::RuntimeConfig cfg;
  cfg.topology = "emulated";
  cfg.geometry.layers = cfg.geometry.kv_heads = cfg.geometry.head_dim = cfg.geometry.bytes_per_element = 1;
  cfg.geometry.k_and_v = false;
  cfg.geometry.tokens_per_block = 1024;  // 1 KiB blocks: only the budgets see the size
  cxltier::TierConfig t;
  t.name = "hbm";
  t.kind = cxltier::TierKind::hbm;
  t.backend = "null";
  t.budget_bytes = (tiered ? o.blocks * 6 / 10 : o.blocks) * 1024;
  cfg.tiers.push_back(t);
  cfg.synchronous = !tiered;
  cfg.store_capacity = 2 * o.blocks;
  if (tiered) {
    t.name = "dram";
    t.kind = cxltier::TierKind::dram;
    t.budget_bytes = o.blocks * 1024;
    cfg.tiers.push_back(t);
    cfg.promotion = cxltier::PromotionRule::never;
  }
  auto rt = cxltier::Runtime::open(cfg);
  std::vector<uint64_t> handles(o.blocks);
  for (size_t i = 0; i < o.blocks; ++i) handles[i] = rt->admit(cxltier::key_from_sequence(i / 64, i % 64)).handle;
  rt->wait_idle(-1);  // the demotions and the order settled first
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<float> att(0.0f, 1.0f);
  std::vector<uint64_t> batch(o.batch);
  std::vector<float> attention(o.batch);
  std::vector<double> access_us, step_us, total_us;
  access_us.reserve(1u << 20);
  step_us.reserve(1u << 20);
  total_us.reserve(1u << 20);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (size_t i = 0; i < o.batch; ++i) {
      batch[i] = handles[rng() % handles.size()];
      attention[i] = att(rng);
    }
    const auto t0 = std::chrono::steady_clock::now();
    rt->access_handles(batch.data(), attention.data(), batch.size());
    const auto t1 = std::chrono::steady_clock::now();
    rt->step();
    const auto t2 = std::chrono::steady_clock::now();
    access_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    step_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    total_us.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
    if (o.pause_us != 0) std::this_thread::sleep_for(std::chrono::microseconds(o.pause_us));
  }
  Run r;
  r.access = quantiles(std::move(access_us));
  r.step = quantiles(std::move(step_us));
  r.total = quantiles(std::move(total_us));
  const cxlt_stats_t s = rt->stats(false);
  r.moves = s.promotions + s.demotions;
  return r;
}

void print_text(const char *name, const Run &r) {
  auto line = [](const char *what, const Quantiles &q) {
    std::printf("  %-7s n=%zu mean %.1f p50 %.1f p99 %.1f p99.9 %.1f max %.1f us\n", what, q.n, q.mean, q.p50, q.p99,
                q.p999, q.max);
  };
  std::printf("%s (moves %llu):\n", name, static_cast<unsigned long long>(r.moves));
  line("access", r.access);
  line("step", r.step);
  line("total", r.total);
}

void print_json_run(const char *name, const Run &r, bool last) {
  auto q = [](const char *what, const Quantiles &x, bool comma) {
    std::printf("\"%s\":{\"n\":%zu,\"mean_us\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f}%s", what,
                x.n, x.mean, x.p50, x.p99, x.p999, x.max, comma ? "," : "");
  };
  std::printf("\"%s\":{\"moves\":%llu,", name, static_cast<unsigned long long>(r.moves));
  q("access", r.access, true);
  q("step", r.step, true);
  q("total", r.total, false);
  std::printf("}%s", last ? "" : ",");
}

bool parse(int argc, char **argv, Options *o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char *name) -> const char * {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_step_latency: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    auto number = [&](const char *name, double lo, double *out) {
      const char *v = value(name);
      if (v == nullptr) return false;
      char *endp = nullptr;
      const double d = std::strtod(v, &endp);
      if (endp == v || *endp != '\0' || !(d >= lo) || d > 1e12) {
        std::fprintf(stderr, "bench_step_latency: %s %s: not a number >= %g\n", name, v, lo);
        return false;
      }
      *out = d;
      return true;
    };
    double d = 0;
    if (a == "--help" || a == "-h") {
      usage(stdout);
      std::exit(0);
    } else if (a == "--json") {
      o->json = true;
    } else if (a == "--blocks") {
      if (!number("--blocks", 64, &d)) return false;
      o->blocks = static_cast<size_t>(d);
    } else if (a == "--batch") {
      if (!number("--batch", 1, &d)) return false;
      o->batch = static_cast<size_t>(d);
    } else if (a == "--seconds") {
      if (!number("--seconds", 0.001, &d)) return false;
      o->seconds = d;
    } else if (a == "--pause-us") {
      if (!number("--pause-us", 0, &d) || d > 1e7) return false;
      o->pause_us = static_cast<unsigned>(d);
    } else {
      std::fprintf(stderr, "bench_step_latency: unknown option %s\n", a.c_str());
      usage(stderr);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  try {
    const Run tiered = run(o, true);
    const Run alone = run(o, false);
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    if (o.json) {
      std::printf("{\"blocks\":%zu,\"batch\":%zu,\"seconds\":%g,\"pause_us\":%u,", o.blocks, o.batch, o.seconds, o.pause_us);
      print_json_run("beside_mover", tiered, false);
      print_json_run("one_sync_tier", alone, false);
      std::printf("\"total_ratio\":{\"p99\":%.2f,\"p999\":%.2f,\"max\":%.2f}}\n", ratio(tiered.total.p99, alone.total.p99),
                  ratio(tiered.total.p999, alone.total.p999), ratio(tiered.total.max, alone.total.max));
    } else {
      std::printf("%zu resident blocks, batches of %zu random blocks, %g s each\n", o.blocks, o.batch, o.seconds);
      print_text("beside the mover (two tiers)", tiered);
      print_text("one synchronous tier (baseline)", alone);
      std::printf("access and step beside the mover over the baseline (lower is better): p99 %.2fx, p99.9 %.2fx, max %.2fx\n",
                  ratio(tiered.total.p99, alone.total.p99), ratio(tiered.total.p999, alone.total.p999),
                  ratio(tiered.total.max, alone.total.max));
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "bench_step_latency: %s\n", e.what());
    return 1;
  }
  return 0;
}
