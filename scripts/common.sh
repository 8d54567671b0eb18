# SPDX-License-Identifier: Apache-2.0
# Shared by scripts/run and scripts/test: install what is missing (Debian 12, as root, with
# apt-get), then configure and build with meson into build/. Idempotent: when every package
# is present and nothing changed, it costs a dpkg query and a no-op ninja run.
set -euo pipefail

CXLT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CXLT_BUILD="${CXLT_BUILD:-$CXLT_ROOT/build}"

# Build and run-time packages. Why each library: README "Dependencies and why".
CXLT_PACKAGES=(
  g++ meson ninja-build pkg-config
  libhwloc-dev libhwloc-plugins libnuma-dev libmemkind-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libxxhash-dev zlib1g-dev
  libhiredis-dev
  python3 python3-cachetools python3-numpy gnuplot-nox
)
# Test-time only (scripts/test installs them): a real Redis Cluster for the remote suite, which
# tests/remote/cluster.sh starts on loopback and skips without these.
CXLT_TEST_PACKAGES=(redis-server redis-tools)

cxlt_log() { printf '[cxltier] %s\n' "$*" >&2; }

# cxlt_ensure_packages PKG...: apt-get install the ones dpkg does not list as installed.
cxlt_ensure_packages() {
  local missing=() p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
      cxlt_log "missing packages: ${missing[*]}; run as root (or install them) and retry"; return 1
    fi
  fi
  cxlt_log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine has no package lists yet; refresh them once per run if the install fails.
  if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/cxltier-apt.log 2>&1; then
    "${sudo[@]}" apt-get update -q >>/tmp/cxltier-apt.log 2>&1
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/cxltier-apt.log 2>&1 || {
      tail -n 20 /tmp/cxltier-apt.log >&2; cxlt_log "apt-get install failed (log: /tmp/cxltier-apt.log)"; return 1; }
  fi
}

# cxlt_configure [meson setup args...]: configure $CXLT_BUILD once (later calls keep it).
cxlt_configure() {
  cd "$CXLT_ROOT"
  if [ ! -f "$CXLT_BUILD/build.ninja" ]; then
    cxlt_log "configuring $CXLT_BUILD"
    meson setup "$CXLT_BUILD" "$@" >/tmp/cxltier-meson-setup.log 2>&1 || {
      cat /tmp/cxltier-meson-setup.log >&2; return 1; }
    sed -n '/Configuration/,$p' /tmp/cxltier-meson-setup.log >&2 || true
  fi
}

# cxlt_build [meson setup args...]: configure once, then build (ninja decides what changed).
cxlt_build() {
  cxlt_configure "$@" || return 1
  local jobs
  jobs=$(nproc 2>/dev/null || echo 2)
  ninja -C "$CXLT_BUILD" -j "$jobs" >/tmp/cxltier-ninja.log 2>&1 || { cat /tmp/cxltier-ninja.log >&2; return 1; }
  cxlt_log "built in $CXLT_BUILD"
}
