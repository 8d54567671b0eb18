#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what the multi-NUMA QEMU guest needs (Debian 12): qemu-system-x86, busybox-static, cpio,
# and the current Debian kernel image (linux-image-amd64's dependency), fetched with
# `apt-get download` and unpacked into a cache folder: the host's /boot is never touched.
# Idempotent: when everything is there it costs a few file tests (no apt, no network).
#
# Usage: setup.sh [--cxl] [CACHE_DIR]
#   CACHE_DIR  default: $CXLT_QEMU_CACHE, else /var/cache/cxltier-qemu (root), else
#              ${XDG_CACHE_HOME:-~/.cache}/cxltier-qemu. Survives between runs and build dirs.
#   --cxl      also what the optional CXL Type-3 test needs: ndctl, daxctl, and kmod's depmod
#              to index the cxl, dax and nvdimm modules (unpacked with the kernel either way).
# Writes CACHE_DIR/kernel/<version>/{vmlinuz,vmlinux,modroot/lib/modules/<version>/} and
# CACHE_DIR/kernel/current (the version in use). Exit status: 0 ready; 77 cannot be installed
# here (not root and the tools are missing, or apt/network unavailable and nothing cached): the
# caller skips; 1 anything else.
set -euo pipefail

want_cxl=0
cache=""
for a in "$@"; do
  case $a in
    --cxl) want_cxl=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "setup.sh: unknown option '$a'" >&2; exit 1 ;;
    *) cache=$a ;;
  esac
done
if [ -z "$cache" ]; then
  if [ -n "${CXLT_QEMU_CACHE:-}" ]; then cache=$CXLT_QEMU_CACHE
  elif [ "$(id -u)" -eq 0 ]; then cache=/var/cache/cxltier-qemu
  else cache=${XDG_CACHE_HOME:-$HOME/.cache}/cxltier-qemu; fi
fi

say() { printf 'qemu-setup: %s\n' "$*" >&2; }
skip() { say "SKIP: $*"; exit 77; }

mkdir -p "$cache" || skip "cannot create the cache folder $cache"
# Several build dirs (and engineers) may run the test at once: one setup at a time.
exec 9>"$cache/.lock"
flock -w 900 9 || { say "timed out waiting for $cache/.lock"; exit 1; }

apt_log=$cache/apt.log
sudo_cmd=()
can_install() {
  if [ "$(id -u)" -eq 0 ]; then return 0; fi
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo_cmd=(sudo -n); return 0; fi
  return 1
}
apt_get() {  # waits for the dpkg lock instead of failing when another apt runs
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" timeout 900 apt-get -q -o DPkg::Lock::Timeout=300 "$@"
}
lists_refreshed=0
refresh_lists() {
  [ $lists_refreshed = 1 ] && return 0
  lists_refreshed=1
  say "apt-get update"
  apt_get update >>"$apt_log" 2>&1
}

# --- 1. host tools
missing=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
# busybox-static: one file, no libraries to copy. A dynamic /bin/busybox also works (the
# initramfs builder copies its libraries), so only install when there is none at all.
[ -x /bin/busybox ] || missing+=(busybox-static)
command -v cpio >/dev/null 2>&1 || missing+=(cpio)
if [ $want_cxl = 1 ]; then
  command -v cxl >/dev/null 2>&1 || missing+=(ndctl)
  command -v daxctl >/dev/null 2>&1 || missing+=(daxctl)
  command -v depmod >/dev/null 2>&1 || [ -x /sbin/depmod ] || missing+=(kmod)
