# SPDX-License-Identifier: Apache-2.0
"""python -m cxltier topo|stats [--config PATH]: quick checks of the library from Python."""
import argparse
import json
import sys

from . import Error, Runtime, version


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cxltier", description=__doc__)
    ap.add_argument("command", choices=["topo", "stats"], help="topo: the tiers; stats: the counters (JSON)")
    ap.add_argument("--config", help="a TOML configuration (default: the library's defaults)")
    a = ap.parse_args(argv)
    try:
        with Runtime(a.config) as rt:
            if a.command == "topo":
                print(f"cxltier {version()}")
                print(f"{'rank':>4} {'name':<10} {'kind':<8} {'backend':<9} {'budget MiB':>11} {'used MiB':>9} "
                      f"{'blocks':>7} {'MiB/s':>9} {'ns':>7}")
                for t in rt.tiers():
                    print(f"{t.rank:>4} {t.name:<10} {t.kind:<8} {t.backend:<9} {t.budget_bytes / 2**20:>11.1f} "
                          f"{t.used_bytes / 2**20:>9.1f} {t.blocks:>7} {t.bandwidth_mib_s:>9.0f} {t.latency_ns:>7.0f}"
                          f"{' (emulated)' if t.emulated else ''}")
            else:
                json.dump(rt.stats(), sys.stdout, indent=1)
                print()
    except Error as e:
        print(f"python -m cxltier: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
