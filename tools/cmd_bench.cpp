// SPDX-License-Identifier: Apache-2.0
// `cxltier bench`: migration bandwidth against this machine's own limits, measured in one run
// on the same blocks: libc memcpy (one thread, then N threads, pinned with --pin), the kernel's move_pages
// between two NUMA nodes, and the runtime's migration for every ordered tier pair. A table,
// JSON (--json; schema in bench/README.md), CSV rows (--csv) and a gnuplot plot (--plot);
// sweeps of block size, batch and threads. Measuring code: bench_migration.cpp.
#include "bench_migration.hpp"
#include "commands.hpp"
#include "gnuplot.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include "cxlt_config.h"

#include <nlohmann/json.hpp>

#include <numa.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

extern char **environ;

namespace {

using namespace cxltier;
using nlohmann::ordered_json;

constexpr double kGoalVsMemcpy = 0.90;     // batched migration vs the multithreaded memcpy
constexpr double kGoalVsMovePages = 3.0;   // vs the kernel's move_pages of 4 KiB pages

struct BenchOptions {
  std::string topology;
  std::string config;
  std::string block_bytes;  // SIZE or a comma list (a sweep)
  uint32_t blocks = 0;
  std::string batch;        // N or a list
  std::string threads;      // N or a list
  std::vector<std::string> sweep;
  unsigned runs = 5;
  unsigned warmup = 1;
  bool json = false;
  bool quiet = false;
  bool pin = false;
  std::string csv;
  std::string plot;
};

struct Point {
  uint64_t block_bytes = 0;
  // As asked (0: the default), not as resolved: the default batch is every block, so it
  // differs between block sizes, and the plot groups points by what was asked.
  uint32_t batch = 0;
  unsigned threads = 0;
  bench::BenchResult r;
};

std::vector<uint64_t> parse_counts(const std::string &text, const char *what, uint64_t max) {
  std::vector<uint64_t> out;
  for (const std::string &s : split_list(text, what)) {
    uint64_t v = parse_u64(s, what);
    if (v == 0 || v > max) fail(CXLT_ERROR_INVALID_ARGUMENT, what, " ", v, " is outside 1 .. ", max);
    out.push_back(v);
  }
  return out;
}

std::string read_line(const char *path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  return "";
}

ordered_json machine_json(const bench::BenchResult &r) {
  ordered_json m;
  m["cpu_model"] = cpu_model();
  m["cpus_online"] = sysconf(_SC_NPROCESSORS_ONLN);
  m["cpus_allowed"] = r.cpus.size();
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  m["memory_bytes"] = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  ordered_json nodes = ordered_json::array();
  if (numa_available() >= 0)
    for (int n = 0; n <= numa_max_node(); ++n)
      if (numa_node_size64(n, nullptr) > 0) nodes.push_back(n);
  m["numa_nodes"] = nodes;
  utsname u{};
  m["kernel"] = uname(&u) == 0 ? std::string(u.sysname) + " " + u.release + " " + u.machine : "";
  m["transparent_hugepages"] = read_line("/sys/kernel/mm/transparent_hugepage/enabled");
  m["hugepages_2m_free"] = std::atoll(read_line("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages").c_str());
  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  m["date_utc"] = date;
  m["cxltier_version"] = CXLT_VERSION_STRING;
  return m;
}

ordered_json num_or_null(const bench::Row &row) { return row.measured ? ordered_json(row.gbps()) : ordered_json(); }

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

ordered_json row_json(const bench::Row &row, double memcpy_gbps) {
  ordered_json j;
  j["label"] = row.label;
  j["method"] = row.method;
  j["measured"] = row.measured;
  j["reason"] = row.measured ? ordered_json() : ordered_json(row.reason);
  j["threads"] = row.threads;
  j["bytes_per_block"] = row.unit_bytes;
  if (!row.measured) return j;
  j["gbps"] = row.gbps();
  j["gbps_min"] = row.gbps_min();
  j["gbps_max"] = row.gbps_max();
  j["spread_pct"] = row.spread_pct();
  j["gbps_runs"] = row.gbps_runs;
  j["blocks_per_s"] = row.blocks_per_s();
  j["block_latency_us_median"] = row.latency_median_us();
  j["block_latency_us_p99"] = row.latency_p99_us();
  j["ratio_to_memcpy"] = ratio(row.gbps(), memcpy_gbps);
  return j;
}

// The two goals, judged on this point's figures.
struct Goals {
  double vs_memcpy = 0;
  std::string worst_pair;
  bool vs_memcpy_known = false;
  double vs_move_pages = 0;
  std::string mp_pairs, mp_reason;
  bool vs_move_pages_known = false;
};

Goals judge(const bench::BenchResult &r) {
  Goals g;
  const double mc = r.memcpy_threads.gbps();
  for (const bench::Row &p : r.pairs) {
    double x = ratio(p.gbps(), mc);
    if (!g.vs_memcpy_known || x < g.vs_memcpy) {
      g.vs_memcpy = x;
      g.worst_pair = p.label;
      g.vs_memcpy_known = true;
    }
  }
  if (!r.move_pages_4k.measured) {
    g.mp_reason = r.move_pages_4k.reason;
  } else if (r.compare_pair_a < 0) {
    g.mp_reason = "not comparable: the tiers are not on the two NUMA nodes move_pages used (" +
                  std::string(r.topology.source == TopologySource::emulated ? "emulated tiers" : "same node") + ")";
  } else {
    double worst = -1;
    for (const bench::Row &p : r.pairs)
      if ((p.from_rank == r.compare_pair_a && p.to_rank == r.compare_pair_b) ||
          (p.from_rank == r.compare_pair_b && p.to_rank == r.compare_pair_a)) {
        if (worst < 0 || p.gbps() < worst) worst = p.gbps();
        g.mp_pairs += (g.mp_pairs.empty() ? "" : ", ") + p.label;
      }
    if (worst >= 0) {
      g.vs_move_pages = ratio(worst, r.move_pages_4k.gbps());
      g.vs_move_pages_known = true;
    }
  }
  return g;
}

ordered_json point_json(const Point &pt) {
  const bench::BenchResult &r = pt.r;
  const double mc = r.memcpy_threads.gbps();
  ordered_json j;
  j["memcpy_gbps"] = mc;
  j["memcpy_1thread_gbps"] = r.memcpy_1thread.gbps();
  j["move_pages_4k_gbps"] = num_or_null(r.move_pages_4k);
  j["move_pages_huge_gbps"] = num_or_null(r.move_pages_huge);
  j["move_pages_4k_reason"] = r.move_pages_4k.measured ? ordered_json() : ordered_json(r.move_pages_4k.reason);
  j["move_pages_huge_reason"] = r.move_pages_huge.measured ? ordered_json() : ordered_json(r.move_pages_huge.reason);
  j["move_pages_nodes"] = r.node_a >= 0 ? ordered_json::array({r.node_a, r.node_b}) : ordered_json();
  j["move_pages_huge_kind"] = r.huge_kind.empty() ? ordered_json() : ordered_json(r.huge_kind);
  ordered_json pairs = ordered_json::array();
  for (const bench::Row &p : r.pairs) {
    ordered_json x;
    x["from"] = p.from;
    x["to"] = p.to;
    x["method"] = p.method;
    x["gbps"] = p.gbps();
    x["ratio_to_memcpy"] = ratio(p.gbps(), mc);
    x["block_latency_us_median"] = p.latency_median_us();
    x["block_latency_us_p99"] = p.latency_p99_us();
    x["gbps_min"] = p.gbps_min();
    x["gbps_max"] = p.gbps_max();
    x["spread_pct"] = p.spread_pct();
    x["gbps_runs"] = p.gbps_runs;
    x["blocks_per_s"] = p.blocks_per_s();
    x["threads"] = p.threads;
    x["ratio_to_move_pages_4k"] =
        r.move_pages_4k.measured ? ordered_json(ratio(p.gbps(), r.move_pages_4k.gbps())) : ordered_json();
    pairs.push_back(x);
  }
  j["pairs"] = pairs;
  ordered_json params;
  params["block_bytes"] = r.block_bytes;
  params["blocks"] = r.blocks;
  params["batch"] = r.batch;
  params["threads"] = r.threads;
  params["cpus"] = r.cpus;
  params["pinned"] = r.pinned;
  params["runs"] = r.runs;
  params["warmup_runs"] = r.warmup;
  params["copy_kernel"] = r.copy_kernel;
  params["verify_copies"] = r.verify_copies;
  j["parameters"] = params;
  j["topology"] = {{"source", topology_source_name(r.topology.source)}, {"origin", r.topology.origin}, {"note", r.topology.note}};
  ordered_json tiers = ordered_json::array();
  for (size_t i = 0; i < r.tiers.size(); ++i)
    tiers.push_back({{"rank", i}, {"name", r.tiers[i].name}, {"kind", r.tiers[i].kind}, {"backend", r.tiers[i].backend},
                     {"numa_nodes", r.tiers[i].numa_nodes}});
  j["tiers"] = tiers;
  ordered_json rows = ordered_json::array();
  for (const bench::Row *row : {&r.memcpy_1thread, &r.memcpy_threads, &r.move_pages_4k, &r.move_pages_huge})
    rows.push_back(row_json(*row, mc));
  j["rows"] = rows;
  Goals g = judge(r);
  ordered_json goals;
  goals["migration_vs_memcpy"] = {
      {"goal", kGoalVsMemcpy},
      {"ratio", g.vs_memcpy_known ? ordered_json(g.vs_memcpy) : ordered_json()},
      {"worst_pair", g.vs_memcpy_known ? ordered_json(g.worst_pair) : ordered_json()},
      {"met", g.vs_memcpy_known ? ordered_json(g.vs_memcpy >= kGoalVsMemcpy) : ordered_json()},
      {"stated_for", "5 MiB blocks, batched, 2 threads"}};
  goals["migration_vs_move_pages_4k"] = {
      {"goal", kGoalVsMovePages},
      {"ratio", g.vs_move_pages_known ? ordered_json(g.vs_move_pages) : ordered_json()},
      {"pairs", g.vs_move_pages_known ? ordered_json(g.mp_pairs) : ordered_json()},
      {"met", g.vs_move_pages_known ? ordered_json(g.vs_move_pages >= kGoalVsMovePages) : ordered_json()},
      {"reason", g.vs_move_pages_known ? ordered_json() : ordered_json(g.mp_reason)}};
  j["goals"] = goals;
  j["integrity"] = {{"blocks_checked", r.integrity_checked}, {"errors", r.integrity_errors}};
  j["load_average_1m"] = {{"before", r.load_before}, {"after", r.load_after}};
  return j;
}

void print_row(const bench::Row &row, double mc) {
  if (!row.measured) {
    std::printf("%-34s %-12s %s\n", row.label.c_str(), row.method.c_str(), row.reason.c_str());
    return;
  }
  std::printf("%-34s %-12s %8.2f %8.2f %8.2f %7.1f%% %10.0f %10.1f %10.1f %7.2fx\n", row.label.c_str(), row.method.c_str(),
              row.gbps(), row.gbps_min(), row.gbps_max(), row.spread_pct(), row.blocks_per_s(), row.latency_median_us(),
              row.latency_p99_us(), ratio(row.gbps(), mc));
}

void print_point(const Point &pt) {
  const bench::BenchResult &r = pt.r;
  const double mc = r.memcpy_threads.gbps();
  std::string tiers, cpus;
  for (const bench::TierInfo &t : r.tiers) tiers += (tiers.empty() ? "" : ", ") + t.name + " (" + t.backend + ")";
  for (int c : r.cpus) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
  std::printf("\ncxltier bench: %s topology (%s): %s\n", topology_source_name(r.topology.source), r.topology.origin.c_str(),
              tiers.c_str());
  std::printf("%u blocks of %s (%s a pass), batch %u, %u thread%s %s CPUs %s; median of %u runs after %u warm-up; "
              "load average %.1f before, %.1f after\n",
              r.blocks, format_bytes(r.block_bytes).c_str(), format_bytes(r.block_bytes * r.blocks).c_str(), r.batch,
              r.threads, r.threads == 1 ? "" : "s", r.pinned ? "pinned to" : "(not pinned) on", cpus.c_str(), r.runs,
              r.warmup, r.load_before, r.load_after);
  std::printf("\n%-34s %-12s %8s %8s %8s %8s %10s %10s %10s %8s\n", "", "", "GB/s", "", "", "", "", "latency us", "", "");
  std::printf("%-34s %-12s %8s %8s %8s %8s %10s %10s %10s %8s\n", "what", "method", "median", "min", "max", "spread",
              "blocks/s", "median", "p99", "/memcpy");
  for (const bench::Row *row : {&r.memcpy_1thread, &r.memcpy_threads, &r.move_pages_4k, &r.move_pages_huge})
    print_row(*row, mc);
  for (const bench::Row &p : r.pairs) print_row(p, mc);
  if (r.pairs.empty()) std::printf("(one tier: no pair to migrate between)\n");
  Goals g = judge(r);
  std::printf("\ngoal, batched migration >= %.2fx memcpy (stated for 5 MiB blocks, 2 threads): ", kGoalVsMemcpy);
  if (g.vs_memcpy_known)
    std::printf("worst pair %s %.2fx, %s\n", g.worst_pair.c_str(), g.vs_memcpy, g.vs_memcpy >= kGoalVsMemcpy ? "met" : "MISSED");
  else
    std::printf("no pair\n");
  std::printf("goal, migration >= %.0fx move_pages of 4 KiB pages between the same nodes: ", kGoalVsMovePages);
  if (g.vs_move_pages_known)
    std::printf("%s (slower direction) %.2fx, %s\n", g.mp_pairs.c_str(), g.vs_move_pages,
                g.vs_move_pages >= kGoalVsMovePages ? "met" : "MISSED");
  else
    std::printf("%s\n", g.mp_reason.c_str());
  std::printf("integrity: %llu blocks checked after every pass, %llu errors\n",
              static_cast<unsigned long long>(r.integrity_checked), static_cast<unsigned long long>(r.integrity_errors));
}

void write_csv(const std::string &path, const std::vector<Point> &points) {
  std::ofstream out(path);
  if (!out) fail(CXLT_ERROR_IO, "--csv ", path, ": cannot open for writing");
  out << "block_bytes,blocks,batch,threads,row,from,to,method,measured,gbps_median,gbps_min,gbps_max,spread_pct,"
         "blocks_per_s,latency_us_median,latency_us_p99,ratio_to_memcpy,reason\n";
  auto quote = [](const std::string &s) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const Point &pt : points) {
    const bench::BenchResult &r = pt.r;
    const double mc = r.memcpy_threads.gbps();
    std::vector<const bench::Row *> rows{&r.memcpy_1thread, &r.memcpy_threads, &r.move_pages_4k, &r.move_pages_huge};
    for (const bench::Row &p : r.pairs) rows.push_back(&p);
    for (const bench::Row *row : rows) {
      out << r.block_bytes << ',' << r.blocks << ',' << r.batch << ',' << r.threads << ',' << quote(row->label) << ','
          << quote(row->from) << ',' << quote(row->to) << ',' << quote(row->method) << ',' << (row->measured ? 1 : 0);
      if (row->measured)
        out << ',' << row->gbps() << ',' << row->gbps_min() << ',' << row->gbps_max() << ',' << row->spread_pct() << ','
            << row->blocks_per_s() << ',' << row->latency_median_us() << ',' << row->latency_p99_us() << ','
            << ratio(row->gbps(), mc) << ",\n";
      else
        out << ",,,,,,,,," << quote(row->reason) << '\n';
    }
  }
  if (!out.flush()) fail(CXLT_ERROR_IO, "--csv ", path, ": write failed");
}

