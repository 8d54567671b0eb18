# SPDX-License-Identifier: Apache-2.0
"""The reference engine: a numpy transformer whose paged KV cache lives in cxltier blocks.

    CXLTIER_LIBRARY=build/libcxltier.so.0 PYTHONPATH=python /usr/bin/python3 \
        examples/engine/engine.py --requests 60 --trace /tmp/engine.jsonl

serves a seeded stream of requests that share system prompts twice, once with its KV blocks
in cxltier (CxltierKV) and once in a numpy dict that never evicts (NumpyKV), and checks that
the tokens and logits are bit-identical. Per decode step, for every running request, the engine
pins the blocks of its context (prefix_lookup, then admit_batch for the blocks resident nowhere,
which it computes again), computes one token, reports the attention each block received to
`access` in one call for the whole batch, and unpins. Between steps nothing is pinned, so the
runtime's LRFU policy demotes and drops blocks by the attention the model computed.
"""
import argparse
import json
import os
import sys
import time
import zlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import BLOCK_BYTES, BLOCK_SHAPE, DTYPE, KV_HEADS, LAYERS, TOKENS_PER_BLOCK, VOCAB, Model  # noqa: E402

import cxltier  # noqa: E402


class CorruptBlock(Exception):
    """A block's bytes differ from what the engine wrote (its checksum no longer matches)."""


@dataclass
class Request:
    rid: int
    prompt: List[int]
    max_new: int
    tokens: List[int] = field(default_factory=list)  # prompt, then the generated tokens
    keys: List[cxltier.Key] = field(default_factory=list)  # one per block, as far as computed
    logits: List[np.ndarray] = field(default_factory=list)  # the logits that chose each new token
    pos: int = 0  # the next position to feed
    seq: int = -1  # the sequence id of its private blocks' keys (the request id unless set)

    def block_key(self, j: int) -> cxltier.Key:
        """Full prompt blocks get chained content keys (shared by every request with that prefix);
        the rest (the last prompt block, generated tokens) are private to the request."""
        while len(self.keys) <= j:
            i = len(self.keys)
            if (i + 1) * TOKENS_PER_BLOCK <= len(self.prompt):
                parent = self.keys[i - 1] if i else cxltier.ROOT
                toks = np.array(self.prompt[i * TOKENS_PER_BLOCK:(i + 1) * TOKENS_PER_BLOCK], np.int32)
                self.keys.append(cxltier.key_from_tokens(parent, toks))
            else:
                self.keys.append(cxltier.key_from_sequence(self.rid if self.seq < 0 else self.seq, i))
        return self.keys[j]


# Prompts are at most 96 tokens and requests generate at most 16: 7 blocks each, so 4 running
# requests pin at most 28 blocks in a step, fewer than the 32 of runtime_config().
MAX_PROMPT = 96


def make_requests(n: int, seed: int = 7, groups: int = 4, system_blocks: int = 3, follow_up: float = 0.3,
                  sequence_base: int = 0):
    """n requests: each starts with one of `groups` system prompts of `system_blocks` full blocks,
    then 4-32 tokens of its own, and generates 4-16 tokens. With probability `follow_up` a request
    continues an earlier one instead (a next turn): its prompt is that request's prompt plus 4-32
    new tokens (when that fits in MAX_PROMPT), so it shares that request's blocks, not only
    the system prompt's.

    Private blocks are keyed by sequence id `sequence_base + request id`: engines that share a
    remote tier must give each sequence its own id, or one finds another's stale blocks there."""
    rng = np.random.default_rng(seed)
    systems = [list(rng.integers(0, VOCAB, system_blocks * TOKENS_PER_BLOCK)) for _ in range(groups)]
    out = []
    for rid in range(n):
        own = list(rng.integers(0, VOCAB, int(rng.integers(4, 33))))
        prev = out[int(rng.integers(0, len(out)))].prompt if out and rng.random() < follow_up else None
        if prev is not None and len(prev) + len(own) <= MAX_PROMPT:
            prompt = prev + [int(t) for t in own]
        else:
            prompt = [int(t) for t in systems[int(rng.integers(0, groups))] + own]
        out.append(Request(rid, prompt, int(rng.integers(4, 17)), tokens=list(prompt), seq=sequence_base + rid))
    return out


class NumpyKV:
    """The baseline: every block in a dict of numpy arrays, never evicted."""

    def __init__(self):
        self.blocks: Dict[cxltier.Key, np.ndarray] = {}
        self.runtime_s = 0.0

    def acquire(self, keys):
        """(views, valid) for keys: valid[j] is False when block j must be computed."""
        views, valid = [], []
        for k in keys:
            b = self.blocks.get(k)
            valid.append(b is not None)
            if b is None:
                b = self.blocks[k] = np.zeros(BLOCK_SHAPE, DTYPE)
            views.append(b)
        return views, valid

    def end_step(self, refs, mass):
        pass

    def finish(self, req):
        pass


