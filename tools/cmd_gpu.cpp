// SPDX-License-Identifier: Apache-2.0
// `cxltier gpu [--bench] [--json] ...`: the CUDA GPUs the driver reports (or why there are none:
// no driver, a build without the CUDA tier), and with --bench the GPU rows of the migration
// benchmark: H2D, D2H, D2D and both directions for 5 MiB blocks through the cuda backends, each
// as a ratio to plain cuMemcpyAsync of the same bytes from pinned memory in the same run, plus
// the per-layer gather/scatter rows (batched memcpy against the kernel). tools/gpu_bench.hpp
// does the measuring; `cxltier bench` is meant to call the same function when GPUs exist.
#include "commands.hpp"
#include "lib/topology/gpu.hpp"
#include "gpu_bench.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <string>

namespace {

struct GpuOptions {
  bool bench = false;
  bool json = false;
  std::string block_bytes = "5MiB";
  uint32_t blocks = 32;
  unsigned threads = 2;
  unsigned runs = 5;
  int device = -1;
  uint32_t layers = 80;
};

std::string devices_text(const cxltier::GpuDiscovery &d) {
  if (!d.available) return cxltier::gpu_tiers_remark(d) + "\n";
  std::string s = cxltier::gpu_tiers_remark(d) + "\n";
  for (const cxltier::GpuDevice &g : d.devices) {
    char cc[16];
    std::snprintf(cc, sizeof cc, "%d.%d", g.cc_major, g.cc_minor);
    s += "  gpu " + std::to_string(g.ordinal) + ": " + g.name + ", " + cxltier::format_bytes(g.total_bytes) +
         ", compute capability " + cc + ", " + std::to_string(g.async_engines) + " copy engines, PCI " + g.pci_bus_id +
         ", " + g.numa_evidence + "\n";
  }
  return s;
}

std::string devices_json(const cxltier::GpuDiscovery &d) {
  nlohmann::ordered_json j;
  j["available"] = d.available;
  j["why"] = d.why;
  j["driver"] = d.driver_path;
  j["driver_version"] = d.driver_version;
  j["cuda_tier_built"] = cxltier::cuda_tier_built();
  nlohmann::ordered_json devs = nlohmann::ordered_json::array();
  for (const cxltier::GpuDevice &g : d.devices) {
    nlohmann::ordered_json x;
    x["device"] = g.ordinal;
    x["name"] = g.name;
    x["pci_bus_id"] = g.pci_bus_id;
    x["total_bytes"] = g.total_bytes;
    x["numa_node"] = g.numa_node;
    x["numa_evidence"] = g.numa_evidence;
    x["compute_capability"] = std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor);
    x["copy_engines"] = g.async_engines;
    devs.push_back(std::move(x));
  }
  j["devices"] = std::move(devs);
  return j.dump(2);
}

}  // namespace

static cxltier::cli::Registrar reg(15, [](CLI::App &app) {
  auto o = std::make_shared<GpuOptions>();
  CLI::App *sub = app.add_subcommand("gpu", "Show the CUDA GPUs (the gpu tiers) and, with --bench, measure their copies");
  sub->add_flag("--bench", o->bench,
                "Measure H2D, D2H, D2D and bidirectional GB/s through the cuda backends against plain cuMemcpyAsync");
  sub->add_flag("--json", o->json, "Print JSON instead of text");
  sub->add_option("--block-bytes", o->block_bytes, "Block size (--bench)")->capture_default_str();
  sub->add_option("--blocks", o->blocks, "Blocks per pass (--bench)")->capture_default_str();
  sub->add_option("--threads", o->threads, "Copying threads per direction (--bench)")->capture_default_str();
  sub->add_option("--runs", o->runs, "Measured runs, after one warm-up (--bench)")->capture_default_str();
  sub->add_option("--device", o->device, "One CUDA device (default: each)");
  sub->add_option("--layers", o->layers, "Layers of the per-layer gather/scatter rows (--bench)")->capture_default_str();
  return [o]() -> int {
    const cxltier::GpuDiscovery &d = cxltier::gpu_discovery();
    std::string out;
    if (!o->bench) {
      out = o->json ? devices_json(d) + "\n" : devices_text(d);
    } else {
      cxltier::gpu_bench::Params p;
      p.block_bytes = cxltier::parse_size(o->block_bytes, "--block-bytes");
      p.blocks = o->blocks;
      p.threads = o->threads;
      p.runs = o->runs;
      p.device = o->device;
      p.layers = o->layers;
      if (!o->json) p.progress = [](const std::string &s) { std::fprintf(stderr, "cxltier gpu --bench: %s\n", s.c_str()); };
      cxltier::gpu_bench::Result r = cxltier::gpu_bench::run(p);
      out = o->json ? cxltier::gpu_bench::to_json(r) + "\n" : cxltier::gpu_bench::to_table(r);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return cxltier::cli::kExitOk;  // main() checks that stdout was written
  };
});
