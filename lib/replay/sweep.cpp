// SPDX-License-Identifier: Apache-2.0
// The parameter sweep: the LRFU alpha x beta grid, every baseline and the OPT bound at each
// capacity, persistence on and off, run in parallel (one runtime and one trace reader per run,
// one shared OPT next-use table), then checked: no policy may beat OPT.
#include <cxltier/error.hpp>
#include <cxltier/tools/replay.hpp>

#include "lib/core/text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace cxltier::replay {

namespace {

struct Job {
  PolicyChoice policy;
  double alpha;
  double beta;
  uint64_t capacity;
};

bool same_job(const Job &a, const Job &b) {
  auto eq = [](double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; };
  return a.policy.kind == b.policy.kind && a.policy.persist == b.policy.persist && eq(a.alpha, b.alpha) &&
         eq(a.beta, b.beta) && a.capacity == b.capacity;
}

std::string num(double v) {
  return std::isnan(v) ? "" : text::shortest(v);
}

}  // namespace

std::vector<std::string> opt_violations(const std::vector<SweepRow> &rows) {
  std::map<uint64_t, uint64_t> opt;
  for (const SweepRow &r : rows)
    if (r.policy.kind == PolicyKind::opt) opt[r.capacity_blocks] = r.hits;
  std::vector<std::string> out;
  for (const SweepRow &r : rows) {
    if (r.policy.kind == PolicyKind::opt) continue;
    auto it = opt.find(r.capacity_blocks);
    if (it == opt.end() || r.hits <= it->second) continue;
    std::ostringstream m;
    m << policy_label(r.policy);
    if (r.policy.kind == PolicyKind::lrfu) m << " (alpha " << num(r.alpha) << ", beta " << num(r.beta) << ")";
    m << " at " << r.capacity_blocks << " blocks: " << r.hits << " hits > opt's " << it->second
      << " on the same stream (a bug: no policy beats Belady)";
    out.push_back(m.str());
  }
  return out;
}

