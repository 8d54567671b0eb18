#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The replay's LRU and FIFO hit counts against cachetools (Debian python3-cachetools, a widely
# used third-party cache library: LRUCache, FIFOCache), on every shared trace at several
# capacities, exactly. The traces are read here with the standard library (json, gzip), not with
# cxltier's readers; `cxltier replay --json` gives the replay's side. Exit 77 (skipped) when
# cachetools is not installed; 1 with the differing counts on a mismatch.
import gzip
import json
import os
import subprocess
import sys

try:
    import cachetools
except ImportError:
    print("skipped: python3-cachetools is not installed (scripts/common.sh installs it)")
    sys.exit(77)

TOOL = os.environ.get("CXLT_TOOL", "build/tools/cxltier")
DATA = os.path.join(os.environ.get("CXLT_SOURCE_ROOT", "."), "tests", "data", "traces")
TRACES = ["mooncake__synthetic_trace.jsonl", "dynamo__mooncake_trace_1000.jsonl", "dynamo__pi_request_trace.jsonl.gz"]


def stream(path):
    """Block references in file order: Mooncake hash_ids, or Dynamo request_end input_sequence_hashes."""
    opener = gzip.open if path.endswith(".gz") else open
    out = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            j = json.loads(line)
            if "hash_ids" in j:
                out.extend(j["hash_ids"])
            elif j.get("event", {}).get("event_type") == "request_end":
                out.extend(j["event"]["request"]["replay"]["input_sequence_hashes"])
    return out


def hits_with(cache, refs):
    hits = 0
    for r in refs:
        if r in cache:
            hits += 1
            cache[r]  # a hit: LRUCache moves it to most recent; FIFOCache keeps insertion order
        else:
            cache[r] = True  # a miss admits it, evicting by the cache's own order when full
    return hits


def replay_hits(path, policy, cap):
    p = subprocess.run([TOOL, "replay", "--trace", path, "--policy", policy, "--capacity-blocks", str(cap), "--json",
                        "--quiet"], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"cxltier replay {policy} {cap} on {path}: exit {p.returncode}: {p.stderr}")
    return json.loads(p.stdout)["hits"]


failures = 0
checked = 0
for name in TRACES:
    path = os.path.join(DATA, name)
    refs = stream(path)
    unique = len(set(refs))
    caps = sorted({1, 16, 100, max(1, unique // 20), max(1, unique // 10), unique // 2 + 1, unique})
    for cap in caps:
        for policy, cls in (("lru", cachetools.LRUCache), ("fifo", cachetools.FIFOCache)):
            want = hits_with(cls(maxsize=cap), refs)
            got = replay_hits(path, policy, cap)
            checked += 1
            if got != want:
                failures += 1
                print(f"MISMATCH {name} {policy} at {cap} blocks: cxltier {got} hits, cachetools {want}")
            else:
                print(f"ok {name} {policy} at {cap} blocks: {got} hits of {len(refs)} references")
print(f"{checked} comparisons with cachetools {cachetools.__version__}, {failures} mismatches")
sys.exit(1 if failures else 0)
