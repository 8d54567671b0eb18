# SPDX-License-Identifier: Apache-2.0
"""Runtime, Config, Block and keys: the C ABI of cxltier.h as Python objects.

Every method is one C call (admit_batch and prefix_lookup too: cxlt_block_admit_batch and
cxlt_prefix_lookup, see _admit_many and _pin_prefix), raises the cxltier.Error subclass of the result code
with cxlt_last_error()'s message, and releases the GIL while the C call runs (ctypes does).
"""
import ctypes
import json
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Union

from . import _native as N
from .errors import BusyError, ClosedError, Error, InvalidArgumentError, NotFoundError, NotSupportedError, error_for


def _check(rc: int) -> None:
    if rc != 0:
        raise error_for(rc, N.library().cxlt_last_error().decode(errors="replace"))


class Key(NamedTuple):
    """A 128-bit block identity (cxlt_key_t). Key(0, 0) is the root parent of key_from_tokens."""
    hi: int
    lo: int

    def _c(self) -> N.KeyStruct:
        return N.KeyStruct(self.hi, self.lo)


ROOT = Key(0, 0)


def _key(k: Any) -> N.KeyStruct:
    if type(k) is Key:  # the common case first: one type check
        return N.KeyStruct(k[0], k[1])
    if isinstance(k, Block):
        k = k.key
    if isinstance(k, tuple) and len(k) == 2:
        return N.KeyStruct(k[0], k[1])
    raise InvalidArgumentError(f"expected a Key (hi, lo) or a Block, got {type(k).__name__}")


def key_from_sequence(sequence_id: int, block_index: int) -> Key:
    """The key of block `block_index` of sequence `sequence_id`."""
    k = N.library().cxlt_key_from_sequence(sequence_id, block_index)
    return Key(k.hi, k.lo)


def key_from_tokens(parent: Key, tokens: Sequence[int]) -> Key:
    """The content key of a block: its parent's key (ROOT for the first) and its token ids.

    `tokens` may be a numpy int32 array (used without a copy) or any sequence of ints."""
    if hasattr(tokens, "__array_interface__"):
        import numpy as np
        arr = np.ascontiguousarray(tokens, dtype=np.int32)
        ptr, n = arr.ctypes.data, arr.size
    else:
        arr = (ctypes.c_int32 * len(tokens))(*tokens)
        ptr, n = ctypes.addressof(arr), len(tokens)
    k = N.library().cxlt_key_from_tokens(_key(parent), ptr if n else None, n)
    return Key(k.hi, k.lo)


def block_bytes(layers: int, kv_heads: int, head_dim: int, bytes_per_element: int, tokens_per_block: int) -> int:
    """Bytes per block of a geometry (2 x layers x kv_heads x head_dim x bytes x tokens)."""
    out = ctypes.c_uint64()
    _check(N.library().cxlt_block_bytes(layers, kv_heads, head_dim, bytes_per_element, tokens_per_block,
                                        ctypes.byref(out)))
    return out.value


def result_string(code: int) -> str:
    """cxlt_result_string: the C name of a result code."""
    return N.library().cxlt_result_string(code).decode()


def version() -> str:
    """The loaded library's version, "major.minor.patch"."""
    v = N.library().cxlt_version()
    return f"{v >> 16}.{(v >> 8) & 0xFF}.{v & 0xFF}"


def gpus() -> List[Dict[str, Any]]:
    """The CUDA devices; NotSupportedError (with the reason) without a CUDA tier, driver or device."""
    lib = N.library()
    n = ctypes.c_int()
    _check(lib.cxlt_gpu_count(ctypes.byref(n)))
    out = []
    for d in range(n.value):
        g = N.GpuInfoStruct()
        _check(lib.cxlt_gpu_info(d, ctypes.byref(g)))
        out.append({"device": g.device, "name": g.name.decode(), "pci_bus_id": g.pci_bus_id.decode(),
                    "numa_node": g.numa_node, "total_bytes": g.total_bytes,
                    "compute_capability": (g.compute_major, g.compute_minor), "copy_engines": g.copy_engines})
    return out


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value)


