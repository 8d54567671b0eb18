// SPDX-License-Identifier: Apache-2.0
// `cxltier sweep`: the LRFU alpha x beta grid, every baseline and the OPT bound at each capacity,
// persistence on and off, in parallel with a progress bar; tables, JSON, CSV, and gnuplot plots
// (a heat map of hit rate over alpha x beta per capacity, hit-rate curves over capacity per
// policy). Exit status 1 when any policy beats OPT (a bug). docs/replay.md.
#include "commands.hpp"
#include "gnuplot.hpp"
#include "replay_cli.hpp"

#include "lib/core/text.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/replay.hpp>
#include <cxltier/tools/units.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

namespace {

using namespace cxltier;
using replay::SweepResult;
using replay::SweepRow;

struct SweepFlags {
  cxltier::cli::TraceFlags trace;
  std::string alphas = "0.5,0.3,0.15,0.05,0.01,0.003,0.001";
  std::string betas = "0,0.0001,0.001,0.01,0.1";
  std::string score_mode = "touch";
  unsigned index_buckets = 256;
  std::string capacities;
  std::string fractions;
  std::string budgets;
  std::string block_bytes = "5MiB";
  std::string policies = "lrfu,lru,fifo,lfu,arc";
  std::string persist;
  unsigned jobs = 0;
  std::string json_path;
  std::string csv_path;
  std::string plot;
  bool quiet = false;
  CLI::Option *json_opt = nullptr;
  CLI::Option *csv_opt = nullptr;
};

std::string g(double v) { return cxltier::text::shortest(v); }

// Rows of one policy label at one capacity.
std::vector<const SweepRow *> rows_of(const SweepResult &r, const std::string &label, uint64_t cap) {
  std::vector<const SweepRow *> out;
  for (const SweepRow &row : r.rows)
    if (row.capacity_blocks == cap && replay::policy_label(row.policy) == label) out.push_back(&row);
  return out;
}

const SweepRow *best_of(const std::vector<const SweepRow *> &rows) {
  const SweepRow *b = nullptr;
  for (const SweepRow *r : rows)
    if (!b || r->hits > b->hits) b = r;
  return b;
}

// Policy labels in a fixed order, those present only.
std::vector<std::string> labels(const SweepResult &r) {
  std::set<std::string> have;
  for (const SweepRow &row : r.rows) have.insert(replay::policy_label(row.policy));
  std::vector<std::string> out;
  for (const char *l : {"opt", "lrfu", "lrfu-nopersist", "lru", "fifo", "lfu", "lfu-nopersist", "arc"})
    if (have.count(l)) out.push_back(l);
  return out;
}

std::vector<double> distinct(const SweepResult &r, const std::string &label, bool alpha) {
  std::vector<double> v;
  for (const SweepRow &row : r.rows) {
    if (replay::policy_label(row.policy) != label) continue;
    double x = alpha ? row.alpha : row.beta;
    bool seen = false;
    for (double y : v) seen = seen || y == x;
    if (!seen) v.push_back(x);
  }
  return v;
}

const SweepRow *grid_at(const SweepResult &r, const std::string &label, uint64_t cap, double a, double b) {
  for (const SweepRow &row : r.rows)
    if (row.capacity_blocks == cap && row.alpha == a && row.beta == b && replay::policy_label(row.policy) == label)
      return &row;
  return nullptr;
}

void print_tables(const SweepResult &r) {
  std::printf("trace      %s (%s, %u-token blocks): %llu requests, %llu references, %llu unique blocks\n", r.trace.c_str(),
              trace::format_name(r.format), r.block_size_tokens, static_cast<unsigned long long>(r.requests),
              static_cast<unsigned long long>(r.references), static_cast<unsigned long long>(r.unique_blocks));
  std::printf("attention  %s\n", r.trace_attention ? "from the trace" : "constant 1.0 (the trace has no attention values)");
  std::printf("runs       %zu in %.1f s on %u jobs\n", r.rows.size(), r.seconds, r.jobs);
  if (r.malformed_lines)
    std::printf("malformed  %llu lines skipped (cxltier replay lists them; --strict stops)\n",
                static_cast<unsigned long long>(r.malformed_lines));
  std::printf("\nHit rate (%%, higher is better) by capacity in blocks (%s per block; a block count):\n",
              format_bytes(r.block_bytes).c_str());
  std::printf("%-34s", "policy");
  for (uint64_t c : r.capacities) std::printf(" %10llu", static_cast<unsigned long long>(c));
  std::printf("\n");
  for (const std::string &l : labels(r)) {
    bool grid = l.rfind("lrfu", 0) == 0;
    std::printf("%-34s", (l == "opt" ? std::string("opt (Belady bound)") : grid ? l + " (best of the grid)" : l).c_str());
    for (uint64_t c : r.capacities) {
      const SweepRow *b = best_of(rows_of(r, l, c));
      if (b) std::printf(" %10.2f", 100.0 * b->hit_rate);
      else std::printf(" %10s", "-");
    }
    std::printf("\n");
    if (grid) {
      std::printf("%-34s", "  best alpha / beta");
      for (uint64_t c : r.capacities) {
        const SweepRow *b = best_of(rows_of(r, l, c));
        std::printf(" %10s", b ? (g(b->alpha) + "/" + g(b->beta)).c_str() : "-");
      }
      std::printf("\n");
      if (const SweepRow *d = grid_at(r, l, r.capacities.front(), 0.05, 0.001); d) {
        std::printf("%-34s", ("  " + l + " at 0.05 / 0.001").c_str());
        for (uint64_t c : r.capacities) {
          const SweepRow *x = grid_at(r, l, c, 0.05, 0.001);
          if (x) std::printf(" %10.2f", 100.0 * x->hit_rate);
          else std::printf(" %10s", "-");
        }
        std::printf("\n");
      }
    }
  }
  for (const std::string &l : labels(r)) {
    if (l.rfind("lrfu", 0) != 0) continue;
    std::vector<double> as = distinct(r, l, true), bs = distinct(r, l, false);
    for (uint64_t c : r.capacities) {
      std::printf("\n%s: hit rate (%%, higher is better) over alpha (rows) x beta per step (columns), %llu blocks\n",
                  l.c_str(), static_cast<unsigned long long>(c));
      std::printf("%-12s", "alpha\\beta");
      for (double b : bs) std::printf(" %9s", g(b).c_str());
      std::printf("\n");
      for (double a : as) {
        std::printf("%-12s", g(a).c_str());
        for (double b : bs) {
          const SweepRow *x = grid_at(r, l, c, a, b);
          if (x) std::printf(" %9.2f", 100.0 * x->hit_rate);
          else std::printf(" %9s", "-");
        }
        std::printf("\n");
      }
    }
  }
}

void write_out(const std::string &path, const std::string &text, const char *what) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) fail(CXLT_ERROR_IO, what, ": cannot write ", path);
}

