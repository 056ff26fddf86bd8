"""pytest fixtures for the dlbridge suite (helpers live in helpers.py)."""

import pytest

from helpers import DeleterCount


@pytest.fixture
def deleter_count():
    """Counts the counting producer's deleter calls made during the test."""
    return DeleterCount()