class Config:
    """A configuration handle: defaults, then CXLT_* variables, then a file, then set() (highest).

    Usable as a context manager; the handle is freed by close() or when collected."""

    def __init__(self, path: Optional[Union[str, os.PathLike]] = None, values: Optional[Dict[str, Any]] = None):
        lib = N.library()
        h = ctypes.c_void_p()
        _check(lib.cxlt_config_create(ctypes.byref(h)))
        self._h: Optional[int] = h.value
        try:
            if path is not None:
                self.load(path)
            if values:
                self.update(values)
        except Error:
            self.close()
            raise

    def _handle(self) -> int:
        if self._h is None:
            raise ClosedError("the Config is closed")
        return self._h

    def load(self, path: Union[str, os.PathLike]) -> None:
        """Merge a TOML file. IoError if unreadable, ConfigError naming the line and key."""
        _check(N.library().cxlt_config_load_file(self._handle(), os.fsencode(path)))

    def set(self, key: str, value: Any) -> None:
        """Set one key by its TOML name ("policy.alpha", "tiers.0.budget"); value as text, number or bool."""
        _check(N.library().cxlt_config_set(self._handle(), key.encode(), _text(value).encode()))

    def update(self, values: Dict[str, Any], prefix: str = "") -> None:
        """Set keys from a dict shaped like the TOML file: nested tables, and a list of tier tables."""
        for k, v in values.items():
            name = f"{prefix}{k}"
            if isinstance(v, dict):
                self.update(v, name + ".")
            elif isinstance(v, (list, tuple)) and v and all(isinstance(t, dict) for t in v):
                for i, t in enumerate(v):
                    self.update(t, f"{name}.{i}.")
            else:
                self.set(name, v)

    def validate(self) -> None:
        """Check every field; ConfigError names the bad one."""
        _check(N.library().cxlt_config_validate(self._handle()))

    def dump(self) -> str:
        """The effective configuration as TOML."""
        lib = N.library()
        need = ctypes.c_size_t()
        lib.cxlt_config_dump(self._handle(), None, 0, ctypes.byref(need))
        buf = ctypes.create_string_buffer(need.value)
        _check(lib.cxlt_config_dump(self._handle(), buf, need.value, ctypes.byref(need)))
        return buf.value.decode()

    def close(self) -> None:
        if self._h is not None:
            N.library().cxlt_config_destroy(self._h)
            self._h = None

    def __enter__(self) -> "Config":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass


@dataclass(frozen=True)
class PolicyState:
    """A block's policy state (cxlt_policy_state_t): tier -1 when resident nowhere."""
    score: float
    last_access_step: int
    accesses: int
    tier: int


@dataclass(frozen=True)
class TierInfo:
    """One tier (cxlt_tier_info_t). Bytes; bandwidth MiB/s (higher is better); latency ns (lower is better)."""
    rank: int
    kind: str
    name: str
    backend: str
    budget_bytes: int
    used_bytes: int
    blocks: int
    bandwidth_mib_s: float
    latency_ns: float
    emulated: bool


class _ViewOwner:
    """The memory owner of the numpy views of one pinned block: alive while any view is."""
    __slots__ = ("__array_interface__", "__weakref__")

    def __init__(self, interface: Dict[str, Any]):
        self.__array_interface__ = interface


