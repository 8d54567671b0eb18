// SPDX-License-Identifier: Apache-2.0
// The GPU tier where no GPU is needed: what the library answers without a driver (or in a build
// without the CUDA tier), the driver loader's failure paths on real libraries (a missing file,
// libm, the toolkit's stub libcuda.so), argument checks, the sysfs NUMA lookup on a real
// directory tree, GPU tiers placed in a topology, the per-layer copy plans run on host memory,
// the chunked-registration planner and its threaded executor, the PyTorch allocator's range
// carving and its library's exports. Runs in every build, on every machine.
#include "lib/memory/backend.hpp"
#include "lib/topology/gpu.hpp"
#include "tools/gpu_bench.hpp"
#include "tiers/cuda/host_register.hpp"
#include "tiers/cuda/kv_layout.hpp"
#include "tiers/cuda/range_alloc.hpp"
#include "lib/memory/tier_ops.hpp"

#if CXLT_HAVE_CUDA_BUILD
#include "tiers/cuda/driver.hpp"
#include "tiers/cuda/kv_kernels.hpp"
#endif

#include <cxltier/config.hpp>
#include <cxltier/cxltier.h>
#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>
#include <cxltier/topology.hpp>
#include <cxltier/tools/topology_text.hpp>

#include "cxlt_config.h"
#include "../common/temp_dir.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <numa.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace cxltier;
namespace fs = std::filesystem;

using cxlt_test::TempDir;

