#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a large replay trace: a Mooncake JSONL trace repeated N times with shifted ids.

Copy c (0-based) adds c * (max id + 1) to every block id and c * (last timestamp + 1) ms to
every timestamp, so the copies share no block and time keeps increasing. The same reference
stream (every request in order, each hash id in order one reference) is written three ways:

  OUT.jsonl              Mooncake JSONL, what `cxltier replay` reads
  OUT.oracleGeneral.bin  libCacheSim's oracleGeneral binary records (24 bytes, little-endian:
                         uint32 time in whole seconds, uint64 id, uint32 size = 1, int64 index of the
                         id's next reference or -1)
  OUT.csv                libCacheSim CSV with a header: time (s),id,size

Usage: make_replay_trace.py SOURCE.jsonl OUT [--copies 40]
"""
import argparse
import json
import struct
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="a Mooncake JSONL trace (timestamp in ms, hash_ids)")
    ap.add_argument("out", help="output path prefix")
    ap.add_argument("--copies", type=int, default=40, help="how many shifted copies (default 40)")
    a = ap.parse_args()
    if a.copies < 1:
        sys.exit("--copies must be at least 1")

    rows = []
    with open(a.source, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                rows.append((int(d["timestamp"]), int(d.get("input_length", 0)), int(d.get("output_length", 0)),
                             [int(x) for x in d["hash_ids"]]))
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"{a.source}:{no}: not a Mooncake request line ({e})")
    if not rows:
        sys.exit(f"{a.source}: no requests")
    id_span = max((max(r[3]) for r in rows if r[3]), default=0) + 1
    time_span = rows[-1][0] + 1

    # Every reference as (time ms, id), in order; then each one's next-use index.
    times, ids = [], []
    with open(a.out + ".jsonl", "w", encoding="utf-8") as j:
        for c in range(a.copies):
            dt, di = c * time_span, c * id_span
            for ts, inp, outp, hs in rows:
                shifted = [h + di for h in hs]
                j.write(json.dumps({"timestamp": ts + dt, "input_length": inp, "output_length": outp,
                                    "hash_ids": shifted}) + "\n")
                times.extend([(ts + dt) // 1000] * len(shifted))
                ids.extend(shifted)
    if times[-1] > 0xFFFFFFFF:
        sys.exit("timestamps overflow oracleGeneral's 32-bit time field: use fewer copies")
    nxt = [-1] * len(ids)
    last = {}
    for i in range(len(ids) - 1, -1, -1):
        nxt[i] = last.get(ids[i], -1)
        last[ids[i]] = i
    rec = struct.Struct("<IQIq")
    with open(a.out + ".oracleGeneral.bin", "wb") as b:
        b.write(b"".join(rec.pack(t, i, 1, n) for t, i, n in zip(times, ids, nxt)))
    with open(a.out + ".csv", "w", encoding="ascii") as c:
        c.write("time,id,size\n")
        c.writelines(f"{t},{i},1\n" for t, i in zip(times, ids))
    print(f"{len(rows) * a.copies} requests, {len(ids)} references, {len(last)} unique ids "
          f"({len(last) // a.copies} per copy), id shift {id_span}, time shift {time_span} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