// The plot script's terminal line, from the output's extension.
std::string plot_terminal(const std::string &path) {
  const bool svg = path.size() > 4 && path.compare(path.size() - 4, 4, ".svg") == 0;
  return svg ? "set terminal svg size 1000,600\n" : "set terminal png size 1000,600\n";
}

std::string row_name(const bench::Row &row) {
  std::string name = row.label.substr(0, row.label.find(" ("));
  if (row.from_rank >= 0) name += " (" + row.method + ")";  // a tier pair: its copy method
  return name;
}

// One block size: a bar per measured row (median GB/s, min-max error bars), the multithreaded
// memcpy of the same bytes as a horizontal line (the baseline the goal is set against). The data
// and the script stay beside the plot (FILE.dat, FILE.gp) so it can be redrawn.
void write_bar_plot(const std::string &path, const bench::BenchResult &r) {
  std::vector<const bench::Row *> rows{&r.memcpy_1thread, &r.move_pages_4k, &r.move_pages_huge};
  for (const bench::Row &p : r.pairs) rows.push_back(&p);
  std::vector<std::pair<std::string, std::array<double, 3>>> bars;
  for (const bench::Row *row : rows)
    if (row->measured) bars.push_back({row_name(*row), {row->gbps(), row->gbps_min(), row->gbps_max()}});
  const bool baseline = r.memcpy_threads.measured;
  if (bars.empty() && !baseline) fail(CXLT_ERROR_INVALID_ARGUMENT, "--plot: nothing was measured to plot");
  const std::string dat = path + ".dat", gp = path + ".gp";
  {
    std::ofstream d(dat);
    if (!d) fail(CXLT_ERROR_IO, "--plot: cannot write ", dat);
    d << "# bar, median GB/s, min, max (block size " << r.block_bytes << " bytes)\n";
    for (size_t i = 0; i < bars.size(); ++i)
      d << i << ' ' << bars[i].second[0] << ' ' << bars[i].second[1] << ' ' << bars[i].second[2] << "  # " << bars[i].first << '\n';
    if (baseline) d << "# baseline " << r.memcpy_threads.label << ": " << r.memcpy_threads.gbps() << " GB/s\n";
  }
  {
    // Labels only as literals, no `set output` (gnuplot.hpp).
    std::ofstream g(gp);
    if (!g) fail(CXLT_ERROR_IO, "--plot: cannot write ", gp);
    g << "# cxltier bench plot (redraw: gnuplot THIS_FILE > OUTPUT)\n" << plot_terminal(path);
    g << "$bars << EOD\n";
    for (size_t i = 0; i < bars.size(); ++i)
      g << i << ' ' << bars[i].second[0] << ' ' << bars[i].second[1] << ' ' << bars[i].second[2] << '\n';
    if (bars.empty()) g << "0 NaN NaN NaN\n";
    g << "EOD\n";
    g << "set title " << cxltier::cli::gnuplot_literal("cxltier bench: migration bandwidth of " + format_bytes(r.block_bytes) +
                                                      " blocks (higher is better)") << "\n";
    g << "set ylabel 'GB/s (10^9 bytes/s), median; bars: min-max'\nset key outside right noenhanced\n";
    g << "set grid ytics\nset yrange [0:*]\nset style fill solid 0.6 border -1\nset boxwidth 0.6\n";
    g << "set xrange [-0.5:" << (bars.empty() ? 0.5 : static_cast<double>(bars.size()) - 0.5) << "]\n";
    g << "set xtics rotate by -30 noenhanced (";
    for (size_t i = 0; i < bars.size(); ++i) g << (i ? ", " : "") << cxltier::cli::gnuplot_literal(bars[i].first) << ' ' << i;
    g << ")\n";
    g << "plot $bars using 1:2 with boxes title 'median', $bars using 1:2:3:4 with yerrorbars lc black notitle";
    if (baseline)
      g << ", " << r.memcpy_threads.gbps() << " with lines lw 2 dt 2 title "
        << cxltier::cli::gnuplot_literal("baseline: " + r.memcpy_threads.label);
    g << "\n";
    if (!g.flush()) fail(CXLT_ERROR_IO, "--plot: cannot write ", gp);
  }
  const std::string err = cxltier::cli::run_gnuplot(gp, path);
  if (!err.empty()) fail(CXLT_ERROR_IO, "--plot: ", err, "; the data is in ", dat, " and the script in ", gp);
}

