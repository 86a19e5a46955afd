"""kernels.crosscompile: the project's Triton kernels built for a GPU on a machine without one.

The build subset here (sm_90, bf16, d 64, each kernel's first config) is what `make test` runs so that
a change which breaks the GPU build fails CI; `make gpu-compile` builds the whole matrix.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels.crosscompile import (build_problems, narrow_load_problems, pipeline_problems, report_problems,
                                  require_compiler)
from kernels.crosscompile.loads import global_load_bits
from kernels.hardware import SHARED_MEMORY_PER_BLOCK

pytestmark = pytest.mark.triton
ROOT = Path(__file__).resolve().parents[2]
FLASH_KERNELS = {"_flash_fwd_kernel", "_flash_bwd_preprocess_kernel", "_flash_bwd_dkdv_kernel", "_flash_bwd_dq_kernel"}
GPU_KERNELS = {"_gelu_tanh_kernel", "_softmax_kernel", "_matmul_kernel"}


def test_every_kernel_builds_for_an_h100_in_bf16(tmp_path):
    """The quick matrix exits 0; every FlashAttention kernel, demo and gpu_kernels kernel is built, fits in
    227 KiB, and the kernels with a dot use wgmma (Hopper's tensor-core instruction)."""
    out = tmp_path / "builds.json"
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-m", "kernels.crosscompile", "--quick", "--jobs", "1", "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    builds = json.loads(out.read_text())
    assert {b["kernel"] for b in builds} == FLASH_KERNELS | GPU_KERNELS | {"_add_kernel", "_gelu_kernel"}
    for b in builds:
        assert b["ok"] and b["target"] == "sm_90" and 0 <= b["shared_bytes"] <= 227 * 1024, b
        assert 0 < b["registers"] <= 255 and b["spill_bytes"] >= 0, b
        assert b["tensor_cores"] == ("wgmma" if b["dots"] else ""), b
    assert {b["kernel"] for b in builds if b["dots"]} == FLASH_KERNELS - {"_flash_bwd_preprocess_kernel"} | {
        "_matmul_kernel"}
    forward = [b for b in builds if b["kernel"] == "_flash_fwd_kernel"]
    assert forward and all(b["spill_bytes"] == 0 for b in forward), "the forward spills registers on an H100 at d 64"
    assert "_flash_fwd_kernel" in done.stdout and "0 with problems" in done.stdout


def test_an_interpreted_process_is_refused_with_what_to_do():
    """This pytest process interprets Triton on a CPU; building here would be wrong, so it is refused."""
    if torch.cuda.is_available():
        pytest.skip("on a GPU machine Triton is not interpreted")
    with pytest.raises(RuntimeError, match="python -m kernels.crosscompile"):
        require_compiler()


def test_the_shared_memory_limits_are_the_programming_guides():
    assert SHARED_MEMORY_PER_BLOCK == {"sm_80": 163 * 1024, "sm_90": 227 * 1024, "sm_100": 227 * 1024}


def test_a_build_is_judged_from_plain_data():
    ok = dict(target="sm_90", ok=True, shared_bytes=100 * 1024, dots=2, tensor_cores="wgmma")
    assert build_problems(ok, 227 * 1024) == []
    assert build_problems({**ok, "shared_bytes": 240 * 1024}, 227 * 1024) == [
        "shared memory 240 KiB > 227 KiB on sm_90: smaller tiles or fewer stages"]
    assert build_problems({**ok, "num_warps": 8, "threads": 256, "registers": 255}, 227 * 1024) == []
    assert "65792 > 65536 registers" in build_problems({**ok, "threads": 256, "registers": 257}, 227 * 1024)[0]
    assert "without tensor-core instructions" in build_problems({**ok, "tensor_cores": ""}, 227 * 1024)[0]
    assert build_problems({**ok, "shared_bytes": None}, 227 * 1024) == ["no shared-memory size reported"]
    failed = dict(target="sm_90", ok=False, error="boom", where="k.py:3", source_line="x = 1")
    assert build_problems(failed, 227 * 1024) == ["does not compile for sm_90: boom (at k.py:3: x = 1)"]


def test_the_launch_recorder_captures_types_and_constexprs():
    from kernels import demos
    from kernels.launches import record_launches

    x = torch.randn(100, dtype=torch.float32, device="cuda" if torch.cuda.is_available() else "cpu")
    with record_launches() as launches:
        demos.add(x, x)
    (launch,) = launches.launches
    assert launch["name"] == "_add_kernel" and launch["module"] == "kernels.demos"
    assert launch["args"] == [{"name": "x_ptr", "type": "*fp32"}, {"name": "y_ptr", "type": "*fp32"},
                              {"name": "out_ptr", "type": "*fp32"}, {"name": "n", "type": "i32"},
                              {"name": "BLOCK", "constexpr": 1024}]


TUTORIAL = "tests.tooling.crosscompile_kernels"


@pytest.fixture
def warm_compiler(monkeypatch):
    """run_request answered by this test process's warm compiler (kernels.crosscompile.server, tests/pytest_run.py's)
    where it would start a new process: the tests of what a build gives. The tests of run_request's own processes
    (a worker with or without Triton, or with a GPU in reach) do without it."""
    from kernels.crosscompile.request import SERVER_VARIABLE
    from tests.pytest_run import compile_server

    monkeypatch.setenv(SERVER_VARIABLE, compile_server())


def compile_calls(calls: list, target: str) -> dict:
    """The grader's compile request for `calls` (name, kwargs) of tests/tooling/crosscompile_kernels.py."""
    from kernels.crosscompile import run_request

    shapes = {"tutorial_matmul": [[512, 512], [512, 512]], "scale_where_a_gpu_is": [[4096]]}
    return run_request(dict(calls=[dict(module=TUTORIAL, function=name, args=shapes[name], kwargs=kwargs)
                                   for name, kwargs in calls], dtype="bf16", target=target))


def test_builds_are_specialised_as_a_launch_is_so_shared_memory_grows_with_the_stages(warm_compiler):
    """A GPU launch makes unit strides constants and marks 16-divisible pointers and sizes; only then is the
    K loop pipelined (cp.async on sm_80) with a shared-memory buffer per stage. Unspecialised, the tutorial
    matmul took 32 KiB at every stage count."""
    answer = compile_calls([("tutorial_matmul", dict(num_stages=stages)) for stages in (1, 3, 4)], "sm_80")
    assert "error" not in answer, answer
    a_ptr, *_, stride_ak = answer["launches"][0]["args"][:8]
    assert a_ptr == {"name": "a_ptr", "type": "*bf16", "divisibility": 16}
    assert stride_ak == {"name": "stride_ak", "type": "i32", "constexpr": 1}
    shared = {b["num_stages"]: b["shared_bytes"] for b in answer["builds"]}
    assert shared[3] > shared[1] and shared[4] > shared[3], shared
    assert all(b["async_copies"] and b["tensor_cores"] == "mma.sync" for b in answer["builds"] if b["num_stages"] > 1)


def test_a_build_that_cannot_launch_on_the_course_gpu_fails_naming_its_config(warm_compiler):
    """Planted: stage buffers over 227 KiB (256 x 256 x 128 tiles, 4 stages), 64 warps (2048 threads per block),
    and 32-bit offsets (pid * BLOCK in int32, as the tutorial matmul has them too); the right scale kernel passes."""
    answer = compile_calls([("tutorial_matmul", dict(block_m=256, block_n=256, block_k=128, num_stages=4)),
                            ("scale_where_a_gpu_is", dict(num_warps=64)), ("scale_where_a_gpu_is", {}),
                            ("scale_where_a_gpu_is", dict(wide=False))], "sm_90")
    problems = report_problems(answer, "planted", "sm_90", 227 * 1024, int64_offsets="use int64")
    assert len(problems) == 4, problems
    assert problems[0].startswith("_tutorial_matmul_kernel (planted): shared memory 512 KiB > 227 KiB on sm_90 at "
                                  "BLOCK_M=256, BLOCK_N=256, BLOCK_K=128, 8 warps, 4 stages"), problems
    assert problems[1].startswith("_tutorial_matmul_kernel (planted): 32-bit offsets at crosscompile_kernels.py:")
    assert "2048 threads per block (64 warps of 32) > 1024 on sm_90" in problems[2] and "num_warps <= 32" in problems[2]
    assert problems[3] == "_scale_kernel (planted): 32-bit offsets at crosscompile_kernels.py:50: use int64"


def test_each_global_load_is_read_from_the_ptx_with_its_width_per_thread(warm_compiler):
    """The scale kernel (BLOCK = 1024, bf16) at 4 warps gives each thread 8 elements, 16 bytes: one 128-bit load;
    at 8 warps 4 elements: one 64-bit load, which the load check names with the config; at 32 warps 1 element."""
    answer = compile_calls([("scale_where_a_gpu_is", {}), ("scale_where_a_gpu_is", dict(num_warps=8)),
                            ("scale_where_a_gpu_is", dict(num_warps=32))], "sm_90")
    assert [(b["num_warps"], b["load_bits"]) for b in answer["builds"]] == [(4, [128]), (8, [64]), (32, [16])]
    assert narrow_load_problems({"builds": answer["builds"][:1]}, "planted", "sm_90", "hint") == []
    problems = narrow_load_problems(answer, "planted", "sm_90", "hint")
    assert problems == [
        "_scale_kernel (planted): its global loads at BLOCK=1024, 8 warps, 3 stages: 1 load of 64 bits per thread; "
        "each should be 128 bits (ld.global.v4.b32, 16 bytes). hint",
        "_scale_kernel (planted): its global loads at BLOCK=1024, 32 warps, 3 stages: 1 load of 16 bits per thread; "
        "each should be 128 bits (ld.global.v4.b32, 16 bytes). hint"], problems


def test_hoppers_own_instructions_are_read_from_the_ptx_of_each_build(warm_compiler):
    """Built for sm_90 (Triton 3.7.1): 128-row tiles at 8 warps and 64-row at 4 give wgmma, 32-row tiles or 2
    warps give Ampere's mma.sync; 2 stages or more copy the tiles by cp.async, 1 stage does not. The pipeline
    check passes the first and names what each other lacks, with its config."""
    cases = [dict(), dict(block_m=64, num_warps=4, num_stages=4), dict(block_m=32, num_warps=4),
             dict(block_m=64, block_n=64, num_warps=2), dict(num_stages=1), dict(num_stages=2)]
    answer = compile_calls([("tutorial_matmul", kwargs) for kwargs in cases], "sm_90")
    assert [(b["tensor_cores"], b["async_copies"]) for b in answer["builds"]] == [
        ("wgmma", True), ("wgmma", True), ("mma.sync", True), ("mma.sync", True), ("wgmma", False), ("wgmma", True)]
    good = {"builds": [answer["builds"][i] for i in (0, 1, 5)]}
    assert pipeline_problems(good, "planted", "sm_90", "CORES", "STAGES") == []
    problems = pipeline_problems(answer, "planted", "sm_90", "CORES", "STAGES")
    assert problems == [
        "_tutorial_matmul_kernel (planted): its tl.dot compiles to mma.sync at BLOCK_M=32, BLOCK_N=128, BLOCK_K=64, "
        "4 warps, 3 stages, not wgmma, sm_90's own tensor-core instruction. CORES",
        "_tutorial_matmul_kernel (planted): its tl.dot compiles to mma.sync at BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, "
        "2 warps, 3 stages, not wgmma, sm_90's own tensor-core instruction. CORES",
        "_tutorial_matmul_kernel (planted): no cp.async in its PTX at BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, 8 warps, "
        "1 stages: its tiles are loaded by the threads that then wait for them, with no copy in flight ahead of the "
        "tl.dot. STAGES"], problems


def test_the_kernel_table_says_whether_its_dotted_builds_copy_by_cp_async():
    """`make gpu-compile`'s row per kernel: "yes" when every build with a dot has cp.async, "no" when none has,
    "some" when some configs are pipelined and others not, "-" for a kernel without a dot."""
    from types import SimpleNamespace

    from kernels.crosscompile.report import async_copies

    piped, plain = SimpleNamespace(async_copies=True), SimpleNamespace(async_copies=False)
    assert [async_copies(builds) for builds in ([piped, piped], [plain], [piped, plain], [])] == [
        "yes", "no", "some", "-"]


def test_the_pipeline_check_judges_a_report_from_plain_data():
    """A worker's report is untrusted data: an error, no builds, another target, a build that did not compile,
    a dot on another generation's instruction or none, cp.async missing or not a plain True, and a report
    whose builds have no tl.dot are each a problem, never a pass; a build without a dot beside one with it is
    not judged; each target asks for its own instruction."""
    good = dict(kernel="k", target="sm_90", ok=True, config="C", dots=1, tensor_cores="wgmma", async_copies=True)
    plain = dict(kernel="p", target="sm_90", ok=True, dots=0, tensor_cores="", async_copies=False)
    assert pipeline_problems({"builds": [good, plain]}, "w", "sm_90", "X", "Y") == []
    assert pipeline_problems({"builds": [{**good, "target": "sm_80", "tensor_cores": "mma.sync"}]},
                             "w", "sm_80", "X", "Y") == []
    assert pipeline_problems({"builds": [{**good, "target": "sm_100", "tensor_cores": "tcgen05"}]},
                             "w", "sm_100", "X", "Y") == []
    cases = [({"error": "host code failed"}, "w: host code failed"),
             ({"builds": []}, "w: the build report has no builds"), ([good], "w: the build report has no builds"),
             ({"builds": [{**good, "target": "sm_80"}]}, "w: a build for another target was reported"),
             ({"builds": [{**good, "ok": False}]}, "k (w): does not compile at C, so its instructions cannot be read"),
             ({"builds": [plain]}, "w: no build has a tl.dot"),
             ({"builds": [{**good, "tensor_cores": "mma.sync"}]},
              "k (w): its tl.dot compiles to mma.sync at C, not wgmma, sm_90's own tensor-core instruction. X"),
             ({"builds": [{**good, "tensor_cores": ""}]},
              "k (w): its tl.dot compiles to no tensor-core instruction at C, not wgmma, sm_90's own tensor-core "
              "instruction. X"),
             ({"builds": [{**good, "async_copies": "yes"}]},
              "k (w): no cp.async in its PTX at C: its tiles are loaded by the threads that then wait for them, with "
              "no copy in flight ahead of the tl.dot. Y"),
             ({"builds": [{**good, "async_copies": False}]},
              "k (w): no cp.async in its PTX at C: its tiles are loaded by the threads that then wait for them, with "
              "no copy in flight ahead of the tl.dot. Y")]
    for answer, problem in cases:
        assert pipeline_problems(answer, "w", "sm_90", "X", "Y") == [problem], answer


def test_the_load_widths_are_read_from_every_form_of_a_global_load():
    """Vector length times type width, whatever cache qualifiers come between; loads from other state spaces and
    stores are not global loads."""
    ptx = """
        @%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
        ld.global.L1::evict_last.v2.b32 { %r5, %r6 }, [ %rd2 + 0 ];
        @%p2 ld.global.nc.L2::64B.b16 { %rs1 }, [ %rd3 + 0 ];
        ld.global.v2.f64 {%fd1, %fd2}, [%rd4];
        ld.param.u64 %rd5, [kernel_param_0];
        ld.shared.v4.b32 { %r7, %r8, %r9, %r10 }, [ %r11 + 0 ];
        st.global.v4.b32 [ %rd6 + 0 ], { %r1, %r2, %r3, %r4 };
    """
    assert global_load_bits(ptx) == [128, 64, 16, 128]


def test_the_load_check_judges_a_report_from_plain_data():
    """A worker's report is untrusted data: an error, no builds, a build for another target, one that did not
    compile, one without widths or without a global load are each a problem, never a pass."""
    good = dict(kernel="k", target="sm_90", ok=True, config="BLOCK=1024, 4 warps, 3 stages", load_bits=[128, 128])
    assert narrow_load_problems({"builds": [good]}, "w", "sm_90", "hint") == []
    cases = [({"error": "host code failed"}, "w: host code failed"),
             ({"builds": []}, "w: the build report has no builds"), ([good], "w: the build report has no builds"),
             ({"builds": [{**good, "target": "sm_80"}]}, "w: a build for another target was reported"),
             ({"builds": [{**good, "ok": False}]}, "k (w): does not compile at BLOCK=1024, 4 warps, 3 stages, so it "
                                                   "has no loads to read"),
             ({"builds": [{**good, "load_bits": "128"}]}, "k (w): no load widths reported"),
             ({"builds": [{**good, "load_bits": [128.0]}]}, "k (w): no load widths reported"),
             ({"builds": [{**good, "load_bits": []}]},
              "k (w): no global load in its PTX at BLOCK=1024, 4 warps, 3 stages")]
    for answer, problem in cases:
        assert narrow_load_problems(answer, "w", "sm_90", "hint") == [problem], answer
    mixed = {"builds": [{**good, "load_bits": [128, 16, 16]}]}
    assert narrow_load_problems(mixed, "w", "sm_90", "hint") == [
        "k (w): its global loads at BLOCK=1024, 4 warps, 3 stages: 2 loads of 16 bits, 1 load of 128 bits per thread; "
        "each should be 128 bits (ld.global.v4.b32, 16 bytes). hint"]


def test_the_dry_run_answers_as_a_gpu_and_restores_torch_after(monkeypatch):
    """Host code that asks torch.cuda.is_available(), get_device_capability(), get_device_name(),
    get_device_properties(), current_device(), x.is_cuda, x.device.type or kernels.device.interpreted() takes
    its GPU path in the dry run (the request above launched scale_where_a_gpu_is's kernel), answered for the
    build target's GPU; afterwards, and after an error inside, torch answers for this machine again."""
    from kernels.crosscompile.dryrun import as_on_a_gpu, gpu_answers
    from kernels.device import default_device, has_cuda, interpreted

    before, original = torch.cuda.is_available(), torch.cuda.is_available
    originals = {name: getattr(torch.cuda, name) for name in gpu_answers("sm_90")}
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # what the compiling subprocess runs with
    for target, capability, name, sms, shared in (("sm_90", (9, 0), "NVIDIA H100 SXM", 132, 227 * 1024),
                                                  ("sm_80", (8, 0), "NVIDIA A100 SXM 80GB", 108, 163 * 1024)):
        with pytest.raises(ZeroDivisionError), as_on_a_gpu(target):
            x = torch.empty(8, device="cuda")
            assert torch.cuda.is_available() and torch.cuda.device_count() == 1 and not interpreted()
            assert has_cuda() and default_device().type == "cuda" and torch.cuda.current_device() == 0
            assert x.is_cuda and x.device.type == "cuda" and x.device.index == 0
            assert torch.cuda.get_device_capability() == torch.cuda.get_device_capability(x.device) == capability
            assert torch.cuda.get_device_name() == torch.cuda.get_device_name(0) == name
            properties = torch.cuda.get_device_properties(x.device)
            assert (properties.name, (properties.major, properties.minor)) == (name, capability)
            assert properties.multi_processor_count == sms and properties.total_memory >= 80 * 10**9
            assert properties.shared_memory_per_block_optin == shared and torch.cuda.is_bf16_supported()
            with torch.cuda.device(x.device):
                torch.cuda.synchronize()
            1 / 0
        assert torch.cuda.is_available is original and torch.cuda.is_available() == before
        assert {name: getattr(torch.cuda, name) for name in originals} == originals
    if not before:
        with pytest.raises((RuntimeError, AssertionError)):
            torch.empty(8, device="cuda")
        with pytest.raises((RuntimeError, AssertionError)):
            torch.cuda.get_device_capability()


def test_several_requests_in_one_process_answer_as_each_alone_and_a_crash_costs_only_its_own(tmp_path, monkeypatch,
                                                                                             warm_compiler):
    """A request of several requests is answered by one compiler process, as a process per request answers
    each, whether it answers them two at a time (each in a child forked after the imports) or one after the
    other. A request whose module kills the process when imported costs only its own answer: the forked
    child dies alone; answered one after the other, the process dies, and run_requests answers every request
    alone, only the broken one saying so. Each process is a child of the warm compiler (the new process it stands
    for is tests/tooling/test_compile_server.py's)."""
    from kernels.crosscompile import run_request, run_requests
    from kernels.crosscompile.request import JOBS_VARIABLE

    shapes = {"scale_where_a_gpu_is": [[4096]]}
    requests = [dict(calls=[dict(module=TUTORIAL, function="scale_where_a_gpu_is", args=shapes["scale_where_a_gpu_is"],
                                 kwargs=kwargs)], dtype=dtype, target="sm_90")
                for dtype, kwargs in (("bf16", {}), ("fp16", dict(wide=False)))]
    monkeypatch.setenv(JOBS_VARIABLE, "2")
    batched = run_request({"requests": requests})["answers"]  # one process, the two requests at once
    alone = [run_request(one) for one in requests]
    strip = lambda answer: [{k: v for k, v in b.items() if k != "seconds"} for b in answer["builds"]]  # noqa: E731
    assert [strip(a) for a in batched] == [strip(a) for a in alone]
    assert [a["launches"] for a in batched] == [a["launches"] for a in alone]
    assert batched[0]["builds"][0]["kernel"] == "_scale_kernel" and batched[0]["builds"][0]["ok"]

    (tmp_path / "crash_on_import.py").write_text("import os\nos._exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    broken = dict(calls=[dict(module="crash_on_import", function="f", args=[[8]], kwargs={})], dtype="bf16",
                  target="sm_90")
    for jobs in ("2", "1"):
        monkeypatch.setenv(JOBS_VARIABLE, jobs)
        answers = run_requests([broken, requests[0]])
        assert strip(answers[1]) == strip(alone[0]), jobs
        assert "error" in answers[0] and "exit 3" in answers[0]["error"], (jobs, answers[0])


FORKED_REQUEST = """
import json, os, sys
import kernels  # an interpreted process, as the grader's worker, that has not imported Triton
from kernels.crosscompile import request as module, run_request
if sys.argv[2:] == ["gpu"]:  # as on a GPU machine, where this process could have started CUDA
    module._gpu_in_reach = lambda: True
read, write = os.pipe()  # stands for the worker's pipes to the grader
answers = [run_request(request) for request in json.loads(sys.argv[1])]
pipe = sorted({os.readlink(f"/proc/self/fd/{fd}") for fd in (read, write)})
print(json.dumps({"answers": answers, "pipe": pipe, "triton": "triton" in sys.modules}))
"""
SPY = """
import json, os, sys
with open(os.environ["SPY_NOTES"], "w") as notes:
    links = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    json.dump({"links": sorted(links), "argv": sys.argv,
               "interpret": os.environ.get("TRITON_INTERPRET")}, notes)
"""


def test_a_worker_without_triton_answers_from_a_forked_child_as_a_new_process_would(tmp_path):
    """run_request in an interpreted process that has not imported Triton (the grader's builds worker) answers
    from a child forked from it, with TRITON_INTERPRET=0 and none of its files open (a child that held the
    worker's pipes could answer the grader in its place); the answer is the new process's (the path taken
    where Triton is already imported)."""
    import triton  # noqa: F401  (here Triton is imported: run_request starts a new process)

    from kernels.crosscompile import run_request

    (tmp_path / "fd_spy.py").write_text(SPY)
    requests = [dict(calls=[dict(module=TUTORIAL, function="scale_where_a_gpu_is", args=[[4096]], kwargs={})],
                     dtype="bf16", target="sm_90"),
                dict(calls=[dict(module="fd_spy", function="absent", args=[[8]], kwargs={})], dtype="bf16",
                     target="sm_90")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]),
           "SPY_NOTES": str(tmp_path / "notes.json"), "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", FORKED_REQUEST, json.dumps(requests)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    forked = json.loads(done.stdout.splitlines()[-1])
    notes = json.loads((tmp_path / "notes.json").read_text())
    assert notes["argv"][0] == "-c" and notes["interpret"] == "0", notes  # a fork of the script, compiling
    assert forked["pipe"] and not set(forked["pipe"]) & set(notes["links"]), notes
    assert not forked["triton"]  # the worker itself still has not imported Triton
    assert "error" in forked["answers"][1] and "absent" in forked["answers"][1]["error"]
    strip = lambda answer: [{k: v for k, v in b.items() if k != "seconds"} for b in answer["builds"]]  # noqa: E731
    new_process = run_request(requests[0])
    assert strip(forked["answers"][0]) == strip(new_process) and forked["answers"][0]["builds"][0]["ok"]
    assert forked["answers"][0]["launches"] == new_process["launches"]