namespace {

bool contains(const std::string &s, const std::string &what) { return s.find(what) != std::string::npos; }

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

void write_file(const fs::path &p, const std::string &text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

// --- Discovery without a GPU ------------------------------------------------------------------

TEST(GpuDiscovery, NotAvailableSaysWhy) {
  const GpuDiscovery &d = gpu_discovery();
  if (d.available) GTEST_SKIP() << "this machine has a CUDA GPU (" << d.devices.size() << " device(s))";
  EXPECT_TRUE(d.devices.empty());
  EXPECT_EQ(d.why.rfind("not available: ", 0), 0u) << d.why;
#if CXLT_HAVE_CUDA_BUILD
  EXPECT_TRUE(cuda_tier_built());
  // No driver here: the loader names the library it tried (or the override).
  const char *env = std::getenv("CXLT_CUDA_DRIVER");
  EXPECT_TRUE(contains(d.why, env && *env ? env : "libcuda.so.1")) << d.why;
#else
  EXPECT_FALSE(cuda_tier_built());
  EXPECT_TRUE(contains(d.why, "no CUDA tier")) << d.why;
#endif
}

TEST(GpuDiscovery, PciBusIdsAreNormalised) {
  EXPECT_EQ(normalize_pci_bus_id("0000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(normalize_pci_bus_id("3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(normalize_pci_bus_id("00000000:3B:00.0"), "0000:3b:00.0");  // 8-digit domains from some drivers
  EXPECT_EQ(normalize_pci_bus_id("0001:C1:00.0\n"), "0001:c1:00.0");
}

TEST(GpuDiscovery, NumaNodeFromSysfsTree) {
  TempDir t;
  const std::string root = t.path().string();
  write_file(t.path() / "bus/pci/devices/0000:3b:00.0/numa_node", "1\n");
  write_file(t.path() / "bus/pci/devices/0000:5e:00.0/numa_node", "-1\n");
  write_file(t.path() / "bus/pci/devices/0000:86:00.0/numa_node", "garbage\n");
  std::string ev;
  EXPECT_EQ(pci_numa_node(root, "0000:3B:00.0", &ev), 1);
  EXPECT_TRUE(contains(ev, "nearest NUMA node 1")) << ev;
  EXPECT_TRUE(contains(ev, "0000:3b:00.0/numa_node")) << ev;
  EXPECT_EQ(pci_numa_node(root, "5e:00.0", &ev), -1);
  EXPECT_TRUE(contains(ev, "says -1")) << ev;
  EXPECT_EQ(pci_numa_node(root, "0000:86:00.0", &ev), -1);
  EXPECT_TRUE(contains(ev, "does not hold a node number")) << ev;
  EXPECT_EQ(pci_numa_node(root, "0000:af:00.0", &ev), -1);
  EXPECT_TRUE(contains(ev, "cannot be read")) << ev;
  EXPECT_EQ(pci_numa_node(root, "0000:3b:00.0", nullptr), 1);  // evidence is optional
}

// --- GPU tiers in a topology ------------------------------------------------------------------

namespace {

GpuDiscovery two_gpus() {
  GpuDiscovery d;
  d.available = true;
  d.driver_path = "libcuda.so.1";
  d.driver_version = 12040;
  for (int i = 0; i < 2; ++i) {
    GpuDevice g;
    g.ordinal = i;
    g.name = "Test GPU " + std::to_string(i);
    g.pci_bus_id = i == 0 ? "0000:3b:00.0" : "0000:86:00.0";
    g.total_bytes = 80 * kGiB;
    g.numa_node = i;
    g.numa_evidence = "nearest NUMA node " + std::to_string(i) + " (from a test)";
    g.cc_major = 9;
    g.async_engines = i == 0 ? 2 : 1;
    d.devices.push_back(g);
  }
  return d;
}

}  // namespace

TEST(GpuTopology, GpuTiersComeFirstAndCarryEvidence) {
  Topology topo = embedded_default_topology();
  const size_t before = topo.tiers.size();
  ASSERT_GE(before, 1u);
  const TierKind first_kind = topo.tiers[0].kind;
  EXPECT_EQ(add_gpu_tiers(topo, two_gpus()), 2u);
  ASSERT_EQ(topo.tiers.size(), before + 2);
  for (size_t i = 0; i < topo.tiers.size(); ++i) EXPECT_EQ(topo.tiers[i].rank, static_cast<int>(i));
  for (int i = 0; i < 2; ++i) {
    const TierDesc &t = topo.tiers[static_cast<size_t>(i)];
    EXPECT_EQ(t.kind, TierKind::gpu);
    EXPECT_EQ(t.cuda_device, i);
    EXPECT_TRUE(t.numa_nodes.empty());
    EXPECT_EQ(t.capacity_bytes, 80 * kGiB);
    std::string all;
    for (const std::string &e : t.evidence) all += e + "\n";
    EXPECT_TRUE(contains(all, "Test GPU " + std::to_string(i))) << all;
    EXPECT_TRUE(contains(all, "PCI 0000:")) << all;
    EXPECT_TRUE(contains(all, "nearest NUMA node " + std::to_string(i))) << all;
    EXPECT_TRUE(contains(all, "driver API 12.4")) << all;
  }
  EXPECT_TRUE(contains(topo.tiers[1].evidence.back(), "ranked first"));
  bool one_engine_noted = false;  // device 1 has one copy engine: its directions do not overlap
  for (const std::string &e : topo.tiers[1].evidence) one_engine_noted |= contains(e, "fewer than 2 copy engines");
  EXPECT_TRUE(one_engine_noted);
  EXPECT_EQ(topo.tiers[2].kind, first_kind);
  EXPECT_EQ(topo.tiers[2].cuda_device, -1);
  EXPECT_TRUE(contains(topo.note, "GPU tiers: 2 CUDA devices")) << topo.note;
  // The table and the JSON show them like any tier.
  EXPECT_TRUE(contains(topology_to_table(topo), "gpu")) << topology_to_table(topo);
  nlohmann::json j = nlohmann::json::parse(topology_to_json(topo));
  EXPECT_EQ(j["tiers"][0]["kind"], "gpu");
  EXPECT_EQ(j["tiers"][0]["capacity_bytes"], 80 * kGiB);
}

TEST(GpuTopology, WithoutGpusTheTiersStayAndTheNoteSaysWhy) {
  Topology topo = embedded_default_topology();
  const std::string before = topology_to_json(topo);
  GpuDiscovery none;
  none.why = "not available: the CUDA driver could not be loaded: test";
  EXPECT_EQ(add_gpu_tiers(topo, none), 0u);
  nlohmann::json a = nlohmann::json::parse(before), b = nlohmann::json::parse(topology_to_json(topo));
  EXPECT_EQ(a["tiers"], b["tiers"]);
  EXPECT_TRUE(contains(topo.note, "No GPU tier: not available: the CUDA driver could not be loaded: test")) << topo.note;
}

TEST(GpuTopology, ThisMachineWithoutADriverHasNoCudaTier) {
  if (gpu_discovery().available) GTEST_SKIP() << "this machine has a CUDA GPU";
  Topology t = discover_this_system();
  for (const TierDesc &d : t.tiers) EXPECT_EQ(d.cuda_device, -1);
  EXPECT_TRUE(contains(t.note, "No GPU tier: not available")) << t.note;
  // The auto choice says it too, whichever topology it picks.
  EXPECT_TRUE(contains(discover_topology("auto").note, "No GPU tier")) << discover_topology("auto").note;
  // An XML topology is another machine: its note never mentions this machine's GPUs.
  EXPECT_FALSE(contains(embedded_default_topology().note, "GPU tier"));
}

// --- The C ABI ----------------------------------------------------------------------------------

TEST(GpuCApi, ArgumentsAreCheckedFirst) {
  EXPECT_EQ(cxlt_gpu_count(nullptr), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(cxlt_last_error(), "out is NULL")) << cxlt_last_error();
  EXPECT_EQ(cxlt_gpu_info(0, nullptr), CXLT_ERROR_INVALID_ARGUMENT);
}

TEST(GpuCApi, NotSupportedWithoutAGpu) {
  if (gpu_discovery().available) GTEST_SKIP() << "this machine has a CUDA GPU";
  int n = 12345;
  EXPECT_EQ(cxlt_gpu_count(&n), CXLT_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(n, 12345);  // outputs are written only on success
  EXPECT_TRUE(contains(cxlt_last_error(), "not available")) << cxlt_last_error();
  cxlt_gpu_info_t info;
  std::memset(&info, 0x5a, sizeof info);
  EXPECT_EQ(cxlt_gpu_info(0, &info), CXLT_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(info.device, 0x5a5a5a5a);
}

TEST(GpuCApi, DeviceOutOfRangeWithAGpu) {
  if (!gpu_discovery().available) GTEST_SKIP() << gpu_discovery().why;
  cxlt_gpu_info_t info{};
  EXPECT_EQ(cxlt_gpu_info(-1, &info), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cxlt_gpu_info(1 << 20, &info), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(cxlt_last_error(), "does not exist")) << cxlt_last_error();
}

// --- Backends and the runtime without a GPU ----------------------------------------------------

TEST(GpuBackends, CudaAndCudaHostRefuseWithTheReason) {
  if (gpu_discovery().available) GTEST_SKIP() << "this machine has a CUDA GPU";
  TierBackendParams p;
  p.tier_name = "gpu";
  p.kind = TierKind::gpu;
  p.block_bytes = kMiB;
  p.budget_bytes = 16 * kMiB;
  for (const char *name : {"cuda", "cuda-host"}) {
    TierBackendParams q = p;
    q.set_option(CXLT_OPTION_INNER_BACKEND, "emulated");
    try {
      TierBackend b(name, q);
      FAIL() << name << " opened without a GPU";
    } catch (const Error &e) {
      EXPECT_EQ(e.code(), CXLT_ERROR_NOT_SUPPORTED) << e.what();
#if CXLT_HAVE_CUDA_BUILD
      EXPECT_TRUE(contains(e.what(), "not available")) << e.what();
#else
      EXPECT_TRUE(contains(e.what(), "not in this build")) << e.what();
#endif
    }
  }
}

TEST(GpuRuntime, ConfigurationsNeedingAGpuFailNamingTheTier) {
  if (gpu_discovery().available) GTEST_SKIP() << "this machine has a CUDA GPU";
  RuntimeConfig cfg;
  cfg.topology = "emulated";
  cfg.huge_pages = HugePages::none;
  TierConfig gpu;
  gpu.kind = TierKind::gpu;
  gpu.budget_bytes = 64 * kMiB;
  cfg.tiers = {gpu};
  try {
    Runtime::open(cfg);
    FAIL() << "a gpu tier opened on the emulated topology";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_CONFIG);
    EXPECT_TRUE(contains(e.what(), "tiers.0.kind = gpu")) << e.what();
  }
  // backend = cuda on a host tier: the backend's own reason, as a configuration error.
  TierConfig dram;
  dram.kind = TierKind::hbm;
  dram.budget_bytes = 64 * kMiB;
  dram.backend = "cuda";
  cfg.tiers = {dram};
  try {
    Runtime::open(cfg);
    FAIL() << "backend cuda opened without a GPU";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_CONFIG);
    EXPECT_TRUE(contains(e.what(), "tiers.0")) << e.what();
    EXPECT_TRUE(contains(e.what(), "cuda")) << e.what();
  }
  // A per-layer layout is the cuda backend's alone.
  dram.backend = "emulated";
  dram.layout = "per-layer";
  cfg.tiers = {dram};
  try {
    Runtime::open(cfg);
    FAIL() << "layout per-layer accepted on the emulated backend";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_CONFIG);
    EXPECT_TRUE(contains(e.what(), "tiers.0.layout = per-layer")) << e.what();
  }
}

TEST(GpuRuntime, LayoutKeyIsParsedAndChecked) {
  RuntimeConfig cfg;
  cfg.set("tiers.0.layout", "per-layer");
  ASSERT_EQ(cfg.tiers.size(), 1u);
  EXPECT_EQ(cfg.tiers[0].layout, "per-layer");
  EXPECT_TRUE(contains(cfg.to_toml(), "layout = \"per-layer\"")) << cfg.to_toml();
  try {
    cfg.set("tiers.0.layout", "by-layer");
    FAIL() << "an unknown layout was accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_CONFIG);
    EXPECT_TRUE(contains(e.what(), "contiguous, per-layer")) << e.what();
  }
  cfg.set("tiers.0.backend", "cuda");  // a known backend name in every build
  EXPECT_EQ(cfg.tiers[0].backend, "cuda");
}

// --- Per-layer layouts ----------------------------------------------------------------------------

TEST(KvLayout, SplitsBlocksIntoEqualSegments) {
  cuda::KvLayout l = cuda::kv_layout_for_block(5242880, 160);  // the canonical model: 80 layers x K, V
  EXPECT_EQ(l.segments(), 160u);
  EXPECT_EQ(l.extent_bytes, 32768u);
  EXPECT_EQ(l.block_bytes(), 5242880u);
  EXPECT_EQ(l.arena_offset(10, 3, 2), (2u * 10 + 3) * 32768u);
  EXPECT_TRUE(contains(l.describe(), "160 segments")) << l.describe();
  for (auto [bytes, segs] : {std::pair<uint64_t, uint32_t>{5242880, 0}, {1000, 3}, {0, 2}}) {
    try {
      cuda::kv_layout_for_block(bytes, segs);
      FAIL() << bytes << " / " << segs;
    } catch (const Error &e) {
      EXPECT_EQ(e.code(), CXLT_ERROR_INVALID_ARGUMENT);
    }
  }
}

namespace {
// Run a plan on host memory, as the GPU runs it with one cuMemcpyAsync per segment.
void run_plan(const std::vector<cuda::CopySeg> &segs) {
  for (const cuda::CopySeg &c : segs)
    std::memcpy(reinterpret_cast<void *>(c.dst), reinterpret_cast<const void *>(c.src), c.bytes);
}
uint64_t addr(const void *p) { return reinterpret_cast<uintptr_t>(p); }
}  // namespace

TEST(KvLayout, GatherAndScatterMoveEverySegmentToItsPlace) {
  const uint32_t layers = 3, segments = 2 * layers, slots = 4;
  const uint64_t E = 64;
  const cuda::KvLayout L = cuda::kv_layout_for_block(segments * E, segments);
  // Arena bytes encode (segment, slot, offset) so a misplaced byte is seen.
  std::vector<unsigned char> arena(slots * L.block_bytes()), block(L.block_bytes()), arena2(arena.size(), 0);
  for (uint32_t i = 0; i < segments; ++i)
    for (uint32_t s = 0; s < slots; ++s)
      for (uint64_t o = 0; o < E; ++o) arena[L.arena_offset(slots, s, i) + o] = static_cast<unsigned char>(i * 37 + s * 11 + o);

  auto g = cuda::plan_gather(L, addr(arena.data()), slots, 2, addr(block.data()));
  EXPECT_EQ(g.size(), segments);  // no two segments of one slot are adjacent in an arena of 4
  uint64_t total = 0;
  for (const auto &c : g) total += c.bytes;
  EXPECT_EQ(total, L.block_bytes());
  run_plan(g);
  for (uint32_t i = 0; i < segments; ++i)
    for (uint64_t o = 0; o < E; ++o)
      ASSERT_EQ(block[L.block_offset(i) + o], static_cast<unsigned char>(i * 37 + 2 * 11 + o)) << "segment " << i;

  // Scatter that block into slot 1 of another arena, then arena to arena into slot 3, then
  // gather it back: the same bytes, and nothing else written.
  run_plan(cuda::plan_scatter(L, addr(block.data()), addr(arena2.data()), slots, 1));
  run_plan(cuda::plan_arena_to_arena(L, addr(arena2.data()), slots, 3, addr(arena2.data()), slots, 1));
  std::vector<unsigned char> back(L.block_bytes(), 0);
  run_plan(cuda::plan_gather(L, addr(arena2.data()), slots, 3, addr(back.data())));
  EXPECT_EQ(back, block);
  size_t nonzero = static_cast<size_t>(std::count_if(arena2.begin(), arena2.end(), [](unsigned char c) { return c != 0; }));
  size_t expect = 0;
  for (unsigned char c : block) expect += c != 0;
  EXPECT_EQ(nonzero, 2 * expect);  // slots 1 and 3 only
}

TEST(KvLayout, AnArenaOfOneBlockIsOneCopy) {
  const cuda::KvLayout L = cuda::kv_layout_for_block(160 * 1024, 160);
  std::vector<unsigned char> a(L.block_bytes()), b(L.block_bytes());
  auto g = cuda::plan_gather(L, addr(a.data()), 1, 0, addr(b.data()));
  ASSERT_EQ(g.size(), 1u);  // coalesced: with one slot the arena is the contiguous order
  EXPECT_EQ(g[0].bytes, L.block_bytes());
  std::vector<cuda::CopySeg> none;
  cuda::coalesce(none);
  EXPECT_TRUE(none.empty());
}

// --- Chunked registration ------------------------------------------------------------------------

TEST(HostRegister, AlignmentIsTheLcmOfPageAndBlock) {
  EXPECT_EQ(cuda::register_alignment(4096, 5242880), 5242880u);
  EXPECT_EQ(cuda::register_alignment(4096, 1000), 512000u);
  EXPECT_EQ(cuda::register_alignment(4096, 6144), 12288u);
  EXPECT_EQ(cuda::register_alignment(2 * kMiB, 5242880), 10 * kMiB);
  EXPECT_THROW(cuda::register_alignment(0, 4096), Error);
  EXPECT_THROW(cuda::register_alignment(4096, 0), Error);
  EXPECT_THROW(cuda::register_alignment(uint64_t{1} << 62, (uint64_t{1} << 62) - 1), Error);
}

TEST(HostRegister, PlansBoundEveryCallAndKeepBlocksWhole) {
  const uint64_t block = 5242880;
  for (uint64_t total : {200 * kGiB, 512 * kGiB, 1536 * kGiB, 64 * kGiB, 10 * block, 1 * block}) {
    auto plan = cuda::plan_register_chunks(total, cuda::kDefaultMaxChunkBytes, block);
    ASSERT_FALSE(plan.empty());
    uint64_t next = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      EXPECT_EQ(plan[i].offset, next) << "chunks are contiguous";
      EXPECT_LE(plan[i].bytes, cuda::kDefaultMaxChunkBytes) << "no call above 64 GiB";
      EXPECT_GT(plan[i].bytes, 0u);
      EXPECT_EQ(plan[i].offset % block, 0u) << "a block would straddle two registrations";
      if (i + 1 < plan.size()) {
        EXPECT_EQ(plan[i].bytes, plan[0].bytes);
      }
      next += plan[i].bytes;
    }
    EXPECT_EQ(next, total);
  }
  // 200 GiB in 5 MiB blocks: 64 GiB is 13107.2 blocks, so chunks of 13107 blocks, 4 calls.
  auto plan = cuda::plan_register_chunks(200 * kGiB, 64 * kGiB, block);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].bytes, 13107 * block);
  EXPECT_EQ(plan[3].bytes, 200 * kGiB - 3 * 13107 * block);
  // The 512 GiB case users reported failing as one call is 9 calls here.
  EXPECT_EQ(cuda::plan_register_chunks(512 * kGiB, 64 * kGiB, block).size(), 9u);
  // Bad plans are refused by name.
  EXPECT_THROW(cuda::plan_register_chunks(0, 64 * kGiB, block), Error);
  EXPECT_THROW(cuda::plan_register_chunks(kGiB, 0, block), Error);
  EXPECT_THROW(cuda::plan_register_chunks(kGiB, 64 * kGiB, 0), Error);
  try {
    cuda::plan_register_chunks(100 * kMiB, 4 * kMiB, 5 * kMiB);
    FAIL() << "chunks smaller than a block were planned";
  } catch (const Error &e) {
    EXPECT_TRUE(contains(e.what(), "cannot keep blocks whole")) << e.what();
  }
  // An extent no larger than the limit is one call, whatever the alignment.
  EXPECT_EQ(cuda::plan_register_chunks(3 * kMiB, 4 * kMiB, 5 * kMiB).size(), 1u);
}

