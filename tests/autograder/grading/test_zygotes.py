"""A grading server's zygotes (autograder.grading.runner.Zygotes): one that died is replaced before the next
submission, one that served its share is retired, and a retired one is stopped only once no submission still
grades with it (stopping a zygote ends every worker it forked). The builds' zygote starts at the first
submission that builds ahead, never in a server whose submissions build nothing ahead."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from autograder.grading import runner
from autograder.grading.client import GradingServer
from autograder.sandbox import forked, policy

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def zygotes():
    protections = policy.detect("auto", policy.Limits(call_timeout=30, start_timeout=120))
    usable, why = forked.available(protections, gpu=False)
    if not usable:
        pytest.skip(f"no zygote on this machine: {why}")
    handle = runner.Zygotes(protections, gpu=False)
    yield handle
    handle.close()


def running(zygote: forked.Zygote) -> bool:
    return zygote.popen.poll() is None


def test_a_zygote_that_died_is_replaced_and_stopped_once_no_submission_holds_it(zygotes):
    first = zygotes.take()  # a submission grading with it
    assert first is not None and first.builds is None, "the builds' zygote starts when a submission asks"
    assert zygotes.start_builds() and first.builds is not None and first.healthy()
    assert not zygotes.start_builds(), "started once"
    os.kill(first.builds.pid, signal.SIGKILL)  # its builds' zygote dies: the pair is not healthy any more
    deadline = time.monotonic() + 30
    while first.builds.healthy() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = zygotes.take()
    assert second is not first and second.healthy(), "the next submission gets a fresh zygote"
    assert second.builds is not None and second.builds.healthy(), "with a builds' zygote, as the first had"
    assert running(first), "the first is kept while a submission still grades with it"
    zygotes.give_back(first)
    assert not running(first) and not first.root.exists(), "then stopped, and its folder removed"
    assert second.root != first.root and running(second)


def test_a_zygote_is_retired_after_its_share_of_submissions(zygotes, monkeypatch):
    monkeypatch.setattr(runner, "RETIRE_AFTER", 2)
    first = zygotes.take()
    assert zygotes.take() is first
    zygotes.give_back(first)
    zygotes.give_back(first)
    third = zygotes.take()
    assert third is not first and not running(first) and running(third)


def test_a_servers_first_zygote_boots_beside_the_servers_imports_and_one_that_never_answers_is_let_go():
    """A server launches its first zygote and imports the reference and its tests while it boots (serve): the
    zygote is running but not yet waited for when Zygotes returns, and answers once waited for. One that ends
    before it answers is stopped, its folder removed, and the workers start on their own (take gives None)."""
    protections = policy.detect("auto", policy.Limits(call_timeout=30, start_timeout=120))
    usable, why = forked.available(protections, gpu=False)
    if not usable:
        pytest.skip(f"no zygote on this machine: {why}")
    booting = runner.Zygotes(protections, gpu=False, wait=False)
    try:
        assert booting.current is not None and booting.current.pid is None and running(booting.current)
        booting.wait()
        assert booting.current is not None and booting.current.pid is not None and booting.current.healthy()
    finally:
        booting.close()
    dying = runner.Zygotes(protections, gpu=False, wait=False)
    try:
        zygote = dying.current
        os.killpg(zygote.popen.pid, signal.SIGKILL)  # ends before it answers
        dying.wait()
        assert dying.current is None and not running(zygote) and not zygote.root.exists()
        assert dying.take() is None, "the workers start on their own"
    finally:
        dying.close()


def test_a_zygote_in_a_long_temporary_directory_starts_and_answers(tmp_path, monkeypatch):
    """A socket's path holds at most 107 bytes: a server whose temporary directory is long (pytest's own, a
    cluster job's) must still fork its workers from its zygote, not fall back to a new interpreter per worker."""
    protections = policy.detect("auto", policy.Limits(call_timeout=30, start_timeout=120))
    usable, why = forked.available(protections, gpu=False)
    if not usable:
        pytest.skip(f"no zygote on this machine: {why}")
    deep = tmp_path / ("t" * 60) / ("m" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))  # where stages.make puts the server's stage folder
    zygote = runner.start_zygote(protections, gpu=False)
    try:
        assert zygote is not None, "the zygote did not start in a long temporary directory"
        assert len(str(zygote.socket)) > 107 and zygote.root.is_relative_to(deep)
        zygote.start_builds(120)
        assert zygote.healthy() and zygote.builds is not None and zygote.builds.healthy()
    finally:
        if zygote is not None:
            runner.stop_zygote(zygote)


def test_a_servers_builds_zygote_starts_at_the_first_submission_that_builds_ahead(tmp_path, monkeypatch):
    """A server that grades resource_accounting (no compile check) never starts the builds' zygote; the first
    gpu_kernels submission starts it, and its builds' worker is forked from it (the child prepared before it
    started is replaced by one that can reach it)."""
    protections = policy.detect("auto", policy.Limits(call_timeout=30, start_timeout=120))
    usable, why = forked.available(protections, gpu=False)
    if not usable:
        pytest.skip(f"no zygote on this machine: {why}")
    temporary = tmp_path / "tmp"  # the server's stage folders, where its zygotes write their logs
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    for name in ("resource_accounting", "gpu_kernels"):
        shutil.copytree(ROOT / "solutions" / name, tmp_path / name / name)
    server = GradingServer(call_timeout=30)
    try:
        first = server.grade(tmp_path / "resource_accounting", select="test_flops")
        assert first.tests and all(t.status == "passed" for t in first.tests), first.log
        assert any(line.startswith("workers: forked") for line in first.log), first.log
        assert list(temporary.rglob("zygote-tests.log")) and not list(temporary.rglob("zygote-builds.log"))
        second = server.grade(tmp_path / "gpu_kernels", select="gelu")
        # gelu's tests, the hidden design check of matmul's epilogue among them, and its compile checks: the
        # reference passes every one this CPU grades
        assert any("gpu_compile" in t.name and t.status == "passed" for t in second.tests), second.tests
        assert [t.name for t in second.tests if t.status not in ("passed", "not_graded")] == [], second.tests
        assert any("by a worker forked from the builds' zygote" in line for line in second.log), second.log
        assert list(temporary.rglob("zygote-builds.log"))
    finally:
        server.close()
