"""Build Triton kernels for a named NVIDIA GPU on a machine without one, and report on each build.

    python -m kernels.crosscompile                       # every kernel of solutions/ and kernels/, the full matrix
    python -m kernels.crosscompile --quick               # sm_90, bf16, d 64, each kernel's default config
    python -m kernels.crosscompile --request IN --out OUT  # JSON in, JSON out (the grader's compile check)

Triton compiles for a target named by its compute capability with no GPU and no driver: ptxas and
cuobjdump ship in the triton wheel. Per build the report says: whether it compiled (or the
compiler's message and the kernel's source line), the shared memory it needs against the
architecture's per-block limit (kernels.hardware.SHARED_MEMORY_PER_BLOCK; Triton checks it only at
launch), whether the PTX has tensor-core instructions (mma.sync, wgmma, tcgen05) where the kernel
has a dot, the bits each global load moves per thread (kernels.crosscompile.loads), registers and
stack bytes per thread (register spills) from the cubin, and the seconds it took. Spills are reported,
not failed: they cost speed, not correctness. Builds
are cached in Triton's cache (TRITON_CACHE_DIR), so a rerun takes seconds.

Which kernels, with which argument types and constexprs: host code is run as on a GPU (fake CUDA
tensors of the chosen dtype: torch's FakeTensorMode, no memory and no device) and each launch is
recorded, not run (kernels.launches, dry run). So the types, constexprs and tile sizes are those the
code would really launch on a GPU, bf16 inputs included. An autotuned kernel is built at each of its
configs.

Modules: dryrun (host code run on fake CUDA tensors, launches recorded), compiler (triton.compile
for a GPUTarget), report (judging builds, the tables), project (the project's kernels), request (the
grader's compile request, answered in a subprocess), server (a warm compiler whose forks answer a trusted
caller's requests instead of new processes: the suite's pytest runs); `python -m kernels.crosscompile` is
__main__.

This must run in a process where Triton compiles, not interprets. Importing `kernels` sets
TRITON_INTERPRET=1 on a machine without CUDA, so the command line is the entry point: it sets
TRITON_INTERPRET=0 before Triton is imported (and refuses if Triton was already imported interpreted).
An interpreted process (the grader's worker on a CPU) runs it as a subprocess: `run_request`.
"""

from kernels.crosscompile.compiler import (DEFAULT_OPTIONS, TARGETS, TENSOR_CORE_OPS, Build, BuildResult, build,
                                           builds_for, explain, jit_function, run_builds)
from kernels.crosscompile.dryrun import gpu_launches, interpreted, require_compiler, unique_launches
from kernels.crosscompile.project import DTYPES, GPU_KERNELS_CALLS, ROOT, matrix
from kernels.crosscompile.report import (build_problems, narrow_load_problems, pipeline_problems, print_table,
                                         report_problems, unrun_kernel_problems)
from kernels.crosscompile.request import BUILD_CPU_SECONDS, answer_request, run_request, run_requests

__all__ = ["DEFAULT_OPTIONS", "DTYPES", "GPU_KERNELS_CALLS", "ROOT", "TARGETS", "TENSOR_CORE_OPS", "Build",
           "BuildResult", "answer_request", "build", "build_problems", "builds_for", "explain", "gpu_launches",
           "interpreted", "jit_function", "matrix", "narrow_load_problems", "pipeline_problems", "print_table",
           "report_problems", "require_compiler", "run_builds", "run_request", "run_requests", "unique_launches",
           "unrun_kernel_problems", "BUILD_CPU_SECONDS"]