namespace {
struct Recorder {
  std::mutex mu;
  std::multiset<std::pair<uintptr_t, size_t>> live;
  std::set<std::thread::id> threads;
  int fail_at_offset_chunk = -1;  // the chunk index (by address) that fails
  uintptr_t base = 0;
  size_t chunk = 0;
  std::atomic<int> calls{0};

  cxlt_result_t reg(void *p, size_t n, std::string *msg) {
    ++calls;
    std::lock_guard lk(mu);
    threads.insert(std::this_thread::get_id());
    if (fail_at_offset_chunk >= 0 && reinterpret_cast<uintptr_t>(p) == base + fail_at_offset_chunk * chunk) {
      *msg = "refused by the test";
      return CXLT_ERROR_BACKEND;
    }
    live.insert({reinterpret_cast<uintptr_t>(p), n});
    return CXLT_OK;
  }
  void undo(void *p, size_t n) {
    std::lock_guard lk(mu);
    auto it = live.find({reinterpret_cast<uintptr_t>(p), n});
    if (it != live.end()) live.erase(it);
  }
};
}  // namespace

TEST(HostRegister, ExecutorRegistersEachChunkOnceOnSeveralThreads) {
  std::vector<char> mem(64 * kMiB);
  auto plan = cuda::plan_register_chunks(mem.size(), 4 * kMiB, 4096);
  ASSERT_EQ(plan.size(), 16u);
  Recorder rec;
  cuda::RegisterOptions opts;
  opts.threads = 4;
  std::vector<cuda::RegisterProgress> seen;
  opts.progress = [&](const cuda::RegisterProgress &p) { seen.push_back(p); };  // serialised by the executor
  auto res = cuda::register_in_chunks(
      mem.data(), plan, opts, [&](void *p, size_t n, std::string *m) { return rec.reg(p, n, m); },
      [&](void *p, size_t n) { rec.undo(p, n); });
  EXPECT_EQ(res.result, CXLT_OK) << res.message;
  EXPECT_EQ(res.chunks_done, 16u);
  EXPECT_EQ(rec.live.size(), 16u);
  for (const auto &c : plan)
    EXPECT_EQ(rec.live.count({reinterpret_cast<uintptr_t>(mem.data()) + c.offset, c.bytes}), 1u);
  EXPECT_LE(rec.threads.size(), 4u);
  ASSERT_EQ(seen.size(), 16u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].done_chunks, i + 1);
    EXPECT_EQ(seen[i].total_bytes, mem.size());
  }
  EXPECT_EQ(seen.back().done_bytes, mem.size());
  // And undone in the same chunks (free_extent's path).
  cuda::unregister_chunks(mem.data(), plan, 3, [&](void *p, size_t n) { rec.undo(p, n); });
  EXPECT_TRUE(rec.live.empty());
}

