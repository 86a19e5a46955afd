"""A grading server's zygotes (autograder.grading.runner.Zygotes): one that died is replaced before the next
submission, one that served its share is retired, and a retired one is stopped only once no submission still
grades with it (stopping a zygote ends every worker it forked)."""

from __future__ import annotations

import os
import signal
import tempfile
import time

import pytest

from autograder.grading import runner
from autograder.sandbox import forked, policy


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
    assert first is not None and first.builds is not None and first.healthy()
    os.kill(first.builds.pid, signal.SIGKILL)  # its builds' zygote dies: the pair is not healthy any more
    deadline = time.monotonic() + 30
    while first.builds.healthy() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = zygotes.take()
    assert second is not first and second.healthy(), "the next submission gets a fresh zygote"
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
        assert zygote.healthy() and zygote.builds is not None and zygote.builds.healthy()
    finally:
        if zygote is not None:
            runner.stop_zygote(zygote)
