"""Scenarios of the flash_attention public tests: each drives the student's code and returns plain data.

They run where the student's code runs (in the grader's sandboxed worker when grading), import the
student's modules inside their bodies, and return only wire types. Tensors come and go on the CPU:
a scenario moves its inputs to `device` ("cpu" for the Triton interpreter, "cuda" on a GPU) and its
results back.
"""

import torch


def _on(device: str, *tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.to(device) for t in tensors]


def _cpu(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().to("cpu") for t in tensors]


def _autograd(function, q, k, v, do, is_causal: bool, device: str) -> dict:
    from kernels.stores import accounts, package_dir, record_stores

    leaves = [t.requires_grad_() for t in _on(device, q, k, v)]
    with record_stores(package_dir("flash_attention")) as stores:
        o = function.apply(*leaves, is_causal)
        dq, dk, dv = torch.autograd.grad(o, leaves, do.to(device))
    o, dq, dk, dv = _cpu(o, dq, dk, dv)
    return {"o": o, "dq": dq, "dk": dk, "dv": dv, "kernel_stores": accounts(stores, o=o, dq=dq, dk=dk, dv=dv)}


def pytorch_autograd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, is_causal: bool) -> dict:
    """o of FlashAttentionPytorch.apply and the gradients autograd gets through it for `do`."""
    from flash_attention.flash_pytorch import FlashAttentionPytorch

    return _autograd(FlashAttentionPytorch, q, k, v, do, is_causal, "cpu")


def triton_autograd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, is_causal: bool,
                    device: str) -> dict:
    """The same through FlashAttentionTriton.apply, on `device`."""
    from flash_attention.flash_triton import FlashAttentionTriton

    return _autograd(FlashAttentionTriton, q, k, v, do, is_causal, device)


def triton_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool, q_tile, k_tile,
                   device: str) -> dict:
    """(o, lse) of flash_forward_triton on `device` (tiles None: the implementation's defaults)."""
    from flash_attention.flash_triton import flash_forward_triton

    from kernels.stores import accounts, package_dir, record_stores

    with record_stores(package_dir("flash_attention")) as stores:
        o, lse = flash_forward_triton(*_on(device, q, k, v), is_causal=is_causal, q_tile=q_tile, k_tile=k_tile)
    o, lse = _cpu(o, lse)
    return {"o": o, "lse": lse, "kernel_stores": accounts(stores, o=o, lse=lse)}


def triton_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                    do: torch.Tensor, is_causal: bool, q_tile, k_tile, device: str) -> dict:
    """(dq, dk, dv) of flash_backward_triton on `device`."""
    from flash_attention.flash_triton import flash_backward_triton

    from kernels.stores import accounts, package_dir, record_stores

    with record_stores(package_dir("flash_attention")) as stores:
        grads = flash_backward_triton(*_on(device, q, k, v, o, lse, do), is_causal=is_causal, q_tile=q_tile,
                                      k_tile=k_tile)
    dq, dk, dv = _cpu(*grads)
    return {"dq": dq, "dk": dk, "dv": dv, "kernel_stores": accounts(stores, dq=dq, dk=dk, dv=dv)}


triton_autograd.stores = triton_forward.stores = triton_backward.stores = True


def pytorch_saved_tensors(seed: int, lead: list, n_queries: int, n_keys: int, head_dim: int) -> list:
    """Shape and dtype of every tensor FlashAttentionPytorch saves for backward (non-causal)."""
    from flash_attention.flash_pytorch import FlashAttentionPytorch

    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, n_queries, head_dim, generator=gen, requires_grad=True)
    k, v = (torch.randn(*lead, n_keys, head_dim, generator=gen, requires_grad=True) for _ in range(2))
    saved = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved.append({"shape": list(tensor.shape), "dtype": tensor.dtype})
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        FlashAttentionPytorch.apply(q, k, v, False)
    return saved


def pytorch_forward_memory(seed: int, n: int, head_dim: int, tile: int, is_causal: bool) -> dict:
    """Largest tensor and peak live bytes created by flash_forward_pytorch (one head, n x n), on CPU, and
    what it returned (so that the test can check that the memory was spent on the right answer)."""
    from kernels.memory import MemoryTracker

    from flash_attention.flash_pytorch import flash_forward_pytorch

    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, n, head_dim, generator=gen) for _ in range(3))
    with MemoryTracker("cpu") as mem:
        result = flash_forward_pytorch(q, k, v, is_causal, q_tile=tile, k_tile=tile)
    return {"largest_numel": mem.largest_numel, "peak_bytes": mem.peak_bytes, "result": result}


def pytorch_forward_matmul_flops(seed: int, n: int, head_dim: int, tile: int, is_causal: bool) -> int:
    """Matmul FLOPs that flash_forward_pytorch runs (torch's FlopCounterMode counts them)."""
    from torch.utils.flop_counter import FlopCounterMode

    from flash_attention.flash_pytorch import flash_forward_pytorch

    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, n, head_dim, generator=gen) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        flash_forward_pytorch(q, k, v, is_causal, q_tile=tile, k_tile=tile)
    return int(counter.get_total_flops())


def triton_launches(seed: int, n: int, head_dim: int, device: str) -> dict:
    """Names of the Triton kernels launched by flash_forward_triton and by flash_backward_triton."""
    from kernels.launches import record_launches

    from flash_attention.flash_triton import flash_backward_triton, flash_forward_triton

    gen = torch.Generator().manual_seed(seed)
    q, k, v, do = _on(device, *(torch.randn(1, n, head_dim, generator=gen) for _ in range(4)))
    with record_launches() as forward:
        o, lse = flash_forward_triton(q, k, v, is_causal=True)
    with record_launches() as backward:
        flash_backward_triton(q, k, v, o, lse, do, is_causal=True)
    return {"forward": list(forward.names), "backward": list(backward.names)}


def triton_attention_ms(batch: int, heads: int, n: int, head_dim: int, is_causal: bool, backward: bool,
                        warmup: int, rep: int) -> float:
    """Milliseconds of the Triton attention in bf16 on the GPU (do_bench), forward or forward+backward."""
    from kernels.bench import benchmark

    from flash_attention.flash_triton import FlashAttentionTriton, flash_forward_triton

    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(batch, heads, n, head_dim, device="cuda", dtype=torch.bfloat16, generator=gen)
                   for _ in range(4))
    if not backward:
        return benchmark(lambda: flash_forward_triton(q, k, v, is_causal), warmup=warmup, rep=rep)
    leaves = [t.requires_grad_() for t in (q, k, v)]
    return benchmark(lambda: torch.autograd.grad(FlashAttentionTriton.apply(*leaves, is_causal), leaves, do),
                     warmup=warmup, rep=rep)