TEST(HostRegister, AFailingChunkUndoesEveryRegisteredChunk) {
  std::vector<char> mem(32 * kMiB);
  auto plan = cuda::plan_register_chunks(mem.size(), 2 * kMiB, 4096);
  Recorder rec;
  rec.base = reinterpret_cast<uintptr_t>(mem.data());
  rec.chunk = 2 * kMiB;
  rec.fail_at_offset_chunk = 5;
  cuda::RegisterOptions opts;
  opts.threads = 1;  // deterministic: chunks 0-4 register, 5 fails, 6.. never start
  auto res = cuda::register_in_chunks(
      mem.data(), plan, opts, [&](void *p, size_t n, std::string *m) { return rec.reg(p, n, m); },
      [&](void *p, size_t n) { rec.undo(p, n); });
  EXPECT_EQ(res.result, CXLT_ERROR_BACKEND);
  EXPECT_EQ(res.chunks_done, 0u);
  EXPECT_TRUE(rec.live.empty()) << rec.live.size() << " chunks left registered";
  EXPECT_EQ(rec.calls.load(), 6);
  EXPECT_TRUE(contains(res.message, "chunk 6 of 16")) << res.message;
  EXPECT_TRUE(contains(res.message, "refused by the test")) << res.message;
  EXPECT_TRUE(contains(res.message, "have been unregistered again")) << res.message;
}