// Every text in the script is a literal (gnuplot.hpp); shown without enhanced-text markup.
std::string quote_gp(const std::string &s) { return cxltier::cli::gnuplot_literal(s); }

std::string basename_of(const std::string &p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// The gnuplot script: a multiplot with hit-rate curves over capacity (one line per policy
// label, LRFU at its best grid point) and one heat map of the LRFU grid per capacity and
// persist setting. Data are inline (datablocks), so the script alone redraws the plot.
std::string plot_script(const SweepResult &r, const std::string &out) {
  const bool svg = out.size() >= 4 && out.compare(out.size() - 4, 4, ".svg") == 0;
  std::vector<std::string> grids;
  for (const std::string &l : labels(r))
    if (l.rfind("lrfu", 0) == 0) grids.push_back(l);
  const size_t panels = 1 + grids.size() * r.capacities.size();
  const size_t cols = std::min<size_t>(3, panels), rows = (panels + cols - 1) / cols;
  std::ostringstream s;
  s << "# cxltier sweep plot (redraw: gnuplot THIS_FILE > OUTPUT)\n";
  s << "set terminal " << (svg ? "svg" : "pngcairo") << " size " << cols * 560 << "," << rows * 440
    << (svg ? " dynamic font 'sans,10'" : " font 'sans,10'") << " noenhanced\n";
  s << "set multiplot layout " << rows << "," << cols << " title "
    << quote_gp(basename_of(r.trace) + ": hit rate, higher is better (attention " +
                (r.trace_attention ? "from the trace" : "constant 1.0") + ")")
    << "\n";
  // Curves.
  s << "$curves << EOD\n";
  std::vector<std::string> ls = labels(r);
  for (const std::string &l : ls) {
    for (uint64_t c : r.capacities) {
      const SweepRow *b = best_of(rows_of(r, l, c));
      if (b) s << c << " " << 100.0 * b->hit_rate << "\n";
    }
    s << "\n\n";
  }
  s << "EOD\n";
  s << "set title 'hit rate over capacity (LRFU: best alpha, beta of the grid)'\n";
  s << "set xlabel 'capacity (blocks)'\nset ylabel 'hit rate (%)'\nset key left top\nset grid\n";
  if (r.capacities.size() > 1 && r.capacities.back() >= 10 * r.capacities.front()) s << "set logscale x\n";
  s << "plot ";
  for (size_t i = 0; i < ls.size(); ++i)
    s << (i ? ", " : "") << "$curves index " << i << " using 1:2 with linespoints title " << quote_gp(ls[i])
      << (ls[i] == "opt" ? " dashtype 2 lw 2" : "");
  s << "\nunset logscale x\nunset grid\n";
  // Heat maps.
  int block = 0;
  for (const std::string &l : grids) {
    std::vector<double> as = distinct(r, l, true), bs = distinct(r, l, false);
    for (uint64_t c : r.capacities) {
      std::string name = "$grid" + std::to_string(block++);
      s << name << " << EOD\n";
      for (size_t j = 0; j < as.size(); ++j)
        for (size_t i = 0; i < bs.size(); ++i) {
          const SweepRow *x = grid_at(r, l, c, as[j], bs[i]);
          if (x) s << i << " " << j << " " << 100.0 * x->hit_rate << "\n";
        }
      s << "EOD\n";
      s << "set title " << quote_gp(l + ", " + std::to_string(c) + " blocks: hit rate (%) over alpha x beta") << "\n";
      s << "set xlabel 'beta (per decode step)'\nset ylabel 'alpha'\n";
      s << "set xtics (";
      for (size_t i = 0; i < bs.size(); ++i) s << (i ? ", " : "") << quote_gp(g(bs[i])) << " " << i;
      s << ")\nset ytics (";
      for (size_t j = 0; j < as.size(); ++j) s << (j ? ", " : "") << quote_gp(g(as[j])) << " " << j;
      s << ")\n";
      s << "set xrange [-0.5:" << static_cast<double>(bs.size()) - 0.5 << "]\nset yrange [-0.5:"
        << static_cast<double>(as.size()) - 0.5 << "]\n";
      s << "set cblabel 'hit rate (%)'\nset palette rgbformulae 33,13,10\nunset key\n";
      s << "plot " << name << " using 1:2:3 with image, " << name
        << " using 1:2:(sprintf('%.1f', $3)) with labels font ',8'\n";
      s << "set xtics auto\nset ytics auto\nset autoscale xy\n";
    }
  }
  s << "unset multiplot\n";
  return s.str();
}

}  // namespace