def test_a_worker_with_a_gpu_in_reach_answers_from_a_new_process(tmp_path):
    """The same worker on a GPU machine: a child forked from it could not use CUDA ("Cannot re-initialize
    CUDA in forked subprocess", which cost a GPU grading every build check), so the answer comes from a new
    process (`python -m kernels.crosscompile --request`), not a fork of the worker."""
    (tmp_path / "fd_spy.py").write_text(SPY)
    requests = [dict(calls=[dict(module="fd_spy", function="absent", args=[[8]], kwargs={})], dtype="bf16",
                     target="sm_90")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]),
           "SPY_NOTES": str(tmp_path / "notes.json"), "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", FORKED_REQUEST, json.dumps(requests), "gpu"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.splitlines()[-1])["answers"][0]
    notes = json.loads((tmp_path / "notes.json").read_text())
    assert notes["argv"][0] != "-c" and notes["interpret"] == "0", notes  # a new process, compiling
    assert "error" in answer and "absent" in answer["error"], answer


def test_a_students_tree_builds_what_is_written_and_names_the_stubs(tmp_path):
    """`make gpu-compile A=gpu_kernels` in the release: with GeLU written and the rest still stubs, GeLU's kernel
    is built for the GPU and softmax and matmul are named as not implemented yet, not an error; no
    flash_attention kernel is asked for."""
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "assignments", tree)
    shutil.copy(ROOT / "solutions" / "gpu_kernels" / "elementwise.py", tree / "gpu_kernels" / "elementwise.py")
    done = subprocess.run([sys.executable, "-m", "kernels.crosscompile", "--impl", str(tree), "--quick",
                           "--assignment", "gpu_kernels"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "_gelu_tanh_kernel" in done.stdout and "1 builds" in done.stdout and "0 with problems" in done.stdout
    skipped = [line for line in done.stdout.splitlines() if line.startswith("not built, not implemented yet")]
    assert [line.split(": ", 1)[1].split(" (")[0] for line in skipped] == ["gpu_kernels softmax", "gpu_kernels matmul"]
    assert "FlashAttention" not in done.stdout and "_add_kernel" not in done.stdout


def test_a_students_32_bit_offsets_are_named_as_the_grader_fails_them(tmp_path):
    """`make gpu-compile A=gpu_kernels` shows what the hidden build check fails: a softmax that multiplies the
    program id, still int32, by a stride is named with its file and line, and the run exits 1."""
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "assignments", tree)
    text = (ROOT / "solutions" / "gpu_kernels" / "softmax.py").read_text()
    assert text.count("tl.program_id(0).to(tl.int64)") == 1, "the reference's softmax changed: update the edit"
    (tree / "gpu_kernels" / "softmax.py").write_text(text.replace("tl.program_id(0).to(tl.int64)", "tl.program_id(0)"))
    done = subprocess.run([sys.executable, "-m", "kernels.crosscompile", "--impl", str(tree), "--quick",
                           "--assignment", "gpu_kernels"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    named = [line for line in done.stdout.splitlines() if "32-bit pointer offsets" in line]
    assert named and all(line.startswith("_softmax_kernel") and "softmax.py:" in line for line in named), done.stdout
    assert "with problems" in done.stdout and "0 with problems" not in done.stdout


def test_a_build_of_a_kernel_the_value_check_never_ran_is_a_problem():
    """unrun_kernel_problems: the kernels of a build report must be among those the value check launched; other
    configurations of the same kernels are fine, and a report without launches is left to report_problems."""
    from kernels.crosscompile import unrun_kernel_problems

    report = {"launches": [{"name": "_gelu_kernel", "options": {"num_warps": 8}}, {"name": "_decoy"}], "builds": []}
    problems = unrun_kernel_problems(report, "gelu_triton", ["_gelu_kernel", "_gelu_kernel"])
    assert len(problems) == 1 and "gelu_triton launches _decoy as on a GPU" in problems[0]
    assert "it launched _gelu_kernel)" in problems[0]
    assert unrun_kernel_problems(report, "gelu_triton", ["_decoy", "_gelu_kernel", "_other"]) == []
    assert "launched no kernel" in unrun_kernel_problems(report, "gelu_triton", [])[0]
    assert unrun_kernel_problems({"error": "failed when run as on a GPU"}, "gelu_triton", []) == []