TEST(HostRegister, AnExhaustedTimeBudgetStartsNothingMore) {
  std::vector<char> mem(8 * kMiB);
  auto plan = cuda::plan_register_chunks(mem.size(), kMiB, 4096);
  Recorder rec;
  cuda::RegisterOptions opts;
  opts.time_budget_s = 0;  // spent before the first chunk
  auto res = cuda::register_in_chunks(
      mem.data(), plan, opts, [&](void *p, size_t n, std::string *m) { return rec.reg(p, n, m); },
      [&](void *p, size_t n) { rec.undo(p, n); });
  EXPECT_EQ(res.result, CXLT_ERROR_TIMEOUT);
  EXPECT_EQ(rec.calls.load(), 0);
  EXPECT_TRUE(contains(res.message, "time budget")) << res.message;
}

TEST(HostRegister, ThreadsRunOnTheGpusNode) {
  if (numa_available() < 0) GTEST_SKIP() << "no NUMA support in this kernel";
  std::vector<char> mem(4 * kMiB);
  auto plan = cuda::plan_register_chunks(mem.size(), kMiB, 4096);
  std::mutex mu;
  std::set<int> nodes_seen;
  auto on_node = [&](void *, size_t, std::string *) {
    int cpu = sched_getcpu();
    std::lock_guard lk(mu);
    nodes_seen.insert(numa_node_of_cpu(cpu));
    return CXLT_OK;
  };
  cuda::RegisterOptions opts;
  opts.threads = 2;
  opts.numa_node = 0;
  auto res = cuda::register_in_chunks(mem.data(), plan, opts, on_node, [](void *, size_t) {});
  EXPECT_EQ(res.result, CXLT_OK);
  EXPECT_FALSE(res.node_binding_failed);
  EXPECT_EQ(nodes_seen, std::set<int>{0});
  // A node that does not exist: the work still gets done, and the result says where it was not.
  opts.numa_node = 4000;
  res = cuda::register_in_chunks(mem.data(), plan, opts, [](void *, size_t, std::string *) { return CXLT_OK; },
                                 [](void *, size_t) {});
  EXPECT_EQ(res.result, CXLT_OK);
  EXPECT_TRUE(res.node_binding_failed);
}