// A block-size sweep: GB/s against block size, one line per method (median, min-max bars),
// through gnuplot; one block size: bars (write_bar_plot). The data and the script stay beside
// the plot (FILE.dat, FILE.gp) so it can be redrawn.
void write_plot(const std::string &path, const std::vector<Point> &points) {
  if (points.empty()) fail(CXLT_ERROR_INVALID_ARGUMENT, "--plot: nothing was measured to plot");
  bool one_size = true;
  for (const Point &pt : points) one_size = one_size && pt.block_bytes == points[0].block_bytes;
  if (one_size) return write_bar_plot(path, points[0].r);
  // Series in first-seen order; for each, (block bytes, median, min, max) at the first batch
  // and thread count of the sweep, so a series is one line.
  std::vector<std::string> names;
  std::map<std::string, std::vector<std::array<double, 4>>> series;
  for (const Point &pt : points) {
    if (pt.batch != points[0].batch || pt.threads != points[0].threads) continue;
    const bench::BenchResult &r = pt.r;
    std::vector<const bench::Row *> rows{&r.memcpy_1thread, &r.memcpy_threads, &r.move_pages_4k, &r.move_pages_huge};
    for (const bench::Row &p : r.pairs) rows.push_back(&p);
    for (const bench::Row *row : rows) {
      if (!row->measured) continue;
      const std::string name = row_name(*row);
      if (!series.count(name)) names.push_back(name);
      series[name].push_back({static_cast<double>(r.block_bytes) / 1024.0, row->gbps(), row->gbps_min(), row->gbps_max()});
    }
  }
  const std::string dat = path + ".dat", gp = path + ".gp";
  {
    std::ofstream d(dat);
    if (!d) fail(CXLT_ERROR_IO, "--plot: cannot write ", dat);
    for (const std::string &n : names) {
      d << "# " << n << "\n";
      for (const auto &v : series[n]) d << v[0] << ' ' << v[1] << ' ' << v[2] << ' ' << v[3] << '\n';
      d << "\n\n";
    }
  }
  {
    // The data inline and no `set output`: the output file and the data file's name, both the
    // user's text, never reach gnuplot (gnuplot.hpp).
    std::ofstream g(gp);
    if (!g) fail(CXLT_ERROR_IO, "--plot: cannot write ", gp);
    g << "# cxltier bench plot (redraw: gnuplot THIS_FILE > OUTPUT)\n" << plot_terminal(path);
    for (size_t i = 0; i < names.size(); ++i) {
      g << "$series" << i << " << EOD\n";
      for (const auto &v : series[names[i]]) g << v[0] << ' ' << v[1] << ' ' << v[2] << ' ' << v[3] << '\n';
      g << "EOD\n";
    }
    g << "set title 'cxltier bench: migration bandwidth (higher is better)'\n";
    g << "set xlabel 'block size, KiB (log scale)'\nset ylabel 'GB/s (10^9 bytes/s), median; bars: min-max'\n";
    g << "set logscale x 2\nset key outside right noenhanced\nset grid\nset yrange [0:*]\n";
    g << "plot ";
    for (size_t i = 0; i < names.size(); ++i)
      g << (i ? ", \\\n     " : "") << "$series" << i << " using 1:2:3:4 with yerrorlines title "
        << cxltier::cli::gnuplot_literal(names[i]);
    g << "\n";
    if (!g.flush()) fail(CXLT_ERROR_IO, "--plot: cannot write ", gp);
  }
  if (names.empty()) fail(CXLT_ERROR_INVALID_ARGUMENT, "--plot: nothing was measured to plot");
  const std::string err = cxltier::cli::run_gnuplot(gp, path);
  if (!err.empty()) fail(CXLT_ERROR_IO, "--plot: ", err, "; the data is in ", dat, " and the script in ", gp);
}

