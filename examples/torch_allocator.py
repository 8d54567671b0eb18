#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch allocating its CUDA memory through cxltier (libcxltier_torch.so).

    python3 examples/torch_allocator.py [path/to/libcxltier_torch.so]

The library exports cxlt_torch_malloc / cxlt_torch_free with the signatures PyTorch's
pluggable allocator wants; PyTorch must be switched to it before its first CUDA allocation.
The script allocates per-layer K/V tensors shaped as an engine's paged KV cache, writes and
reads them, runs a matrix product on allocator memory, and prints what the allocator reserved.

NEVER RUN (2026-11-30): written on a machine with neither PyTorch nor a GPU. It exits 77
(skipped) when PyTorch or a CUDA device is missing; tests/gpu/run-on-gpu.sh runs it on a GPU.
"""
import ctypes
import os
import sys

SKIP = 77


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    lib = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "build", "tiers", "cuda", "libcxltier_torch.so")
    lib = os.path.abspath(lib)
    if not os.path.exists(lib):
        print(f"skipped: {lib} does not exist (build with the CUDA tier: meson -Dcuda=enabled)")
        return SKIP
    try:
        import torch
    except ImportError:
        print("skipped: PyTorch is not installed")
        return SKIP
    if not torch.cuda.is_available():
        print("skipped: PyTorch sees no CUDA device")
        return SKIP

    # Before any CUDA tensor exists: PyTorch refuses to switch allocators afterwards.
    allocator = torch.cuda.memory.CUDAPluggableAllocator(lib, "cxlt_torch_malloc", "cxlt_torch_free")
    torch.cuda.memory.change_current_allocator(allocator)

    # The same library object (dlopen returns the loaded copy), for its statistics.
    stats_lib = ctypes.CDLL(lib)
    stats_lib.cxlt_torch_stats.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64)]
    stats_lib.cxlt_torch_stats.restype = ctypes.c_int

    def stats():
        reserved, allocated = ctypes.c_uint64(), ctypes.c_uint64()
        if stats_lib.cxlt_torch_stats(torch.cuda.current_device(), ctypes.byref(reserved), ctypes.byref(allocated)) != 0:
            raise RuntimeError("cxlt_torch_stats failed")
        return reserved.value, allocated.value

    # A paged KV cache as engines keep it: per layer one tensor [K/V, blocks, tokens, heads, dim].
    layers, blocks, tokens, heads, dim = 8, 64, 16, 8, 128
    kv = [torch.empty((2, blocks, tokens, heads, dim), dtype=torch.bfloat16, device="cuda") for _ in range(layers)]
    for i, t in enumerate(kv):
        t.fill_(float(i % 7))
    x = torch.randn(2048, 2048, device="cuda")
    y = x @ x
    torch.cuda.synchronize()
    for i, t in enumerate(kv):
        expect = float(i % 7) * t.numel()
        got = float(t.float().sum().item())
        if abs(got - expect) > 1e-3 * max(1.0, expect):
            print(f"FAILED: layer {i} sums to {got}, expected {expect}")
            return 1
    if not torch.isfinite(y).all():
        print("FAILED: the matrix product is not finite")
        return 1
    reserved, allocated = stats()
    kv_bytes = sum(t.numel() * t.element_size() for t in kv)
    print(f"cxltier allocator: {len(kv)} KV tensors ({kv_bytes / 2**20:.1f} MiB) and a 2048x2048 product; "
          f"reserved {reserved / 2**20:.1f} MiB, handed out {allocated / 2**20:.1f} MiB")
    if allocated < kv_bytes:
        print("FAILED: the allocator handed out less than the tensors hold")
        return 1
    del kv, x, y
    torch.cuda.synchronize()
    reserved, allocated = stats()
    print(f"after freeing: reserved {reserved / 2**20:.1f} MiB, handed out {allocated / 2**20:.1f} MiB")
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
