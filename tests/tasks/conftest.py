"""Fixtures of the task tests."""
import pytest

from pruning_core import tasks


@pytest.fixture
def fresh_task_cache():
    """The task registry's cache of loaded data, cleared before and after the test."""
    tasks.clear_cache()
    yield
    tasks.clear_cache()