SweepResult sweep(const SweepOptions &o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.capacities.empty() && o.capacity_fractions.empty())
    fail(CXLT_ERROR_INVALID_ARGUMENT, "sweep: no capacity (give --capacity-blocks LIST or --capacity-fraction LIST)");
  if (o.block_bytes == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "sweep: --block-bytes is 0");
  bool lrfu = false;
  for (const PolicyChoice &p : o.policies) lrfu = lrfu || p.kind == PolicyKind::lrfu;
  if (lrfu) {
    if (o.alphas.empty()) fail(CXLT_ERROR_INVALID_ARGUMENT, "sweep: --alpha is an empty list");
    if (o.betas.empty()) fail(CXLT_ERROR_INVALID_ARGUMENT, "sweep: --beta is an empty list");
    for (double a : o.alphas)
      for (double b : o.betas) {
        LrfuParams p;
        p.alpha = a;
        p.beta = b;
        p.mode = o.mode;
        p.validate();
      }
  }
  for (double f : o.capacity_fractions)
    if (!(f > 0.0 && f <= 1.0))
      fail(CXLT_ERROR_INVALID_ARGUMENT, "sweep: --capacity-fraction ", f, " is outside (0, 1]");
  for (uint64_t c : o.capacities)
    if (c == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "sweep: --capacity-blocks 0 holds nothing");

  // One pass for OPT's next uses and the trace's size; every run shares it read-only.
  const Prepass pp = prepass(o.trace, o.reader, true);
  SweepResult res;
  res.trace = o.trace;
  res.format = pp.format;
  res.block_size_tokens = pp.block_size_tokens;
  res.block_bytes = o.block_bytes;
  res.mode = o.mode;
  res.requests = pp.requests;
  res.references = pp.references;
  res.unique_blocks = pp.unique_blocks;
  res.trace_attention = pp.trace_attention;
  res.malformed_lines = pp.malformed_lines;
  res.capacities = o.capacities;
  for (double f : o.capacity_fractions)
    res.capacities.push_back(std::max<uint64_t>(1, static_cast<uint64_t>(std::floor(f * static_cast<double>(pp.unique_blocks)))));
  std::sort(res.capacities.begin(), res.capacities.end());
  res.capacities.erase(std::unique(res.capacities.begin(), res.capacities.end()), res.capacities.end());

  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Job> jobs;
  auto add = [&](const Job &j) {
    for (const Job &k : jobs)
      if (same_job(j, k)) return;
    jobs.push_back(j);
  };
  for (uint64_t cap : res.capacities) {
    for (const PolicyChoice &p : o.policies) {
      if (p.kind == PolicyKind::opt) continue;
      std::vector<bool> persist{p.persist};
      if (persist_matters(p.kind) && !o.persist.empty()) persist = o.persist;
      for (bool keep : persist) {
        PolicyChoice c{p.kind, persist_matters(p.kind) ? keep : true};
        if (p.kind == PolicyKind::lrfu) {
          for (double a : o.alphas)
            for (double b : o.betas) add(Job{c, a, b, cap});
        } else {
          add(Job{c, nan, nan, cap});
        }
      }
    }
    add(Job{PolicyChoice{PolicyKind::opt, true}, nan, nan, cap});
  }

  unsigned workers = o.jobs ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  workers = static_cast<unsigned>(std::min<size_t>(workers, jobs.size()));
  res.jobs = workers;
  res.rows.resize(jobs.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mu;  // guards done, error and the progress callback
  size_t done = 0;
  std::exception_ptr error;
  auto work = [&] {
    while (!stop.load(std::memory_order_relaxed)) {
      size_t i = next.fetch_add(1);
      if (i >= jobs.size()) return;
      const Job &j = jobs[i];
      try {
        Options ro;
        ro.trace = o.trace;
        ro.reader = o.reader;
        ro.policy = j.policy;
        if (j.policy.kind == PolicyKind::lrfu) {
          ro.lrfu.alpha = j.alpha;
          ro.lrfu.beta = j.beta;
          ro.lrfu.mode = o.mode;
        }
        ro.index_buckets = o.index_buckets;
        ro.block_bytes = o.block_bytes;
        ro.capacity_blocks = j.capacity;
        ro.next_use = &pp;
        Result r = run(ro);
        SweepRow &row = res.rows[i];
        row.policy = j.policy;
        row.alpha = j.alpha;
        row.beta = j.beta;
        row.capacity_blocks = j.capacity;
        row.hits = r.hits;
        row.hit_rate = r.hit_rate;
        row.readmissions_restored = r.readmissions_restored;
        row.seconds = r.seconds;
        std::lock_guard lk(mu);
        ++done;
        if (o.progress) o.progress(done, jobs.size());
      } catch (...) {
        std::lock_guard lk(mu);
        if (!error) error = std::current_exception();
        stop = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (std::thread &t : threads) t.join();
  if (error) std::rethrow_exception(error);
  res.violations = opt_violations(res.rows);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::string sweep_json(const SweepResult &r, int indent) {
  using nlohmann::json;
  auto maybe = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
  json runs = json::array();
  // Per capacity: OPT's hits and each policy label's best row.
  std::map<uint64_t, json> per_cap;
  std::map<std::pair<uint64_t, std::string>, const SweepRow *> best;
  for (const SweepRow &row : r.rows) {
    runs.push_back({{"policy", policy_label(row.policy)},
                    {"persist", row.policy.persist},
                    {"alpha", maybe(row.alpha)},
                    {"beta", maybe(row.beta)},
                    {"capacity_blocks", row.capacity_blocks},
                    {"hits", row.hits},
                    {"hit_rate", row.hit_rate},
                    {"readmissions_restored", row.readmissions_restored},
                    {"seconds", row.seconds}});
    auto key = std::make_pair(row.capacity_blocks, policy_label(row.policy));
    auto it = best.find(key);
    if (it == best.end() || row.hits > it->second->hits) best[key] = &row;
  }
  for (uint64_t c : r.capacities) per_cap[c] = {{"capacity_blocks", c}, {"best", json::object()}};
  for (const auto &[key, row] : best) {
    json b = {{"hits", row->hits}, {"hit_rate", row->hit_rate}};
    if (row->policy.kind == PolicyKind::lrfu) {
      b["alpha"] = row->alpha;
      b["beta"] = row->beta;
    }
    per_cap[key.first]["best"][key.second] = b;
  }
  json caps = json::array();
  for (auto &[c, j] : per_cap) caps.push_back(j);
  json j;
  j["trace"] = r.trace;
  j["format"] = trace::format_name(r.format);
  j["block_size_tokens"] = r.block_size_tokens;
  j["block_bytes"] = r.block_bytes;
  j["score_mode"] = score_mode_name(r.mode);
  j["requests"] = r.requests;
  j["references"] = r.references;
  j["unique_blocks"] = r.unique_blocks;
  j["attention_source"] = r.trace_attention ? "trace" : "constant-1.0";
  j["malformed_lines"] = r.malformed_lines;
  j["capacities"] = r.capacities;
  j["by_capacity"] = caps;
  j["runs"] = runs;
  j["violations"] = r.violations;
  j["jobs"] = r.jobs;
  j["seconds"] = r.seconds;
  return j.dump(indent);
}

std::string sweep_csv(const SweepResult &r) {
  std::ostringstream o;
  o << "trace,attention_source,capacity_blocks,policy,persist,alpha,beta,hits,references,hit_rate\n";
  std::string trace = r.trace;
  if (trace.find_first_of(",\"\n") != std::string::npos) {
    std::string q = "\"";
    for (char c : trace) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    trace = q + "\"";
  }
  char rate[32];
  for (const SweepRow &row : r.rows) {
    std::snprintf(rate, sizeof rate, "%.6f", row.hit_rate);
    o << trace << ',' << (r.trace_attention ? "trace" : "constant-1.0") << ',' << row.capacity_blocks << ','
      << policy_label(row.policy) << ',' << (row.policy.persist ? "on" : "off") << ',' << num(row.alpha) << ','
      << num(row.beta) << ',' << row.hits << ',' << r.references << ',' << rate << '\n';
  }
  return o.str();
}

}  // namespace cxltier::replay