int run(const BenchOptions &o) {
  // Sweeps: lists in --block-bytes/--batch/--threads, or --sweep with the default ranges.
  std::vector<uint64_t> sizes{0}, batches{0}, threads{0};
  for (const std::string &w : o.sweep) {
    if (w == "block-bytes") {
      if (o.block_bytes.empty()) sizes = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    } else if (w == "batch") {
      if (o.batch.empty()) batches = {1, 2, 4, 8, 16, 32};
    } else if (w == "threads") {
      if (o.threads.empty()) {
        threads.clear();
        const size_t ncpu = bench::allowed_cpus().size();
        for (size_t t = 1; t <= ncpu; t *= 2) threads.push_back(t);
        if (threads.back() != ncpu) threads.push_back(ncpu);
      }
    } else {
      fail(CXLT_ERROR_INVALID_ARGUMENT, "--sweep ", w, ": not block-bytes, batch or threads");
    }
  }
  if (!o.block_bytes.empty()) {
    sizes = parse_size_list(o.block_bytes, "--block-bytes");
    for (uint64_t sz : sizes)  // 0 would mean the default: a value typed is never that
      if (sz == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "--block-bytes 0: a block is 4 KiB .. 1 GiB");
  }
  if (!o.batch.empty()) batches = parse_counts(o.batch, "--batch", 1u << 20);
  if (!o.threads.empty()) threads = parse_counts(o.threads, "--threads", 1024);
  for (uint64_t s : sizes)
    if (s != 0 && (s < 4096 || s > (uint64_t{1} << 30)))
      fail(CXLT_ERROR_INVALID_ARGUMENT, "--block-bytes ", format_bytes(s), " is outside 4 KiB .. 1 GiB");
  if (o.runs < 5) fail(CXLT_ERROR_INVALID_ARGUMENT, "--runs ", o.runs, ": at least 5 measured runs are needed");
  if (!o.config.empty() && access(o.config.c_str(), R_OK) != 0)
    fail(CXLT_ERROR_IO, "--config ", o.config, ": cannot read it");

  const size_t total = sizes.size() * batches.size() * threads.size();
  const bool tty = isatty(2);
  std::vector<Point> points;
  for (uint64_t s : sizes)
    for (uint64_t b : batches)
      for (uint64_t t : threads) {
        bench::BenchParams p;
        p.config_path = o.config;
        p.topology = o.topology;
        p.block_bytes = s;
        p.blocks = o.blocks;
        p.batch = static_cast<uint32_t>(b);
        p.threads = static_cast<unsigned>(t);
        p.runs = o.runs;
        p.warmup = o.warmup;
        p.pin = o.pin;
        std::string where = total > 1 ? "point " + std::to_string(points.size() + 1) + "/" + std::to_string(total) + ": " : "";
        // On a terminal the line is rewritten in place; elsewhere (a log) one line per run.
        if (!o.quiet)
          p.progress = [where, tty, last = std::string()](const std::string &line) mutable {
            const std::string head = line.substr(0, line.find(':'));
            if (!tty && head == last) return;
            last = head;
            std::fprintf(stderr, tty ? "\r\033[Kcxltier bench: %s%s" : "cxltier bench: %s%s\n", where.c_str(),
                         (tty ? line : head).c_str());
            std::fflush(stderr);
          };
        Point pt;
        pt.r = bench::run_bench(p);
        pt.block_bytes = pt.r.block_bytes;
        pt.batch = static_cast<uint32_t>(b);
        pt.threads = static_cast<unsigned>(t);
        points.push_back(std::move(pt));
      }
  if (!o.quiet && tty) std::fprintf(stderr, "\r\033[K");

  uint64_t integrity_errors = 0;
  for (const Point &pt : points) integrity_errors += pt.r.integrity_errors;
  if (o.json) {
    ordered_json j;
    j["machine"] = machine_json(points[0].r);
    const ordered_json first = point_json(points[0]);
    for (auto &[k, v] : first.items()) j[k] = v;
    if (points.size() > 1) {
      ordered_json sweep = ordered_json::array();
      for (const Point &pt : points) sweep.push_back(point_json(pt));
      j["sweep"] = sweep;
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    ordered_json m = machine_json(points[0].r);
    std::printf("machine: %s, %s CPUs (%zu allowed), %s, NUMA nodes with memory %s, %s; %s\n",
                m["cpu_model"].get<std::string>().c_str(), m["cpus_online"].dump().c_str(), points[0].r.cpus.size(),
                format_bytes(m["memory_bytes"].get<uint64_t>()).c_str(), m["numa_nodes"].dump().c_str(),
                m["kernel"].get<std::string>().c_str(), m["date_utc"].get<std::string>().c_str());
    for (const Point &pt : points) print_point(pt);
    std::printf("\n(GB/s: 10^9 bytes per second of wall time, each byte counted once, higher is better; latency: "
                "microseconds per block, lower is better; /memcpy: ratio to the multithreaded memcpy of the same run, "
                "higher is better; spread: (max - min) / median over the runs; migration latency: one block moved "
                "alone, waiting for it)\n");
  }
  if (!o.csv.empty()) write_csv(o.csv, points);
  if (!o.plot.empty()) write_plot(o.plot, points);
  std::fflush(stdout);
  return integrity_errors == 0 ? cli::kExitOk : cli::kExitCheckFailed;
}

}  // namespace