TEST(HostRegister, RealPinningWithMlockInChunks) {
  // mlock pins pages as cuMemHostRegister does (without the IOMMU mapping): the executor's
  // real-memory path, on any machine whose memlock limit allows 16 MiB.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizers' runtimes intercept mlock and do nothing (their shadow memory would be locked
  // too): the residency check below cannot hold there.
  GTEST_SKIP() << "mlock is a no-op under AddressSanitizer and ThreadSanitizer";
#endif
  struct rlimit rl {};
  getrlimit(RLIMIT_MEMLOCK, &rl);
  if (geteuid() != 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 16 * kMiB)
    GTEST_SKIP() << "RLIMIT_MEMLOCK is " << rl.rlim_cur << " bytes and this is not root";
  const size_t bytes = 16 * kMiB;
  void *m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto plan = cuda::plan_register_chunks(bytes, 4 * kMiB, 4096);
  std::atomic<int> locked{0};
  cuda::RegisterOptions opts;
  opts.threads = 2;
  auto res = cuda::register_in_chunks(
      m, plan, opts,
      [&](void *p, size_t n, std::string *msg) {
        if (mlock(p, n) != 0) {
          *msg = std::string("mlock: ") + std::strerror(errno);
          return CXLT_ERROR_BACKEND;
        }
        ++locked;
        return CXLT_OK;
      },
      [&](void *p, size_t n) {
        munlock(p, n);
        --locked;
      });
  if (res.result != CXLT_OK && contains(res.message, "mlock")) {
    munmap(m, bytes);
    GTEST_SKIP() << "mlock refused here: " << res.message;
  }
  EXPECT_EQ(res.result, CXLT_OK) << res.message;
  EXPECT_EQ(locked.load(), 4);
  std::vector<unsigned char> vec(bytes / static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  ASSERT_EQ(mincore(m, bytes, vec.data()), 0);
  EXPECT_TRUE(std::all_of(vec.begin(), vec.end(), [](unsigned char c) { return c & 1; })) << "a locked page is not resident";
  cuda::unregister_chunks(m, plan, 2, [&](void *p, size_t n) {
    munlock(p, n);
    --locked;
  });
  EXPECT_EQ(locked.load(), 0);
  munmap(m, bytes);
}

// --- The PyTorch allocator's carving --------------------------------------------------------------

TEST(RangeAllocator, BestFitAndCoalescing) {
  cuda::RangeAllocator r(1000);
  auto a = r.allocate(100), b = r.allocate(200), c = r.allocate(300);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(*a, 0u);
  EXPECT_EQ(*b, 100u);
  EXPECT_EQ(*c, 300u);
  EXPECT_EQ(r.free_bytes(), 400u);
  EXPECT_TRUE(r.free(*b, 200));       // hole of 200 at 100
  auto d = r.allocate(150);           // best fit: the 200 hole, not the 400 tail
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, 100u);
  EXPECT_FALSE(r.free(*d, 150 + 60)); // overlaps the free 50 after it
  EXPECT_FALSE(r.free(250, 10));      // already free: a double free is refused
  EXPECT_FALSE(r.free(990, 20));      // leaves the segment
  EXPECT_FALSE(r.free(0, 0));
  EXPECT_TRUE(r.free(*a, 100));
  EXPECT_TRUE(r.free(*d, 150));
  EXPECT_TRUE(r.free(*c, 300));       // everything merges back into one range
  EXPECT_TRUE(r.all_free());
  EXPECT_EQ(r.largest_free(), 1000u);
  std::string why;
  EXPECT_TRUE(r.is_valid(&why)) << why;
  EXPECT_FALSE(r.allocate(1001));
  EXPECT_FALSE(r.allocate(0));
}