fi
if [ ${#missing[@]} -gt 0 ]; then
  can_install || skip "missing ${missing[*]} and not root (no password-less sudo) to install them"
  say "installing ${missing[*]} (log: $apt_log)"
  t0=$(date +%s)
  if ! apt_get install -y --no-install-recommends "${missing[@]}" >>"$apt_log" 2>&1; then
    refresh_lists || true
    apt_get install -y --no-install-recommends "${missing[@]}" >>"$apt_log" 2>&1 ||
      { tail -n 15 "$apt_log" >&2; skip "apt-get install ${missing[*]} failed (no network or no Debian mirror?)"; }
  fi
  say "installed in $(( $(date +%s) - t0 )) s"
fi
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 still missing after install"

# --- 2. the guest kernel: cached by version; the first one fetched stays in use until the cache
# is removed (or CXLT_QEMU_KERNEL_REFRESH=1), so runs are reproducible and need no network.
kdir_root=$cache/kernel
current=""
[ -f "$kdir_root/current" ] && current=$(cat "$kdir_root/current")
# The cxl, dax and nvdimm modules are always unpacked with the kernel (a few MB; the archive is
# read whole anyway); their index (depmod, from kmod) is built when the CXL test first asks.
needs_modules() { [ $want_cxl = 1 ] && [ ! -d "$kdir_root/$current/modroot" ]; }
depmod_modules() {  # depmod_modules KERNEL_DIR VERSION
  [ $want_cxl = 1 ] && [ ! -f "$1/modules.ok" ] || return 0
  depmod_bin=$(command -v depmod || echo /sbin/depmod)
  # The .deb ships no modules.dep; busybox modprobe and libkmod (cxl, ndctl, daxctl) want it.
  "$depmod_bin" -b "$1/modroot" "$2" && touch "$1/modules.ok"
}

# The uncompressed ELF kernel inside the bzImage: QEMU boots it directly through its PVH entry
# point, which skips SeaBIOS's real-mode loader and the decompressor (about 6 s under TCG, more
# than half of a boot here). Debian compresses the payload with xz. When this fails (another
# compression, no PVH note) the harness boots vmlinuz instead, only slower.
extract_vmlinux() {  # extract_vmlinux DIR
  [ -f "$1/vmlinux" ] || [ -f "$1/vmlinux.unavailable" ] && return 0
  if python3 - "$1/vmlinuz" "$1/vmlinux.tmp" <<'PY' 2>"$1/vmlinux.unavailable"; then
import gzip, lzma, subprocess, sys
data = open(sys.argv[1], "rb").read()
for magic, unpack in ((b"\xfd7zXZ\x00", lambda b: lzma.LZMADecompressor(lzma.FORMAT_XZ).decompress(b)),
                      (b"\x1f\x8b\x08\x00", lambda b: gzip.GzipFile(fileobj=__import__("io").BytesIO(b)).read())):
    at = data.find(magic)
    while at >= 0:
        try:
            elf = unpack(data[at:])
        except Exception:
            elf = b""
        if elf[:4] == b"\x7fELF":
            open(sys.argv[2], "wb").write(elf)
            notes = subprocess.run(["readelf", "-n", sys.argv[2]], capture_output=True, text=True).stdout
            # XEN_ELFNOTE_PHYS32_ENTRY (0x12): the PVH entry QEMU needs.
            sys.exit(0 if "0x00000012" in notes else "the kernel has no PVH entry note")
        at = data.find(magic, at + 1)
sys.exit("no xz or gzip payload with an ELF kernel in " + sys.argv[1])
PY
    mv "$1/vmlinux.tmp" "$1/vmlinux"; rm -f "$1/vmlinux.unavailable"
  else
    rm -f "$1/vmlinux.tmp"
    say "no uncompressed kernel ($(cat "$1/vmlinux.unavailable")); the guest boots the slower bzImage"
  fi
}

if [ -n "$current" ] && [ -f "$kdir_root/$current/vmlinuz" ] && [ "${CXLT_QEMU_KERNEL_REFRESH:-0}" != 1 ] && ! needs_modules; then
  extract_vmlinux "$kdir_root/$current"
  depmod_modules "$kdir_root/$current" "$current"
  exit 0
fi

kpkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
pkg=""
if [ -n "$current" ] && [ "${CXLT_QEMU_KERNEL_REFRESH:-0}" != 1 ]; then pkg=linux-image-$current; fi
[ -n "$pkg" ] || pkg=$(kpkg)
if [ -z "$pkg" ]; then
  can_install && { refresh_lists || true; }
  pkg=$(kpkg)
fi
[ -n "$pkg" ] || skip "cannot find linux-image-amd64's kernel package (apt-cache has no lists; no network?)"
kver=${pkg#linux-image-}

dl=$cache/download
rm -rf "$dl"; mkdir -p "$dl"
say "downloading $pkg (apt-get download, about 70 MB)"
t0=$(date +%s)
# apt-get download runs as the _apt user where it can, which cannot write into root's folders:
# let it write here.
chmod 0777 "$dl" 2>/dev/null || true
if ! (cd "$dl" && timeout 600 apt-get -q download "$pkg" >>"$apt_log" 2>&1); then
  can_install && { refresh_lists || true; }
  (cd "$dl" && timeout 600 apt-get -q download "$pkg" >>"$apt_log" 2>&1) ||
    { tail -n 5 "$apt_log" >&2; skip "apt-get download $pkg failed (no network?)"; }
fi
deb=$(ls "$dl"/"$pkg"_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { say "apt-get download left no .deb in $dl"; exit 1; }

# Unpack only what the guest uses: the kernel image, and the cxl, dax and nvdimm modules with
# the module index files (for the CXL test). `dpkg -x` would write all 400 MB of modules; this is
# the same archive read by dpkg-deb, filtered by tar.
stage=$kdir_root/$kver.tmp
rm -rf "$stage"; mkdir -p "$stage/root"
kdir=$kdir_root/$kver
# Modules added to a kernel already in use (a cache from before they were unpacked): the kernel
# files stay where they are (a guest of another build dir may be starting from them right now).
modules_only=0
[ "$kver" = "$current" ] && [ -f "$kdir/vmlinuz" ] && [ "${CXLT_QEMU_KERNEL_REFRESH:-0}" != 1 ] && modules_only=1
members=()
[ $modules_only = 1 ] || members+=("./boot/vmlinuz-$kver")
m=./lib/modules/$kver
members+=("$m/kernel/drivers/cxl" "$m/kernel/drivers/dax" "$m/kernel/drivers/nvdimm"
          "$m/modules.builtin" "$m/modules.builtin.modinfo" "$m/modules.order")
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$stage/root" "${members[@]}"
[ $modules_only = 1 ] || mv "$stage/root/boot/vmlinuz-$kver" "$stage/vmlinuz"
mkdir -p "$stage/modroot/lib/modules"
mv "$stage/root/lib/modules/$kver" "$stage/modroot/lib/modules/"
rm -rf "$stage/root" "$dl"
if [ $modules_only = 1 ]; then
  rm -rf "$kdir/modroot" "$kdir/modules.ok"
  mv "$stage/modroot" "$kdir/modroot"
  rm -rf "$stage"
else
  extract_vmlinux "$stage"
  rm -rf "${kdir:?}"
  mv "$stage" "$kdir"
  echo "$kver" > "$kdir_root/current.tmp" && mv "$kdir_root/current.tmp" "$kdir_root/current"
fi
depmod_modules "$kdir" "$kver"
say "kernel $kver ready in $(( $(date +%s) - t0 )) s ($kdir)"
