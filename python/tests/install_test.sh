#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install into a temporary root (meson install --destdir), then import the installed package
# with nothing but PYTHONPATH and the library path set (a clean environment, run from /), and
# drive the installed library through it: the package is complete and finds its library.
set -euo pipefail
build="$1"
src="$2"
py="$3"
root=$(mktemp -d /tmp/cxlt-pyinstall-XXXXXX)
trap 'rm -rf "$root"' EXIT
meson install -C "$build" --destdir "$root" --no-rebuild --quiet >/dev/null
init=$(find "$root" -path '*/cxltier/__init__.py' | head -n 1)
[ -n "$init" ] || { echo "the cxltier package was not installed under $root"; exit 1; }
lib=$(find "$root" -name 'libcxltier.so.0' | head -n 1)
[ -n "$lib" ] || { echo "libcxltier.so.0 was not installed under $root"; exit 1; }
pkgdir=$(dirname "$(dirname "$init")")
echo "package: ${init#"$root"}; library: ${lib#"$root"}"
cd /
env -i PATH=/usr/bin:/bin PYTHONPATH="$pkgdir" LD_LIBRARY_PATH="$(dirname "$lib")" CXLT_STORE_CAPACITY=4096 \
  "$py" -c "
import sys, cxltier
assert cxltier.__file__.startswith('$root'), cxltier.__file__
assert cxltier.version() == '0.1.0', cxltier.version()
with cxltier.Runtime('$src/examples/quickstart.toml') as rt:
    b = rt.admit(cxltier.key_from_sequence(1, 0), pin=True)
    rt.access([b], [0.5])
    b.unpin()
    assert rt.stats()['accesses'] == 1
print('imported', cxltier.__file__, 'with', sys.executable)
"
env -i PATH=/usr/bin:/bin PYTHONPATH="$pkgdir" LD_LIBRARY_PATH="$(dirname "$lib")" CXLT_STORE_CAPACITY=4096 \
  "$py" -m cxltier topo --config "$src/examples/quickstart.toml"
