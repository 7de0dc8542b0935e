"""The pytest plugin of the package (entry point ``pytest11``, so pytest finds it once courier is
installed, as respx and requests-mock do): the ``courier_stubs`` fixture.

``courier_stubs`` is an open :class:`courier.Engine` (a temporary store) that answers from stubs
only: a request no stub matches raises :class:`courier.NoStub`, nothing reaches the network. Add
stubs with ``courier_stubs.stubs.add(...)``, assert on ``courier_stubs.stubs.requests``. A test
that needs a base URL, or other engine settings, marks itself::

    @pytest.mark.courier_stubs(base_url="https://api.example.com", stub_mode="pass-through")
    def test_profile(courier_stubs):
        courier_stubs.stubs.add("GET", "/users/1", {"id": 1})
        assert courier_stubs.get("/users/1").json() == {"id": 1}

The marker's keywords go to ``Engine(...)``; the engine is closed after the test.
"""
from __future__ import annotations

from typing import Any, Iterator

import pytest

from .engine import Engine


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "courier_stubs(**engine_options): options of the courier_stubs fixture's Engine")


@pytest.fixture
def courier_stubs(request: Any) -> Iterator[Engine]:
    """An engine that answers from stubs only (see the module's text)."""
    options: dict[str, Any] = {"temporary_store": True, "stub_mode": "only"}
    marker = request.node.get_closest_marker("courier_stubs")
    if marker is not None:
        options.update(marker.kwargs)
    engine = Engine(**options)
    try:
        yield engine
    finally:
        engine.close()
