"""Fixtures of the CLI tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest


@pytest.fixture
def one_line_error(capsys: pytest.CaptureFixture[str]) -> Callable[..., None]:
    """A check that the command printed exactly one error line on stderr, no traceback, holding every
    given needle."""

    def check(*needles: str) -> None:
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert "error" in err and "Traceback" not in err
        for n in needles:
            assert n in err, err

    return check
