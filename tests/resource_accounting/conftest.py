"""Fixtures for the resource_accounting tests: each contract module, reached through the `student` seam."""

import pytest


@pytest.fixture(scope="session")
def memory(student):
    return student.module("resource_accounting.memory")


@pytest.fixture(scope="session")
def einops_ops(student):
    return student.module("resource_accounting.einops_ops")


@pytest.fixture(scope="session")
def flops(student):
    return student.module("resource_accounting.flops")


@pytest.fixture(scope="session")
def network(student):
    return student.module("resource_accounting.network")


@pytest.fixture(scope="session")
def training(student):
    return student.module("resource_accounting.training")