TEST(RangeAllocator, RandomisedAgainstAByteMap) {
  const uint64_t size = 1 << 16;
  cuda::RangeAllocator r(size);
  std::vector<uint8_t> used(size, 0);
  std::vector<std::pair<uint64_t, uint64_t>> live;
  std::mt19937_64 rng(7);
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      uint64_t n = 1 + rng() % 700;
      auto off = r.allocate(n);
      if (!off) {
        EXPECT_LT(r.largest_free(), n);
        continue;
      }
      for (uint64_t i = *off; i < *off + n; ++i) ASSERT_EQ(used[i], 0) << "handed out twice at " << i;
      std::fill(used.begin() + static_cast<std::ptrdiff_t>(*off), used.begin() + static_cast<std::ptrdiff_t>(*off + n), 1);
      live.push_back({*off, n});
    } else {
      size_t k = rng() % live.size();
      auto [off, n] = live[k];
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      ASSERT_TRUE(r.free(off, n));
      std::fill(used.begin() + static_cast<std::ptrdiff_t>(off), used.begin() + static_cast<std::ptrdiff_t>(off + n), 0);
    }
    if (step % 97 == 0) {
      std::string why;
      ASSERT_TRUE(r.is_valid(&why)) << why;
      ASSERT_EQ(r.free_bytes(), static_cast<uint64_t>(std::count(used.begin(), used.end(), 0)));
    }
  }
}

// --- The GPU benchmark without a GPU -----------------------------------------------------------

TEST(GpuBench, ParametersAreCheckedAndNoGpuIsReported) {
  gpu_bench::Params p;
  p.blocks = 0;
  try {
    gpu_bench::run(p);
    FAIL() << "0 blocks accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(e.what(), "blocks 0")) << e.what();
  }
  if (gpu_discovery().available) GTEST_SKIP() << "this machine has a CUDA GPU: tests/gpu/run-on-gpu.sh runs the benchmark";
  gpu_bench::Result r = gpu_bench::run(gpu_bench::Params{});
  EXPECT_FALSE(r.available);
  EXPECT_TRUE(r.rows.empty());
  EXPECT_TRUE(contains(gpu_bench::to_table(r), r.why));
  nlohmann::json j = nlohmann::json::parse(gpu_bench::to_json(r));
  EXPECT_EQ(j["available"], false);
  EXPECT_EQ(j["block_bytes"], 5242880);
}

TEST(GpuBench, RowStatistics) {
  gpu_bench::Row row;
  row.measured = true;
  row.gbps_runs = {40, 44, 42};
  row.baseline_gbps_runs = {50, 48, 52};
  EXPECT_DOUBLE_EQ(row.gbps(), 42);
  EXPECT_DOUBLE_EQ(row.baseline_gbps(), 50);
  EXPECT_DOUBLE_EQ(row.ratio(), 0.84);
  EXPECT_NEAR(row.spread_pct(), 4.0 / 42 * 100, 1e-9);
  gpu_bench::Result r;
  r.available = true;
  r.rows = {row};
  r.rows[0].what = "H2D";
  EXPECT_TRUE(contains(gpu_bench::to_table(r), "MISSED")) << gpu_bench::to_table(r);  // 0.84 < 0.90
}

// --- Builds with the CUDA tier: the driver loader and the embedded kernels ----------------------

#if CXLT_HAVE_CUDA_BUILD
TEST(CudaDriver, SymbolTableCoversEveryEntryPoint) {
  const auto &syms = cuda::driver_symbols();
  EXPECT_EQ(syms.size(), sizeof(cuda::DriverApi) / sizeof(void *));
  std::set<std::string> members;
  for (const auto &s : syms) {
    EXPECT_TRUE(members.insert(s.member).second) << "twice: " << s.member;
    ASSERT_NE(s.names[0], nullptr) << s.member;
    EXPECT_EQ(std::string(s.names[0]).rfind(s.member, 0), 0u) << s.names[0] << " for " << s.member;
  }
  for (const char *needed : {"cuMemHostRegister", "cuMemcpyHtoDAsync", "cuLaunchKernel", "cuModuleLoadData",
                             "cuEventRecord", "cuDeviceGetPCIBusId", "cuDevicePrimaryCtxRetain"})
    EXPECT_TRUE(members.count(needed)) << needed;
}

