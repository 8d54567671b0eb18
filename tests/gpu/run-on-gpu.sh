#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU checks of the CUDA tier (docs/gpu.md), as one prepared script for a machine with an
# NVIDIA GPU: the GPU tests (byte integrity of every kind of move under concurrency, chunked
# registration, a clean failure for an oversized allocation, per-layer gather/scatter by memcpy
# and by kernel, the PyTorch allocator library), the GPU benchmark (H2D, D2H, D2D, both
# directions, ratios to plain cuMemcpyAsync in the same run), `cxltier topo` with the GPU tiers,
# and the PyTorch example. Figures and logs go to $OUT (default ./gpu-results): at most 7 files,
# as the device tool brings back at most 8.
#
#   tests/gpu/run-on-gpu.sh prepare   # here, on a Debian 12 machine with the toolkit: build
#                                     # release binaries with -Dcuda=enabled into .gpu-carry/
#                                     # (binaries + the shared libraries they need; git-ignored)
#   tests/gpu/run-on-gpu.sh run       # there, on the GPU machine, from the repository root:
#                                     # uses .gpu-carry/ if it travelled, else builds from source
#                                     # (needs meson, ninja, nvcc and the -dev packages)
#
# With this workplace's device tool: run `prepare` here, then
#   run(command="tests/gpu/device_check.sh", carry=[".gpu-carry"], timeout_s=590)
# (device_check.sh calls `run` under an overall limit and prints the figures as JSON.)
# The GPU machine there has nvcc, meson, ninja and PyTorch but no hwloc/numa/toml++ headers and
# no network, which is why the binaries are built here and carried.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CARRY="$ROOT/.gpu-carry"
cmd=${1:-run}

die() { echo "run-on-gpu.sh: $*" >&2; exit 2; }

prepare() {
  set -e
  local build="${CXLT_GPU_BUILD:-$ROOT/build-gpu-carry}"
  command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "prepare needs the CUDA toolkit (nvcc)"
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$ROOT" -Dcuda=enabled -Dbuildtype=release -Dbench=false -Ddebug_level=1
  fi
  ninja -C "$build" -j"${CXLT_JOBS:-2}" tools/cxltier tests/gpu/test_gpu_device tests/gpu/test_gpu_nodevice \
    tiers/cuda/libcxltier_torch.so libcxltier.so
  rm -rf "$CARRY"
  mkdir -p "$CARRY/build/tools" "$CARRY/build/tests/gpu" "$CARRY/build/tiers/cuda" "$CARRY/lib" "$CARRY/lib-fallback"
  cp "$build/tools/cxltier" "$CARRY/build/tools/"
  cp "$build/tests/gpu/test_gpu_device" "$build/tests/gpu/test_gpu_nodevice" "$CARRY/build/tests/gpu/"
  cp "$build/tiers/cuda/libcxltier_torch.so" "$CARRY/build/tiers/cuda/"
  cp -L "$build/libcxltier.so" "$CARRY/build/libcxltier.so"
  local f lib
  for f in "$CARRY"/build/tools/cxltier "$CARRY"/build/tests/gpu/* "$CARRY"/build/tiers/cuda/*.so "$CARRY"/build/libcxltier.so; do
    strip --strip-debug "$f"
    # Every shared library outside glibc travels; the C++ runtime goes to lib-fallback, used
    # there only if the machine's own is missing (a newer one is always compatible).
    for lib in $(ldd "$f" | awk '/=> \// {print $3}'); do
      case "$(basename "$lib")" in
        libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
        libstdc++.so.*|libgcc_s.so.*) cp -Ln "$lib" "$CARRY/lib-fallback/" ;;
        *) cp -Ln "$lib" "$CARRY/lib/" ;;
      esac
    done
  done
  grep -qx '/.gpu-carry/' "$ROOT/.git/info/exclude" 2>/dev/null || echo '/.gpu-carry/' >> "$ROOT/.git/info/exclude"
  echo "prepared $(du -sh "$CARRY" | cut -f1) in $CARRY:"
  (cd "$CARRY" && find . -type f | sort)
  echo "next, on the GPU machine: tests/gpu/run-on-gpu.sh run   (carry .gpu-carry)"
}

build_here() {
  local build="$ROOT/build-gpu"
  command -v meson >/dev/null || return 1
  [ -f "$build/build.ninja" ] || meson setup "$build" "$ROOT" -Dcuda=enabled -Dbuildtype=release -Dbench=false || return 1
  ninja -C "$build" tools/cxltier tests/gpu/test_gpu_device tests/gpu/test_gpu_nodevice tiers/cuda/libcxltier_torch.so \
    libcxltier.so || return 1
  B="$build"
}

run() {
  OUT="${OUT:-$ROOT/gpu-results}"
  mkdir -p "$OUT"
  local R="$OUT/gpu-results.md"
  B=""
  if [ -x "$CARRY/build/tests/gpu/test_gpu_device" ]; then
    B="$CARRY/build"
    export LD_LIBRARY_PATH="$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if ldd "$B/tools/cxltier" | grep -q "not found"; then
      export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$CARRY/lib-fallback"
    fi
  else
    build_here || die "no .gpu-carry/ and no way to build here (run 'prepare' on the development machine and carry .gpu-carry)"
  fi
  export CXLT_BUILD_ROOT="$B" CXLT_SOURCE_ROOT="$ROOT" CXLT_TOOL="$B/tools/cxltier" CXLT_TEST_DATA="$ROOT/tests/data"

  {
    echo "# CUDA tier on a GPU: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo '```'
    nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv 2>&1
    uname -srm
    echo "binaries: $B"
    echo '```'
  } > "$R"

  local failed=0
  step() {  # step NAME LOGFILE COMMAND...: run, keep the log, put its tail and status in the summary
    local name=$1 log=$2
    shift 2
    local t0=$SECONDS
    "$@" > "$OUT/$log" 2>&1
    local rc=$?
    {
      echo
      echo "## $name: exit $rc ($((SECONDS - t0)) s)"
      echo '```'
      tail -n 60 "$OUT/$log"
      echo '```'
    } >> "$R"
    [ $rc -eq 0 ] || failed=1
    echo "$name: exit $rc"
  }
  # Step limits add up to 520 s, so the whole run fits one device call of 600 s
  # (tests/gpu/device_check.sh wraps this with an overall limit). The benchmark runs once, as
  # JSON (the table is derived from the same figures by `cxltier gpu --bench` without --json).
  step "cxltier gpu" topo.log timeout 30 sh -c "'$B/tools/cxltier' gpu && '$B/tools/cxltier' topo --topology this-system"
  step "GPU tests (test_gpu_device)" gtest-device.log timeout 200 "$B/tests/gpu/test_gpu_device"
  step "no-device tests with a GPU present (test_gpu_nodevice)" gtest-nodevice.log timeout 60 "$B/tests/gpu/test_gpu_nodevice"
  step "GPU benchmark (JSON)" gpu-bench.json timeout 150 "$B/tools/cxltier" gpu --bench --json
  step "PyTorch example" torch-example.log timeout 80 python3 "$ROOT/examples/torch_allocator.py" "$B/tiers/cuda/libcxltier_torch.so"
  echo "summary: $R"
  return $failed
}

case "$cmd" in
  prepare) prepare ;;
  run) run ;;
  *) die "usage: $0 prepare|run" ;;
esac