static cxltier::cli::Registrar reg(71, [](CLI::App &app) {
  auto f = std::make_shared<SweepFlags>();
  CLI::App *sub = app.add_subcommand(
      "sweep", "Sweep LRFU alpha x beta, every baseline and the OPT bound over capacities, in parallel, on one trace");
  cxltier::cli::add_trace_flags(sub, f->trace);
  sub->add_option("--alpha", f->alphas, "LRFU alphas, each in (0, 1]")->capture_default_str()->type_name("LIST");
  sub->add_option("--beta", f->betas, "LRFU betas per decode step (per request on hash traces), each >= 0")
      ->capture_default_str()
      ->type_name("LIST");
  sub->add_option("--score-mode", f->score_mode, "touch or decay")->capture_default_str();
  sub->add_option("--index-buckets", f->index_buckets,
                  "LRFU index score buckets, a power of two (speed only: the victim is exact either way)")
      ->capture_default_str();
  sub->add_option("--capacity-blocks", f->capacities, "capacities in blocks")->type_name("LIST");
  sub->add_option("--capacity-fraction", f->fractions, "capacities as fractions of the trace's unique blocks, in (0, 1]")
      ->type_name("LIST");
  sub->add_option("--budget", f->budgets, "capacities as sizes (floor(SIZE / --block-bytes) blocks)")->type_name("LIST");
  sub->add_option("--block-bytes", f->block_bytes, "bytes per block")->capture_default_str()->type_name("SIZE");
  sub->add_option("--policies", f->policies,
                  "from lrfu, lru, fifo, lfu, arc, lrfu-nopersist, lfu-nopersist (opt, the bound, is always run)")
      ->capture_default_str()
      ->type_name("LIST");
  sub->add_option("--persist", f->persist, "on, off or on,off: for lrfu and lfu, whose decisions read the kept state")
      ->type_name("LIST");
  sub->add_option("--jobs", f->jobs, "parallel runs (default: one per CPU)")->type_name("N");
  f->json_opt = sub->add_option("--json", f->json_path, "JSON to FILE (no FILE or -: stdout, instead of the tables)")
                    ->expected(0, 1)
                    ->type_name("[FILE]");
  f->csv_opt = sub->add_option("--csv", f->csv_path, "CSV, one row per run, to FILE (no FILE or -: stdout)")
                   ->expected(0, 1)
                   ->type_name("[FILE]");
  sub->add_option("--plot", f->plot, "heat maps and capacity curves with gnuplot to FILE (.png or .svg); the script is kept as FILE.gp")
      ->type_name("FILE");
  sub->add_flag("--quiet", f->quiet, "no progress bar on stderr");
  return [f]() -> int {
    replay::SweepOptions o;
    o.trace = f->trace.path;
    o.reader = cxltier::cli::reader_options(f->trace);
    o.alphas = parse_double_list(f->alphas, "--alpha");
    o.betas = parse_double_list(f->betas, "--beta");
    auto mode = parse_score_mode(f->score_mode);
    if (!mode) fail(CXLT_ERROR_INVALID_ARGUMENT, "--score-mode: '", f->score_mode, "' is not touch or decay");
    o.mode = *mode;
    o.index_buckets = f->index_buckets;
    o.block_bytes = parse_size(f->block_bytes, "--block-bytes");
    if (o.block_bytes == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "--block-bytes: 0 is not a block size");
    if (!f->capacities.empty())
      for (const std::string &c : split_list(f->capacities, "--capacity-blocks"))
        o.capacities.push_back(parse_u64(c, "--capacity-blocks"));
    if (!f->budgets.empty())
      for (uint64_t b : parse_size_list(f->budgets, "--budget")) {
        if (b < o.block_bytes)
          fail(CXLT_ERROR_INVALID_ARGUMENT, "--budget: ", format_bytes(b), " is smaller than one block (",
               format_bytes(o.block_bytes), ")");
        o.capacities.push_back(b / o.block_bytes);
      }
    if (!f->fractions.empty()) o.capacity_fractions = parse_double_list(f->fractions, "--capacity-fraction");
    o.policies.clear();
    for (const std::string &p : split_list(f->policies, "--policies")) o.policies.push_back(replay::parse_policy(p));
    if (!f->persist.empty())
      for (const std::string &p : split_list(f->persist, "--persist")) o.persist.push_back(parse_bool(p, "--persist"));
    o.jobs = f->jobs;
    if (!f->plot.empty()) {
      const std::string &p = f->plot;
      bool ok = (p.size() > 4 && (p.compare(p.size() - 4, 4, ".png") == 0 || p.compare(p.size() - 4, 4, ".svg") == 0));
      if (!ok) fail(CXLT_ERROR_INVALID_ARGUMENT, "--plot: '", p, "' must end in .png or .svg");
    }
    const bool json = f->json_opt->count() > 0, csv = f->csv_opt->count() > 0;
    const bool json_stdout = json && (f->json_path.empty() || f->json_path == "-");
    const bool csv_stdout = csv && (f->csv_path.empty() || f->csv_path == "-");
    if (json_stdout && csv_stdout) fail(CXLT_ERROR_INVALID_ARGUMENT, "--json and --csv cannot both go to stdout");

    cxltier::cli::ProgressLine progress("sweep", f->quiet);
    o.progress = [&progress](size_t done, size_t total) { progress.runs(done, total); };
    SweepResult r = replay::sweep(o);
    progress.finish();
    if (json) write_out(f->json_path, replay::sweep_json(r) + "\n", "--json");
    if (csv) write_out(f->csv_path, replay::sweep_csv(r), "--csv");
    if (!json_stdout && !csv_stdout) print_tables(r);
    std::fflush(stdout);
    int rc = cxltier::cli::kExitOk;
    if (!f->plot.empty()) {
      std::string script = f->plot + ".gp";
      write_out(script, plot_script(r, f->plot), "--plot");
      std::string err = cxltier::cli::run_gnuplot(script, f->plot);
      if (!err.empty()) {
        std::fprintf(stderr, "cxltier sweep: --plot: %s\n", err.c_str());
        rc = cxltier::cli::kExitCheckFailed;
      }
    }
    for (const std::string &v : r.violations) std::fprintf(stderr, "cxltier sweep: CHECK FAILED: %s\n", v.c_str());
    if (!r.violations.empty()) return cxltier::cli::kExitCheckFailed;
    return rc;
  };
});