class CxltierKV:
    """The KV cache in cxltier blocks: pinned while a step uses them, unpinned between steps."""

    def __init__(self, rt: cxltier.Runtime, verify: bool = True):
        self.rt = rt
        self.verify = verify
        self.crc: Dict[cxltier.Key, int] = {}  # checksum of each full block when it was computed
        self.pinned: List[cxltier.Block] = []
        self.handles: Dict[cxltier.Key, int] = {}
        self.runtime_s = 0.0  # time inside cxltier calls

    def acquire(self, keys):
        t = time.perf_counter()
        hits = self.rt.prefix_lookup(keys, pin=True)
        rest = self.rt.admit_batch(keys[len(hits):], pin=True) if len(hits) < len(keys) else []
        blocks = hits + rest
        self.pinned += blocks
        self.runtime_s += time.perf_counter() - t
        views, valid = [], []
        for b in blocks:
            views.append(b.array(DTYPE, BLOCK_SHAPE))
            self.handles[b.key] = b.handle
            ok = b.placed is not True
            if ok and self.verify and b.key in self.crc and zlib.crc32(views[-1]) != self.crc[b.key]:
                raise CorruptBlock(f"block {b.key} (tier {b.tier}): checksum mismatch")
            valid.append(ok)
        return views, valid

    def computed(self, key, view):
        """A full block's bytes are final: remember their checksum."""
        if self.verify:
            self.crc[key] = zlib.crc32(view)

    def end_step(self, refs, mass):
        t = time.perf_counter()
        handles = np.fromiter((self.handles[k] for k in refs), np.uint64, len(refs))
        self.rt.access(handles, mass)
        self.rt.step()
        self.handles.clear()
        for b in self.pinned:
            self.rt.unpin(b.key)
        self.pinned.clear()
        self.runtime_s += time.perf_counter() - t

    def finish(self, req):
        t = time.perf_counter()
        for j, k in enumerate(req.keys):
            private = (j + 1) * TOKENS_PER_BLOCK > len(req.prompt)
            try:  # content blocks stay cached for the next request; private ones are freed
                self.rt.release(k, forget=private)
            except cxltier.NotFoundError:
                pass  # dropped already
            except cxltier.InvalidArgumentError:
                if private:
                    raise
                # a shared prefix block that another request of the same prefix released
        self.runtime_s += time.perf_counter() - t


@dataclass
class Result:
    tokens: Dict[int, List[int]]
    logits: Dict[int, np.ndarray]
    steps: int
    forwards: int  # tokens computed, decode steps included
    prefill_computed: int  # prompt positions computed at a request's first step
    prefill_saved: int  # prompt positions whose KV came from the cache (prefix hits)
    recomputed_blocks: int  # blocks computed again after a drop
    recomputed_tokens: int
    wall_s: float
    runtime_s: float


class Engine:
    def __init__(self, model: Model, store, max_active: int = 4, trace_path: Optional[str] = None):
        self.model, self.store, self.max_active = model, store, max_active
        self.trace_path = trace_path

    def serve(self, requests: List[Request]) -> Result:
        queue, active = list(requests), []
        seen = set()  # keys whose KV this engine computed at least once
        res = Result({}, {}, 0, 0, 0, 0, 0, 0, 0.0, 0.0)
        trace = open(self.trace_path + ".tmp", "w") if self.trace_path else None
        if trace:
            trace.write(json.dumps({"format": "cxltier-attention", "version": 1,
                                    "block_size_tokens": TOKENS_PER_BLOCK, "generator": None,
                                    "source": "examples/engine (random weights)"}) + "\n")
        t0 = time.perf_counter()
        while queue or active:
            while queue and len(active) < self.max_active:
                r = queue.pop(0)
                r.pos = len(r.prompt) - 1  # positions before it are prefilled at the first step
                active.append(r)
            res.steps += 1
            refs, mass, seqs, counts, new, done = [], [], [], [], [], []
            for r in active:
                first = not r.logits
                nblk = r.pos // TOKENS_PER_BLOCK + 1
                keys = [r.block_key(j) for j in range(nblk)]
                views, valid = self.store.acquire(keys)
                for j in range(nblk):
                    lo, hi = j * TOKENS_PER_BLOCK, min((j + 1) * TOKENS_PER_BLOCK, r.pos)
                    if valid[j]:
                        if first:
                            res.prefill_saved += max(0, hi - lo)
                        continue
                    if keys[j] in seen:
                        res.recomputed_blocks += 1
                        res.recomputed_tokens += max(0, hi - lo)
                    elif first:
                        res.prefill_computed += max(0, hi - lo)
                    for p in range(lo, hi):
                        self.model.forward(r.tokens[p], p, views)
                        res.forwards += 1
                    if hi - lo == TOKENS_PER_BLOCK and hasattr(self.store, "computed"):
                        self.store.computed(keys[j], views[j])
                    if keys[j] not in seen:
                        seen.add(keys[j])
                        new.append(keys[j])
                logits, m = self.model.forward(r.tokens[r.pos], r.pos, views)
                res.forwards += 1
                if keys[-1] not in seen:
                    seen.add(keys[-1])
                    new.append(keys[-1])
                if (r.pos + 1) % TOKENS_PER_BLOCK == 0 and hasattr(self.store, "computed"):
                    self.store.computed(keys[-1], views[-1])
                r.logits.append(logits)
                r.tokens.append(int(np.argmax(logits)))
                r.pos += 1
                del views
                # The attention mass of each block: positions summed, over heads and layers, / (L*H).
                per_block = np.add.reduceat(m.astype(np.float64), np.arange(0, m.size, TOKENS_PER_BLOCK))
                per_block = np.minimum(per_block / (LAYERS * KV_HEADS), 1.0).astype(np.float32)
                refs += keys
                mass.append(per_block)
                seqs.append(r.rid)
                counts.append(len(keys))
            mass_all = np.concatenate(mass) if mass else np.zeros(0, np.float32)
            self.store.end_step(refs, mass_all)
            for r in list(active):
                if len(r.logits) == r.max_new:
                    active.remove(r)
                    self.store.finish(r)
                    done.append(r.rid)
                    res.tokens[r.rid] = r.tokens[len(r.prompt):]
                    res.logits[r.rid] = np.stack(r.logits)
            if trace:
                trace.write(json.dumps({"step": res.steps, "seq": seqs, "count": counts,
                                        "blocks": [k.lo for k in refs], "attn": [float(a) for a in mass_all],
                                        "new": [k.lo for k in new], "done": done}) + "\n")
        res.wall_s = time.perf_counter() - t0
        res.runtime_s = self.store.runtime_s
        if trace:
            trace.close()
            os.replace(self.trace_path + ".tmp", self.trace_path)
        return res


