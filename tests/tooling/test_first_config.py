"""A GPU grader's worker launches each autotuned kernel at its first config (kernels.first_config).

On a CPU, Triton's autotuner cannot time its configs (its benchmark needs a GPU driver), so a kernel with two
configs fails to launch there; at its first config alone it runs. That difference is what these tests
observe: the value the kernel stores is the BLOCK of the config it ran at.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="Triton is not installed (Linux only)")

from autograder.sandbox.process import RemoteStudent, StudentError  # noqa: E402
from kernels import first_config  # noqa: E402
from kernels.device import has_cuda  # noqa: E402
from tests.autograder.sandbox import fake  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(has_cuda(), reason="observes the autotuner that cannot time its configs on a CPU")

MODULE = textwrap.dedent('''
    import kernels  # noqa: F401
    import torch
    import triton
    import triton.language as tl


    @triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
    @triton.jit
    def store_block(out_ptr, n, BLOCK: tl.constexpr):
        tl.store(out_ptr + tl.arange(0, 1), tl.full((1,), BLOCK, tl.int32))


    def block_used(n=4):
        out = torch.zeros(1, dtype=torch.int32)
        store_block[(1,)](out, n)
        return int(out[0])


    def configs():
        return [c.kwargs["BLOCK"] for c in store_block.configs]
''')


@pytest.fixture
def tuned(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(fake.submission(tmp_path, "tuned", {"m": MODULE})))
    import importlib

    module = importlib.import_module("tuned.m")
    yield module
    first_config.restore()


def test_an_autotuned_kernel_runs_at_its_first_config_and_keeps_every_config(tuned):
    with pytest.raises(Exception):  # noqa: B017  (the autotuner's benchmark: no GPU driver here)
        tuned.block_used()
    assert first_config.launch_first_config()
    assert tuned.block_used() == 16 and tuned.block_used(n=8) == 16  # a new key: still the first config
    assert tuned.configs() == [16, 32], "the compile checks read every config"
    first_config.restore()
    with pytest.raises(Exception):  # noqa: B017
        tuned.block_used(n=16)


def test_the_launch_recorder_still_sees_every_config(tuned):
    from kernels.launches import record_launches

    first_config.launch_first_config()
    with record_launches(dry_run=True) as record:
        tuned.block_used()
    assert [c["kwargs"]["BLOCK"] for c in record.launches[0]["configs"]] == [16, 32]
    assert tuned.block_used() == 16, "the recorder put the pinned launch back"


def test_asked_before_triton_is_imported_it_imports_no_triton_and_patches_on_its_import(tmp_path):
    """A worker that has not imported Triton must not import it to pin (its compile checks fork only where
    Triton is not imported yet): the autotuner is patched when the submission first imports it."""
    code = textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {str(fake.submission(tmp_path, "tuned", {"m": MODULE}))!r})
        from kernels import first_config
        first_config.launch_first_config()
        assert not [name for name in sys.modules if name.startswith("triton")], "triton imported to pin"
        from tuned import m
        assert m.block_used() == 16 and m.configs() == [16, 32]
        import inspect
        import triton.runtime.autotuner as tuner
        assert "class Autotuner" in inspect.getsource(tuner), "the module's source is read as ever"
        print("pinned on import")
    ''')
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "pinned on import" in done.stdout, done.stderr[-3000:]


def test_only_the_graders_variable_asks_for_it_and_no_child_inherits_it(monkeypatch):
    monkeypatch.delenv(first_config.VARIABLE, raising=False)
    assert not first_config.requested()
    monkeypatch.setenv(first_config.VARIABLE, "1")
    assert first_config.requested()
    import os

    assert first_config.VARIABLE not in os.environ


@pytest.mark.parametrize("gpu", [True, False], ids=["gpu worker", "cpu worker"])
def test_a_gpu_worker_launches_at_the_first_config_and_a_cpu_worker_autotunes(tmp_path, gpu):
    """The grader's GPU worker (here on a CPU, where its Triton still interprets) runs the kernel at BLOCK 16;
    a CPU worker leaves the autotuner as it is, which cannot time configs here."""
    worker = fake.worker(tmp_path, "tuned", {"m": MODULE}, call_timeout=60, gpu=gpu)
    try:
        student = RemoteStudent(worker, timeout=60)
        assert student.call("tuned.m:configs") == [16, 32]
        if gpu:
            assert student.call("tuned.m:block_used") == 16
        else:
            with pytest.raises(StudentError):
                student.call("tuned.m:block_used")
    finally:
        worker.stop()