TEST(CudaDriver, AMissingLibraryIsNotAvailable) {
  cuda::DriverLoad d = cuda::load_driver("/nonexistent/dir/libcuda.so.1");
  EXPECT_FALSE(d.ok);
  EXPECT_TRUE(contains(d.why, "could not be loaded")) << d.why;
  EXPECT_TRUE(contains(d.why, "/nonexistent/dir/libcuda.so.1")) << d.why;
}

TEST(CudaDriver, ALibraryWithoutTheEntryPointsIsRefusedNamingThem) {
  cuda::DriverLoad d = cuda::load_driver("libm.so.6");  // real, loadable, and no CUDA driver
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.missing.size(), cuda::driver_symbols().size());
  EXPECT_TRUE(contains(d.why, "lacks cuInit")) << d.why;
  EXPECT_TRUE(contains(d.why, "cuMemHostRegister_v2")) << d.why;
}

TEST(CudaDriver, TheToolkitStubResolvesEverySymbolAndRefusesToInit) {
  const char *stub = std::getenv("CXLT_TEST_CUDA_STUB");
  if (stub == nullptr || !fs::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub libcuda.so to load (CXLT_TEST_CUDA_STUB)";
  cuda::DriverLoad d = cuda::load_driver(stub);
  EXPECT_FALSE(d.ok);
  EXPECT_TRUE(d.missing.empty()) << "the driver API of the toolkit lacks " << d.missing.front();
  EXPECT_EQ(d.init_result, cuda::kErrorStubLibrary);
  EXPECT_TRUE(contains(d.why, "CUDA_ERROR_STUB_LIBRARY (34)")) << d.why;
  EXPECT_TRUE(contains(d.why, "cuInit failed")) << d.why;
}

TEST(CudaDriver, ResultNamesWithoutADriver) {
  EXPECT_TRUE(contains(cuda::result_string(nullptr, 2), "CUDA_ERROR_OUT_OF_MEMORY (2)"));
  EXPECT_TRUE(contains(cuda::result_string(nullptr, 712), "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"));
  EXPECT_EQ(cuda::result_string(nullptr, 12345), "CUDA error (12345)");
  // The hint follows the code, so the "NAME (code)" form holds for the codes that carry one.
  EXPECT_EQ(cuda::result_string(nullptr, 34), "CUDA_ERROR_STUB_LIBRARY (34): the toolkit's stub libcuda.so, not a driver");
}

TEST(CudaKernels, TheFatbinIsEmbedded) {
  size_t n = 0;
  const unsigned char *f = cuda::embedded_kv_fatbin(&n);
  ASSERT_GT(n, 16u);
  uint32_t magic = 0;
  std::memcpy(&magic, f, 4);
  EXPECT_EQ(magic, 0xBA55ED50u);  // the fatbin header nvcc writes
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f) % 64, 0u);
  // Both kernels are in it by name (in the SASS and PTX symbol tables).
  std::string bytes(reinterpret_cast<const char *>(f), n);
  EXPECT_TRUE(contains(bytes, "cxlt_kv_gather"));
  EXPECT_TRUE(contains(bytes, "cxlt_kv_scatter"));
}

TEST(TorchAllocator, ExportsTheEntryPointsAndFailsCleanlyWithoutAGpu) {
  const char *root = std::getenv("CXLT_BUILD_ROOT");
  if (root == nullptr) GTEST_SKIP() << "CXLT_BUILD_ROOT is not set (run through meson test)";
  const std::string lib = std::string(root) + "/tiers/cuda/libcxltier_torch.so";
  void *h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using Malloc = void *(*)(ssize_t, int, void *);
  using Free = void (*)(void *, ssize_t, int, void *);
  using Stats = int (*)(int, uint64_t *, uint64_t *);
  auto m = reinterpret_cast<Malloc>(dlsym(h, "cxlt_torch_malloc"));
  auto f = reinterpret_cast<Free>(dlsym(h, "cxlt_torch_free"));
  auto s = reinterpret_cast<Stats>(dlsym(h, "cxlt_torch_stats"));
  ASSERT_TRUE(m && f && s);
  EXPECT_EQ(m(0, 0, nullptr), nullptr);
  EXPECT_EQ(m(-5, 0, nullptr), nullptr);
  EXPECT_EQ(m(1024, -1, nullptr), nullptr);
  uint64_t reserved = 1, allocated = 1;
  EXPECT_EQ(s(-1, &reserved, &allocated), -1);
  if (!gpu_discovery().available) {
    EXPECT_EQ(m(1024, 0, nullptr), nullptr);  // no driver: PyTorch sees an allocation failure
    f(nullptr, 0, 0, nullptr);                // and frees of nothing are harmless
    EXPECT_EQ(s(0, &reserved, &allocated), 0);
    EXPECT_EQ(reserved, 0u);
    EXPECT_EQ(allocated, 0u);
  }
  dlclose(h);
}
#endif
