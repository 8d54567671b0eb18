#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install the library into a temporary root (meson install --destdir), then build the
# README's C example with nothing but the installed header and `pkg-config --cflags --libs
# cxltier`, and run it: what an engine that installs the library does, checked by the suite.
set -euo pipefail
build="$1"
src="$2"
root=$(mktemp -d /tmp/cxlt-install-XXXXXX)
trap 'rm -rf "$root"' EXIT
meson install -C "$build" --destdir "$root" --no-rebuild --quiet >/dev/null
pc=$(find "$root" -name cxltier.pc | head -n 1)
[ -n "$pc" ] || { echo "cxltier.pc was not installed"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")"
export PKG_CONFIG_SYSROOT_DIR="$root"
flags=$(pkg-config --cflags --libs cxltier)
echo "pkg-config --cflags --libs cxltier: $flags"
inc=$(pkg-config --cflags-only-I cxltier | tr ' ' '\n' | grep -m1 '^-I' | sed 's/^-I//')
[ -f "$inc/cxltier/cxltier.h" ] || { echo "header not installed where pkg-config says ($inc)"; exit 1; }
# Only the installed tree: no -I into the source, no build-tree library.
cc -std=c11 -Wall -Wextra -Werror "$src/examples/quickstart.c" $flags -o "$root/quickstart"
libdir=$(pkg-config --libs-only-L cxltier | tr ' ' '\n' | grep -m1 '^-L' | sed 's/^-L//')
LD_LIBRARY_PATH="$libdir" "$root/quickstart" "$src/examples/quickstart.toml"
