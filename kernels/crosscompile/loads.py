"""Global loads: how many bits each `ld.global` instruction of a build's PTX moves into one thread.

A warp's 32 threads load together. Where each thread's elements are contiguous and 16-byte aligned,
Triton gives each thread one 128-bit vector load per 16 bytes (`ld.global.v4.b32`: four 32-bit
registers, 8 bf16 or 4 fp32 elements), and the warp's loads cover 512 contiguous bytes. A thread with
fewer contiguous bytes gets narrower loads (`ld.global.v2.b32`, `ld.global.b32`), and a strided
access one load per element (`ld.global.b16` in bf16). Read from the PTX the compiler wrote, so it
is what the kernel does on the GPU at the launch's own BLOCK and num_warps, whatever its source says.
"""

from __future__ import annotations

import re

# A vector load of 16 bytes per thread (ld.global.v4.b32): the widest in Triton 3.7.1's builds of the reference
# GeLU on sm_80, sm_90 and sm_100, in fp32 (8 elements per thread: two of them) as in bf16 and fp16.
VECTOR_BITS = 128
# ld.global, its qualifiers (.nc, .L1::evict_last, .L2::64B, .v4, ...) and its type (.b32, .f16, ...).
_LOAD = re.compile(r"\bld\.global((?:\.[\w:]+)+)")
_VECTOR = re.compile(r"v(\d+)")
_TYPE = re.compile(r"[bfsu](\d+)")


def global_load_bits(ptx: str) -> list[int]:
    """The bits each `ld.global` instruction of `ptx` loads per thread (vector length x type width), in
    the order of the PTX: 128 for `ld.global.v4.b32`, 64 for `.v2.b32`, 16 for `.b16`."""
    found = []
    for qualifiers in _LOAD.findall(ptx):
        parts = qualifiers.split(".")[1:]
        vector = next((int(m.group(1)) for m in map(_VECTOR.fullmatch, parts) if m), 1)
        width = next((int(m.group(1)) for m in map(_TYPE.fullmatch, reversed(parts)) if m), None)
        if width is not None:
            found.append(vector * width)
    return found
