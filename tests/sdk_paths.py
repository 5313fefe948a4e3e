"""Both ways a provider sends its requests (agent/providers/door.py): through the SDK's internals,
and through its public API, as on a release whose internals changed. A test module that imports
`sdk_path` runs each of its tests on both."""

import pytest

from agent.providers.door import INTERNALS_VARIABLE

SDK_PATHS = ["internals", "public"]


@pytest.fixture(params=SDK_PATHS, autouse=True)
def sdk_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The path every provider the test's app builds takes (read when the provider is built)."""
    path: str = request.param
    monkeypatch.setenv(INTERNALS_VARIABLE, "on" if path == "internals" else "off")
    return path
