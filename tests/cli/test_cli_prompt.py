"""``gad sample`` prompt options of issue 9: --special-tokens, and a prompt longer than the context."""

from __future__ import annotations

import argparse

import pytest

from gad.cli import main
from gad.cli.sample import add_arguments


def test_special_tokens_flag_is_off_by_default() -> None:
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert p.parse_args(["--grammar", "json", "--prompt", "x"]).special_tokens is False
    assert p.parse_args(["--grammar", "json", "--prompt", "x", "--special-tokens"]).special_tokens is True


@pytest.mark.model
def test_prompt_longer_than_the_context_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sample", "--grammar", "json", "--prompt", "word " * 9000, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "longer than the context" in err and "8,192 tokens" in err
