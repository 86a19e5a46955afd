"""The GPUs the course talks about: peak FLOP/s, HBM bandwidth and capacity, SM count, ridge points.

    from kernels.hardware import gpu
    h100 = gpu("H100")                 # lookup by name: case, spaces and hyphens do not matter
    h100.bf16_flops_per_sec            # 989.4e12 (dense: no 2:4 sparsity)
    h100.ridge_point()                 # ≈ 295 FLOP/byte: below it a kernel is memory-bound
    h100.ridge_point("fp8")            # ≈ 591: fp8 doubles the tensor cores' roof (Hopper and later)

Every figure is the vendor's dense figure, from NVIDIA's public datasheets (cited per GPU below).
Capacities are the vendor's decimal gigabytes (80 GB = 80e9 bytes), which is also how the
lecture counts ("8 × 80 GB holds 40B parameters"); nvidia-smi reports a little more or less usable memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GB = 10**9


@dataclass(frozen=True)
class GPU:
    """One accelerator's peak figures. Rates are per second; capacities and bandwidths are in bytes."""

    name: str
    bf16_flops_per_sec: float  # dense bf16 tensor-core peak
    fp32_flops_per_sec: float  # fp32 without tensor cores
    hbm_bandwidth_bytes_per_sec: float
    hbm_bytes: int
    num_sms: int
    fp8_flops_per_sec: float | None = None  # dense fp8 tensor-core peak; None: no fp8 tensor cores (the A100)

    def peak_flops_per_sec(self, dtype: str = "bf16") -> float:
        """The peak for "bf16" or "fp8" (tensor cores) or "fp32" (CUDA cores)."""
        peaks = {"bf16": self.bf16_flops_per_sec, "fp8": self.fp8_flops_per_sec, "fp32": self.fp32_flops_per_sec}
        if dtype not in peaks:
            raise ValueError(f"dtype must be one of {sorted(peaks)}, got {dtype!r}")
        if peaks[dtype] is None:
            raise ValueError(f"the {self.name} has no {dtype} tensor cores (they came with Hopper, sm_90)")
        return peaks[dtype]

    def ridge_point(self, dtype: str = "bf16") -> float:
        """FLOP/byte where the roofline bends: peak FLOP/s over bandwidth. Below it, memory-bound."""
        return self.peak_flops_per_sec(dtype) / self.hbm_bandwidth_bytes_per_sec


GPUS: tuple[GPU, ...] = (
    # NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM: 312e12 bf16, 19.5e12 fp32, 80 GB HBM2e at
    # 2.0e12 B/s; 108 SMs (NVIDIA A100 architecture whitepaper: the full GA100 die has 128).
    GPU("A100 SXM 80GB", 312e12, 19.5e12, 2.0e12, 80 * GB, 108),
    # NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: 989.4e12 bf16 dense (the datasheet's 1979e12 is
    # with 2:4 sparsity; the lecture writes 1979e12 / 2), 67e12 fp32, 80 GB HBM3 at 3.35e12 B/s; 132 SMs
    # (NVIDIA H100 architecture whitepaper); fp8 1978.9e12 dense (the datasheet's 3958e12 with sparsity).
    GPU("H100 SXM", 989.4e12, 67e12, 3.35e12, 80 * GB, 132, 1978.9e12),
    # NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: the H100's compute with 141 GB of HBM3e at
    # 4.8e12 B/s, 132 SMs.
    GPU("H200 SXM", 989.4e12, 67e12, 4.8e12, 141 * GB, 132, 1978.9e12),
    # NVIDIA HGX B200 datasheet, per GPU: 2.25e15 bf16 dense (4.5e15 sparse), 180 GB of HBM3e at
    # 8e12 B/s; fp32 "about 75e12 to 80e12" depending on the datasheet: we take the lower; 148 SMs; fp8
    # 4.5e15 dense (9e15 sparse).
    GPU("B200", 2.25e15, 75e12, 8e12, 180 * GB, 148, 4.5e15),
)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def gpu(name: str) -> GPU:
    """The GPU whose name starts with `name` ("H100", "h100-sxm", "A100"), ignoring case and punctuation."""
    matches = [g for g in GPUS if _key(g.name).startswith(_key(name))] if _key(name) else []
    if len(matches) != 1:
        known = ", ".join(g.name for g in GPUS)
        what = "matches several GPUs" if matches else "matches no GPU"
        raise ValueError(f"{name!r} {what}; known GPUs: {known}")
    return matches[0]


# The GPU targets the course compiles for (kernels.crosscompile), by their compute capability as Triton's
# GPUTarget takes it: 80 is 8.0 (Ampere, the A100), 90 is 9.0 (Hopper), 100 is 10.0 (Blackwell).
TARGETS = {"sm_80": 80, "sm_90": 90, "sm_100": 100}
# Shared memory one thread block may use, at most, by compute capability (CUDA C++ Programming Guide,
# "Compute Capabilities", table "Technical Specifications per Compute Capability": 163 KB for 8.0,
# 227 KB for 9.0 and for 10.0; NVIDIA's KB there are KiB). kernels.crosscompile compares each build's
# shared memory with it: Triton itself checks only at launch, on the GPU.
SHARED_MEMORY_PER_BLOCK = {"sm_80": 163 * 1024, "sm_90": 227 * 1024, "sm_100": 227 * 1024}
# The course's GPUs by architecture, for messages.
ARCHITECTURE_GPUS = {"sm_80": "A100", "sm_90": "H100, H200", "sm_100": "B200"}
# Each architecture's own tensor-core instruction, as its PTX names it (kernels.crosscompile reads the PTX):
# Ampere's warp-level mma.sync; Hopper's wgmma.mma_async, issued by a warpgroup of 4 warps on 64 rows at a
# time, asynchronous, its operands in shared memory; Blackwell's tcgen05.mma, its accumulator in tensor memory.
# A newer GPU still runs the older instruction (a Hopper runs mma.sync), at a fraction of its rate: Triton
# 3.7.1 falls back to mma.sync on sm_90 when a tile has fewer than 64 rows or num_warps is not a multiple of 4,
# and on sm_100 for tiles of 32 rows (its builds, read by kernels.crosscompile).
TENSOR_CORE_INSTRUCTION = {"sm_80": "mma.sync", "sm_90": "wgmma", "sm_100": "tcgen05"}
# Launch limits, the same for 8.0, 9.0 and 10.0 (same table): at most 1024 threads per block and 64K
# 32-bit registers per block (and per SM). A kernel built for more threads (num_warps=64 asks for 2048)
# or registers x threads above 64K cannot launch; Triton finds out only at launch, on the GPU.
MAX_THREADS_PER_BLOCK = 1024
REGISTERS_PER_BLOCK = 64 * 1024
