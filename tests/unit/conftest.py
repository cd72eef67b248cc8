"""tests/unit: checks that build and run no kernel (some ask the device for its limits or make a
context): every test here fails if it asked for a program (built, or found in either cache)."""

from __future__ import annotations

import pytest

from clconv.builder import stats


@pytest.fixture(autouse=True)
def builds_nothing():
    def programs() -> int:
        return stats.source_builds + stats.disk_hits + stats.memory_hits

    before = programs()
    yield
    assert programs() == before, "a unit test asked for a built program"
