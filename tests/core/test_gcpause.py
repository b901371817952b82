"""gad.gcpause: the cyclic collector is paused while a schema is converted and a grammar compiled, and
left as it was found afterwards, on success, on error, nested and across threads."""

from __future__ import annotations

import gc
import threading

import pytest

import gad
from gad.errors import GadError
from gad.gcpause import paused_gc
from gad.grammar import Grammar
from gad.grammar import json_schema as js


@pytest.fixture(autouse=True)
def _collector_restored():
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_paused_and_restored_nested_and_on_error() -> None:
    gc.enable()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # (the outer block still runs)
    assert gc.isenabled()
    with pytest.raises(ValueError), paused_gc():
        raise ValueError("boom")
    assert gc.isenabled()
    gc.disable()  # a collector the user turned off stays off
    with paused_gc():
        pass
    assert not gc.isenabled()


def test_overlapping_threads_leave_it_enabled() -> None:
    gc.enable()
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with paused_gc():
            inside.set()
            leave.wait(5)

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(5)
    with paused_gc():  # begins while the other thread's block runs, ends before it
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's build still runs
    leave.set()
    t.join(5)
    assert gc.isenabled()


def test_conversion_and_compile_run_with_the_collector_paused(smollm2_tokenizer, monkeypatch) -> None:
    seen: list[bool] = []
    run = js._Gen.run

    def spy(self):  # noqa: ANN001, ANN202
        seen.append(gc.isenabled())
        return run(self)

    monkeypatch.setattr(js._Gen, "run", spy)
    from gad.engine import compiler
    build = compiler.CompiledGrammar.build_automata

    def spy_build(self):  # noqa: ANN001, ANN202
        seen.append(gc.isenabled())
        return build(self)

    monkeypatch.setattr(compiler.CompiledGrammar, "build_automata", spy_build)
    gc.enable()
    g = Grammar.from_json_schema({"type": "object", "properties": {"a": {"enum": ["x", "y"]}}})
    assert gc.isenabled()
    cg = gad.compile(g, smollm2_tokenizer, cache_dir=False)
    assert gc.isenabled() and seen == [False, False]
    m = cg.matcher()
    assert m.accept_bytes(b'{"a":"y"}') and m.is_accepting()
    with pytest.raises(GadError):  # a refused schema: the collector is back on
        Grammar.from_json_schema({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}})
    assert gc.isenabled()