static cxltier::cli::Registrar reg(40, [](CLI::App &app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App *sub = app.add_subcommand(
      "bench", "Migration bandwidth against this machine's memcpy and the kernel's move_pages, for every tier pair");
  sub->add_option("--topology", o->topology, "auto, this-system, emulated or an hwloc XML file (overrides the config)")
      ->check(cxltier::cli::non_empty("--topology"));
  sub->add_option("--config", o->config, "TOML configuration file (tiers, geometry, copy kernel; budgets are the bench's)")
      ->check(cxltier::cli::non_empty("--config"));
  sub->add_option("--block-bytes", o->block_bytes,
                  "block size, or a comma list to sweep (default: the geometry's, 5 MiB for the canonical model)");
  sub->add_option("--blocks", o->blocks, "blocks per pass (default: 160 MiB worth, at least 4)");
  sub->add_option("--batch", o->batch, "moves queued before waiting for them, or a list (default: all blocks)");
  sub->add_option("--threads", o->threads,
                  "threads for memcpy, move_pages and the runtime's migration, or a list (default: the CPUs allowed)");
  sub->add_option("--sweep", o->sweep, "sweep block-bytes (64 KiB..64 MiB), batch (1..32) or threads (1..CPUs)")
      ->delimiter(',');
  sub->add_option("--runs", o->runs, "measured runs (at least 5), reported as median and spread")->capture_default_str();
  sub->add_option("--warmup", o->warmup, "unmeasured runs first")->capture_default_str();
  sub->add_flag("--json", o->json, "Print JSON (schema in bench/README.md)");
  sub->add_option("--csv", o->csv, "also write one CSV row per measured thing and point to FILE");
  sub->add_option("--plot", o->plot, "also draw with gnuplot to FILE (.png or .svg): one block size as bars with the multithreaded memcpy as a line, a block-size sweep as GB/s against block size");
  sub->add_flag("--pin", o->pin,
                "Pin the memcpy and move_pages threads one per CPU (default: not pinned, like the runtime's migration "
                "threads; pinning only the baseline is unfair on a loaded machine)");
  sub->add_flag("--quiet", o->quiet, "No progress line on stderr");
  return [o]() { return run(*o); };
});