class Block:
    """A resident block as a call returned it (cxlt_block_t), with its key.

    `data` is the address of its bytes (None on the null backend), valid only while pinned;
    `placed` is True when admit gave it a new slot (bytes undefined: fill them), False when it was
    resident already, None for blocks from lookup/pin/move."""
    __slots__ = ("runtime", "key", "data", "bytes", "tier", "handle", "placed")

    def __init__(self, runtime: "Runtime", key: Key, b: N.BlockStruct, placed: Optional[bool] = None):
        self.runtime = runtime
        self.key = key
        self.data: Optional[int] = b.data
        self.bytes: int = b.bytes
        self.tier: int = b.tier
        self.handle: int = b.handle
        self.placed = placed

    def __repr__(self) -> str:
        return (f"Block(key={self.key}, tier={self.tier}, bytes={self.bytes}, handle={self.handle}, "
                f"pinned={self.pinned})")

    @property
    def pinned(self) -> bool:
        """Whether this Runtime holds a pin on the block (pins made through this package)."""
        return self.runtime._pin_count(self.key) > 0

    def array(self, dtype: Any = "uint8", shape: Optional[Sequence[int]] = None):
        """A zero-copy, writable numpy view of the block's bytes, valid while the block is pinned.

        Refused (InvalidArgumentError) for a block not pinned; while a view (or any view derived
        from it) is alive, the last unpin of the block is refused with BusyError."""
        return self.runtime._view(self, dtype, shape)

    def tensor(self, dtype: Any = None, shape: Optional[Sequence[int]] = None):
        """The same view as a torch tensor (torch.frombuffer); torch is needed only here."""
        import torch  # optional dependency, never needed by the rest of the package
        arr = self.array("uint8")
        t = torch.frombuffer(arr, dtype=torch.uint8)
        if dtype is not None:
            t = t.view(dtype)
        return t.view(*shape) if shape is not None else t

    def unpin(self) -> None:
        self.runtime.unpin(self.key)

    def __enter__(self) -> "Block":
        return self

    def __exit__(self, *exc) -> None:
        """Leaving a `with rt.pin(key) as b:` block undoes that pin."""
        self.runtime.unpin(self.key)


KeysOrBlocks = Union[Iterable[Key], Iterable[Block], Any]


