"""Argument types shared by the ``gad`` sub-commands: each parses through the registry that owns the name
(methods: :mod:`gad.sampling.methods`; rules: :mod:`gad.speculative.rules`; drafters:
:mod:`gad.speculative.drafters`), so the command line accepts exactly what the library does."""

from __future__ import annotations

import argparse
import re
from typing import NoReturn

from gad.errors import GadError
from gad.sampling.methods import get_method
from gad.speculative.drafters import check_drafter_spec
from gad.speculative.rules import parse_rule


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int_at_least(text: str, low: int, what: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if v < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return v


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int_at_least(text, 1, "a positive integer")


def seed(text: str) -> int:
    """argparse type: a non-negative integer seed."""
    return _int_at_least(text, 0, "a non-negative integer")


def tree(text: str) -> tuple[int, int]:
    """argparse type: ``m,d`` (tree branching and depth, positive integers)."""
    m = re.fullmatch(r"\s*(\d+)\s*,\s*(\d+)\s*", text)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise argparse.ArgumentTypeError(f"expected m,d with positive integers (e.g. 2,3), got {text!r}")
    return int(m.group(1)), int(m.group(2))


def accept_rule(text: str) -> str:
    """argparse type: an acceptance rule name, checked by :func:`gad.speculative.rules.parse_rule`."""
    s = text.strip().lower()
    try:
        parse_rule(s)
    except GadError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return s


def drafter(text: str) -> str:
    """argparse type: a drafter spec, checked by :func:`gad.speculative.drafters.check_drafter_spec`."""
    try:
        return check_drafter_spec(text)
    except GadError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--speculative: ")) from None


def method(text: str) -> str:
    """argparse type: a sampling method name (aliases resolved by :func:`gad.sampling.methods.get_method`)."""
    try:
        return get_method(text).name
    except GadError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
