"""The compile check's dry run answers as a GPU, at import time too (kernels.crosscompile.dryrun).

Students pick a GPU path or an interpreter path in many ways: a module-level `ON_GPU =
torch.cuda.is_available()`, torch.cuda.get_device_capability(), get_device_properties(), a tensor's
device. Each must give the GPU's answer while the grader's compile check runs the host code, or the
check builds the path that never runs on a GPU (or nothing at all).
"""

import sys
import textwrap

import pytest
import torch

from kernels.crosscompile import report_problems

pytestmark = pytest.mark.triton

# A student's module: a matmul that takes its tensor-core path where a module-level flag says a GPU, else
# the interpreter's (operands upcast to fp32, an IEEE dot: no tensor cores), and whose kernel reads that flag
# too; and one that sizes its tiles by the compute capability and its grid by the SM count, read when the
# module is imported.
STUDENT = '''
import kernels  # noqa: F401
import torch
import triton
import triton.language as tl

ON_GPU = torch.cuda.is_available()
CAPABILITY = torch.cuda.get_device_capability() if ON_GPU else (0, 0)
SMS = torch.cuda.get_device_properties(0).multi_processor_count if ON_GPU else 1
TENSOR_CORES = tl.constexpr(ON_GPU)  # read by the kernel itself: the build must see the GPU's module too


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, N, BLOCK: tl.constexpr, DOT_FP32: tl.constexpr, SMS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + rows[:, None] * N + cols[None, :])
    b = tl.load(b_ptr + cols[:, None] * N + cols[None, :])
    if DOT_FP32 or not TENSOR_CORES:
        acc = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        acc = tl.dot(a, b)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty))


def matmul_where_a_gpu_is(a, b):
    c = torch.empty_like(a)
    _mm_kernel[(a.shape[0] // 64,)](a, b, c, a.shape[1], BLOCK=64, DOT_FP32=not ON_GPU, SMS=1)
    return c


def matmul_by_capability(a, b):
    block = 128 if CAPABILITY >= (9, 0) else 64
    tensor_cores = torch.cuda.get_device_capability(a.device) >= (8, 0)
    c = torch.empty_like(a)
    _mm_kernel[(a.shape[0] // block,)](a, b, c, a.shape[1], BLOCK=block, DOT_FP32=not tensor_cores, SMS=SMS)
    return c
'''


def student_request(tmp_path, monkeypatch, function: str, target: str) -> dict:
    """The grader's compile request for `function` of STUDENT (a package of tmp_path's, on the import path)."""
    if not (tmp_path / "dryrun_student").is_dir():
        (tmp_path / "dryrun_student").mkdir()
        (tmp_path / "dryrun_student" / "__init__.py").write_text("")
        (tmp_path / "dryrun_student" / "flags.py").write_text(STUDENT)
        monkeypatch.syspath_prepend(str(tmp_path))
    return dict(calls=[dict(module="dryrun_student.flags", function=function, args=[[256, 256], [256, 256]])],
                dtype="bf16", target=target)


def test_a_module_level_gpu_flag_builds_the_tensor_core_path(tmp_path, monkeypatch):
    """`ON_GPU = torch.cuda.is_available()` at import time: the student's module is imported inside the dry
    run, so the flag is True and the kernel built is the one a GPU runs, its dot on the tensor cores.
    Imported before the dry run (as on this CPU), it took the interpreter's path: an fp32 IEEE dot; and the
    build, which finds the kernel by its module's name, must find the module imported as on the GPU."""
    from kernels.crosscompile import run_request

    answer = run_request(student_request(tmp_path, monkeypatch, "matmul_where_a_gpu_is", "sm_90"))
    assert "error" not in answer, answer
    (launch,) = answer["launches"]
    assert {"name": "DOT_FP32", "constexpr": False} in launch["args"], launch
    (built,) = answer["builds"]
    assert built["ok"] and built["dots"] and built["tensor_cores"] == "wgmma", built
    assert report_problems(answer, "student", "sm_90", 227 * 1024, tensor_cores="no tensor cores") == []


def test_capability_and_properties_answer_for_the_target_at_import_time_in_each_request(tmp_path, monkeypatch):
    """get_device_capability() and get_device_properties() answer for the build target: sm_90 (an H100:
    132 SMs) takes 128-row tiles, sm_80 (an A100: 108 SMs) 64; both use the tensor cores. The two requests
    are answered by one process, and the module is imported anew for each, so the second sees its own target."""
    from kernels.crosscompile import run_request

    requests = [student_request(tmp_path, monkeypatch, "matmul_by_capability", target) for target in ("sm_90", "sm_80")]
    answers = run_request({"requests": requests})["answers"]
    for answer, target, block, sms, tensor_cores in zip(answers, ("sm_90", "sm_80"), (128, 64), (132, 108),
                                                         ("wgmma", "mma.sync")):
        assert "error" not in answer, answer
        (launch,) = answer["launches"]
        constexprs = {a["name"]: a.get("constexpr") for a in launch["args"] if "constexpr" in a}
        assert {k: constexprs.get(k) for k in ("BLOCK", "DOT_FP32", "SMS")} == dict(BLOCK=block, DOT_FP32=False,
                                                                                     SMS=sms), launch
        (built,) = answer["builds"]
        assert built["ok"] and built["target"] == target and built["tensor_cores"] == tensor_cores, built


def test_the_students_module_is_imported_anew_inside_the_dry_run_and_given_back_after(tmp_path, monkeypatch):
    """A module imported before the dry run (its flag a CPU's) is imported anew inside it, with the rest of
    its package (a sibling's flag too), and sys.modules holds the old modules again afterwards."""
    from kernels.crosscompile.dryrun import as_on_a_gpu, imported_anew

    package = tmp_path / "dryrun_flags"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text("import torch\nON_GPU = torch.cuda.is_available()\n")
    (package / "flags.py").write_text(textwrap.dedent("""\
        import torch
        from dryrun_flags.base import ON_GPU as BASE_ON_GPU
        ON_GPU = torch.cuda.is_available()
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import dryrun_flags.flags as before

    monkeypatch.setenv("TRITON_INTERPRET", "0")  # what the compiling subprocess runs with
    try:
        with as_on_a_gpu("sm_90"), imported_anew("dryrun_flags.flags"):
            import dryrun_flags.flags as inside

            assert inside is not before and inside.ON_GPU and inside.BASE_ON_GPU
        assert sys.modules["dryrun_flags.flags"] is before and sys.modules["dryrun_flags"].flags is before
        assert before.ON_GPU == torch.cuda.is_available()
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "dryrun_flags"]:
            del sys.modules[name]


def test_launching_nothing_says_the_check_answers_as_a_gpu():
    """A wrapper that launched nothing gets told that the check answers as a GPU, import time included, so
    that a student whose CPU fallback ran knows why."""
    (problem,) = report_problems({"launches": [], "builds": []}, "gelu_triton", "sm_90", 227 * 1024)
    assert problem.startswith("gelu_triton: launched no Triton kernel")
    assert "torch.cuda.is_available() is True" in problem and "import" in problem
    assert "kernels.device.interpreted()" in problem