class Runtime:
    """An open cxltier runtime. Runtime(None): defaults; Runtime(path): a TOML file;
    Runtime(dict): keys as in the TOML file; Runtime(Config). Use as a context manager.

    Safe to call from several threads; close() must come after the other threads' last call."""

    def __init__(self, config: Union[None, str, os.PathLike, Dict[str, Any], Config] = None):
        lib = N.library()
        h = ctypes.c_void_p()
        if config is None:
            _check(lib.cxlt_runtime_open(None, ctypes.byref(h)))
        elif isinstance(config, (str, os.PathLike)):
            _check(lib.cxlt_runtime_open(os.fsencode(config), ctypes.byref(h)))
        elif isinstance(config, dict):
            with Config(values=config) as cfg:
                _check(lib.cxlt_runtime_open_config(cfg._handle(), ctypes.byref(h)))
        elif isinstance(config, Config):
            _check(lib.cxlt_runtime_open_config(config._handle(), ctypes.byref(h)))
        else:
            raise InvalidArgumentError(f"config: expected None, a path, a dict or a Config, got {type(config).__name__}")
        self._lib = lib
        self._rt: Optional[int] = h.value
        self._lock = threading.Lock()
        # key -> [pins held through this object, address, bytes]; key -> live view owners
        self._pins: Dict[Key, List[int]] = {}
        self._views: Dict[Key, "weakref.WeakSet[_ViewOwner]"] = {}

    # --- lifetime
    def _h(self) -> int:
        rt = self._rt
        if rt is None:
            raise ClosedError("the Runtime is closed")
        return rt

    def close(self) -> None:
        """Wait for migrations, checkpoint if persistence is on, free every tier. Idempotent.

        Raises IoError when the final checkpoint could not be written (the previous checkpoint
        file is intact); the runtime is closed either way."""
        rt, self._rt = self._rt, None
        if rt is not None:
            _check(self._lib.cxlt_runtime_close_ex(rt))

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # --- pins and views (Python-side bookkeeping of the pins this object made)
    def _pin_count(self, key: Key) -> int:
        with self._lock:
            p = self._pins.get(key)
            return p[0] if p else 0

    def _pinned(self, key: Key, b: N.BlockStruct) -> None:
        with self._lock:
            p = self._pins.get(key)
            if p:
                p[0] += 1
            else:
                self._pins[key] = [1, b.data, b.bytes]

    def _view(self, block: Block, dtype: Any, shape: Optional[Sequence[int]]):
        import numpy as np
        dt = np.dtype(dtype)
        with self._lock:
            p = self._pins.get(block.key)
            if not p:
                raise InvalidArgumentError(f"block {block.key}: not pinned; a view is valid only while the block "
                                           "is pinned (pin it, or admit it with pin=True)")
            _, addr, nbytes = p
            if not addr:
                raise NotSupportedError(f"block {block.key}: no bytes in this process (the null backend)")
            if shape is None:
                shape = (nbytes // dt.itemsize,)
            shape = tuple(int(s) for s in shape)
            need = dt.itemsize
            for s in shape:
                need *= s
            if need > nbytes or any(s < 0 for s in shape):
                raise InvalidArgumentError(f"block {block.key}: a view of {shape} x {dt} needs {need} bytes, "
                                           f"the block has {nbytes}")
            owner = _ViewOwner({"version": 3, "shape": shape, "typestr": dt.str, "data": (addr, False)})
            self._views.setdefault(block.key, weakref.WeakSet()).add(owner)
        return np.asarray(owner)

    # --- blocks
    def admit(self, key: Key, pin: bool = False) -> Block:
        """Give `key` a slot (cxlt_block_admit_ex). Block.placed says whether its bytes must be filled."""
        return self._admit_many([key], pin)[0]

    def admit_batch(self, keys: Iterable[Key], pin: bool = False) -> List[Block]:
        """admit() of each key, in order, in one C call (cxlt_block_admit_batch). The batch is
        checked first: on a failure nothing of it is admitted or pinned."""
        return self._admit_many(list(keys), pin)

    def _admit_many(self, keys: List[Key], pin: bool) -> List[Block]:
        n = len(keys)
        if n == 0:
            return []
        rt, lib = self._h(), self._lib
        ckeys = (N.KeyStruct * n)(*[_key(k) for k in keys])
        out, placed = (N.BlockStruct * n)(), (ctypes.c_int * n)()
        _check(lib.cxlt_block_admit_batch(rt, ckeys, n, N.ADMIT_PIN if pin else 0, out, placed))
        blocks = []
        for i in range(n):
            ck, b = ckeys[i], out[i]
            key = Key(ck.hi, ck.lo)
            if pin:
                self._pinned(key, b)
            blocks.append(Block(self, key, b, bool(placed[i])))
        return blocks

    def lookup(self, key: Key) -> Block:
        """Where the block is now (not pinned: it may move). NotFoundError if resident nowhere."""
        out = N.BlockStruct()
        ck = _key(key)
        _check(self._lib.cxlt_block_lookup(self._h(), ck, ctypes.byref(out)))
        return Block(self, Key(ck.hi, ck.lo), out)

    def prefix_lookup(self, keys: Iterable[Key], pin: bool = True) -> List[Block]:
        """The blocks of the longest resident prefix of `keys` (chained content keys of a prompt),
        pinned in one step when `pin` (cxlt_prefix_lookup): the first key resident nowhere ends it.
        On an error nothing is pinned."""
        return self._pin_prefix(list(keys), pin)

    def _pin_prefix(self, keys: List[Key], pin: bool) -> List[Block]:
        n = len(keys)
        if n == 0:
            return []
        rt, lib = self._h(), self._lib
        ckeys = (N.KeyStruct * n)(*[_key(k) for k in keys])
        out, matched = (N.BlockStruct * n)(), ctypes.c_size_t()
        _check(lib.cxlt_prefix_lookup(rt, ckeys, n, N.LOOKUP_PIN if pin else 0, ctypes.byref(matched), out))
        blocks = []
        for i in range(matched.value):
            k, ck, b = keys[i], ckeys[i], out[i]
            key = k if type(k) is Key else Key(ck.hi, ck.lo)
            if pin:
                self._pinned(key, b)
            blocks.append(Block(self, key, b))
        return blocks

    def pin(self, key: Key) -> Block:
        """Pin a resident block (pins nest): it stays where it is and Block.array() is allowed.
        Use as `with rt.pin(key) as b:` to unpin on leaving."""
        out = N.BlockStruct()
        ck = _key(key)
        _check(self._lib.cxlt_block_pin(self._h(), ck, ctypes.byref(out)))
        k = Key(ck.hi, ck.lo)
        self._pinned(k, out)
        return Block(self, k, out)

    def unpin(self, key: Key) -> None:
        """Undo one pin. BusyError if it is this object's last pin and a view of the block is alive;
        InvalidArgumentError if the block is not pinned."""
        ck = _key(key)
        k = key if type(key) is Key else Key(ck.hi, ck.lo)
        with self._lock:  # the bookkeeping first, so no view is made of a block being unpinned
            p = self._pins.get(k)
            if p:
                if p[0] == 1:
                    live = len(self._views.get(k, ()))
                    if live:
                        raise BusyError(f"block {k}: {live} numpy view(s) of its bytes are alive; delete them "
                                        "before the last unpin")
                    del self._pins[k]
                    self._views.pop(k, None)
                else:
                    p[0] -= 1
        rc = self._lib.cxlt_block_unpin(self._h(), ck)
        if rc != 0:
            err = error_for(rc, self._lib.cxlt_last_error().decode(errors="replace"))
            if p:  # the C pin is still held: so is ours
                with self._lock:
                    q = self._pins.get(k)
                    if q:
                        q[0] += 1
                    else:
                        self._pins[k] = [1, p[1], p[2]]
            raise err

    def release(self, key: Key, forget: bool = False) -> None:
        """The owning sequence ended: the block stays cached unless `forget` (bytes freed, state kept)."""
        _check(self._lib.cxlt_block_release(self._h(), _key(key), 1 if forget else 0))

    def release_batch(self, keys: Iterable[Key], forget: bool = False) -> None:
        """release() of every key in one C call, checked whole first: on an error none is released."""
        ks = list(keys)
        n = len(ks)
        if n == 0:
            return
        ckeys = (N.KeyStruct * n)(*[_key(k) for k in ks])
        _check(self._lib.cxlt_block_release_batch(self._h(), ckeys, n, 1 if forget else 0))

    def move(self, key: Key, tier: int, wait: bool = False) -> Block:
        """Move a resident block to tier `tier` (rank); with `wait` the copy is done on return."""
        out = N.BlockStruct()
        ck = _key(key)
        _check(self._lib.cxlt_block_move(self._h(), ck, tier, N.MOVE_WAIT if wait else 0, ctypes.byref(out)))
        return Block(self, Key(ck.hi, ck.lo), out)

    def access(self, handles_or_keys: KeysOrBlocks, attention: Any = None) -> None:
        """Record one decode step's accesses in one C call.

        handles_or_keys: a numpy uint64 array of handles (1-D), a numpy array of keys (shape (n, 2)
        uint64, or KEY_DTYPE), or a list of Blocks (by handle) or of Keys. attention: n floats in
        [0, 1] (a float32 numpy array is used without a copy) or None (each counts as 1.0)."""
        rt, lib = self._h(), self._lib
        items = handles_or_keys
        keep = []  # the arrays the pointers point into, alive until the call returns
        if hasattr(items, "__array_interface__"):
            import numpy as np
            arr = np.ascontiguousarray(items)
            if arr.dtype == KEY_DTYPE and arr.ndim == 1:
                by_handle = False
            elif arr.dtype == np.uint64 and arr.ndim == 2 and arr.shape[1] == 2:
                by_handle = False
            elif arr.dtype == np.uint64 and arr.ndim == 1:
                by_handle = True
            else:
                raise InvalidArgumentError(f"access: expected uint64 handles (n,) or keys (n, 2), got {arr.dtype} "
                                           f"{arr.shape}")
            n, ptr = arr.shape[0], arr.ctypes.data
            keep.append(arr)
        else:
            items = list(items)
            n = len(items)
            by_handle = bool(items) and isinstance(items[0], Block)
            if by_handle:
                carr = (ctypes.c_uint64 * n)(*(b.handle for b in items))
            else:
                carr = (N.KeyStruct * n)(*(_key(k) for k in items))
            ptr = ctypes.addressof(carr)
            keep.append(carr)
        aptr = None
        if attention is not None:
            if hasattr(attention, "__array_interface__"):
                import numpy as np
                att = np.ascontiguousarray(attention, dtype=np.float32)
                if att.ndim != 1 or att.shape[0] != n:
                    raise InvalidArgumentError(f"access: {n} blocks but attention has shape {att.shape}")
                aptr = att.ctypes.data
            else:
                att = (ctypes.c_float * n)(*attention)
                if len(attention) != n:
                    raise InvalidArgumentError(f"access: {n} blocks but {len(attention)} attention values")
                aptr = ctypes.addressof(att)
            keep.append(att)
        fn = lib.cxlt_block_access_handles if by_handle else lib.cxlt_block_access
        _check(fn(rt, ptr if n else None, aptr, n))

    def policy_state(self, key: Key) -> PolicyState:
        """The block's policy state, resident or not. NotFoundError if never seen."""
        out = N.PolicyStateStruct()
        _check(self._lib.cxlt_runtime_policy_state(self._h(), _key(key), ctypes.byref(out)))
        return PolicyState(out.score, out.last_access_step, out.accesses, out.tier)

    # --- clock, background work, persistence
    def step(self) -> None:
        """Advance the decode clock by one step."""
        _check(self._lib.cxlt_runtime_step(self._h()))

    @property
    def current_step(self) -> int:
        out = ctypes.c_uint64()
        _check(self._lib.cxlt_runtime_current_step(self._h(), ctypes.byref(out)))
        return out.value

    def wait_idle(self, timeout_ms: int = -1) -> None:
        """Wait until no migration is queued or in flight (-1: forever). TimedOutError past the deadline."""
        _check(self._lib.cxlt_runtime_wait_idle(self._h(), timeout_ms))

    def checkpoint(self) -> None:
        """Write the score-store checkpoint now (needs store.path)."""
        _check(self._lib.cxlt_runtime_checkpoint(self._h()))

    # --- introspection
    def stats(self) -> Dict[str, Any]:
        """The counters since open, as the dict of cxlt_stats_json."""
        rt, lib = self._h(), self._lib
        need = ctypes.c_size_t(1 << 14)
        while True:
            cap = need.value
            buf = ctypes.create_string_buffer(cap)
            rc = lib.cxlt_stats_json(rt, buf, cap, ctypes.byref(need))
            if rc == 0:
                return json.loads(buf.value.decode())
            if need.value <= cap:
                _check(rc)

    def tiers(self) -> List[TierInfo]:
        """Every tier, fastest first, with its occupancy now."""
        rt, lib = self._h(), self._lib
        n = ctypes.c_size_t()
        _check(lib.cxlt_runtime_tier_count(rt, ctypes.byref(n)))
        out = []
        for r in range(n.value):
            t = N.TierInfoStruct()
            _check(lib.cxlt_runtime_tier_info(rt, r, ctypes.byref(t)))
            out.append(TierInfo(t.rank, lib.cxlt_tier_kind_name(t.kind).decode(), t.name.decode(),
                                t.backend.decode(), t.budget_bytes, t.used_bytes, t.blocks, t.bandwidth_mib_s,
                                t.latency_ns, bool(t.emulated)))
        return out


def _key_dtype():
    try:
        import numpy as np
    except ImportError:
        return None
    return np.dtype([("hi", "<u8"), ("lo", "<u8")])


KEY_DTYPE = _key_dtype()
"""The numpy dtype of a key array (cxlt_key_t); None without numpy."""


def keys_array(keys: Iterable[Key]):
    """A numpy array of keys (KEY_DTYPE), for access() by key."""
    import numpy as np
    return np.array([tuple(k) for k in keys], dtype=KEY_DTYPE)
