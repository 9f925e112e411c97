from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from stream_sink.state import OperatorStateBackend, open_state_backend

Opener = Callable[..., OperatorStateBackend]


@pytest.fixture(params=["rocksdb", "memory"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def state_dir(tmp_path: os.PathLike[str]) -> str:
    return os.path.join(str(tmp_path), "state", "sink-a")


@pytest.fixture
def open_backend(kind: str, state_dir: str) -> Opener:
    """Opens the parametrized backend kind at ``state_dir`` (or another path)."""

    def opener(path: str | None = None, **kwargs: object) -> OperatorStateBackend:
        return open_state_backend(kind, path or state_dir, **kwargs)  # type: ignore[arg-type]

    return opener