def runtime_config(hbm_blocks=6, dram_blocks=10, cxl_blocks=16):
    """Three emulated tiers far smaller than the working set (blocks of BLOCK_BYTES), in the
    model's block geometry: float32 K and V, 4 layers, 4 heads, 32 dims, 16 tokens."""
    return {"topology": "emulated",
            "geometry": {"layers": LAYERS, "kv_heads": KV_HEADS, "head_dim": 32, "bytes_per_element": 4,
                         "tokens_per_block": TOKENS_PER_BLOCK},
            "runtime": {"huge_pages": "none"},
            "tiers": [{"kind": "hbm", "budget": hbm_blocks * BLOCK_BYTES},
                      {"kind": "dram", "budget": dram_blocks * BLOCK_BYTES},
                      {"kind": "cxl", "budget": cxl_blocks * BLOCK_BYTES}]}


def compare(a: Result, b: Result) -> List[str]:
    """Differences between two runs' tokens and logits, bit for bit (empty: identical)."""
    diffs = []
    for rid in sorted(set(a.tokens) | set(b.tokens)):
        if a.tokens.get(rid) != b.tokens.get(rid):
            diffs.append(f"request {rid}: tokens {a.tokens.get(rid)} != {b.tokens.get(rid)}")
        elif a.logits[rid].tobytes() != b.logits[rid].tobytes():
            diffs.append(f"request {rid}: logits differ")
    return diffs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1, help="the weights' seed")
    ap.add_argument("--trace", help="write the attention trace (docs/traces.md) here")
    ap.add_argument("--config", help="a TOML configuration instead of the built-in small tiers")
    a = ap.parse_args(argv)
    model = Model(a.seed)
    base = Engine(model, NumpyKV()).serve(make_requests(a.requests))
    with cxltier.Runtime(a.config or runtime_config()) as rt:
        ours = Engine(model, CxltierKV(rt), trace_path=a.trace).serve(make_requests(a.requests))
        st = rt.stats()
    diffs = compare(base, ours)
    print(f"{a.requests} requests, {ours.steps} decode steps, {ours.forwards} tokens computed "
          f"(baseline {base.forwards})")
    print(f"prefill: {ours.prefill_saved} prompt tokens from prefix hits, {ours.prefill_computed} computed")
    print(f"runtime: {st['demotions']} demotions, {st['drops']} drops, {st['readmissions_restored']} "
          f"re-admissions with restored scores; engine: {ours.recomputed_blocks} blocks "
          f"({ours.recomputed_tokens} tokens) recomputed")
    print(f"time: {ours.wall_s:.2f} s, of which {ours.runtime_s:.3f} s in cxltier calls "
          f"({100 * ours.runtime_s / ours.wall_s:.1f}%); baseline {base.wall_s:.2f} s")
    print("tokens and logits: " + ("bit-identical" if not diffs else f"{len(diffs)} differences: {diffs[:3]}"))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
