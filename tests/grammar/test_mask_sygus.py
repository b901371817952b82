"""The SyGuS grammars of the GAD benchmark (tests/data/gad-bench) at token level.

Each few-shot ``(define-fun ...)`` solution in a problem's prompt file that is meant for that
problem's grammar is fed, as the SmolLM2 tokenizer tokenizes it, through the compiled GBNF grammar:
it is accepted (and EOS allowed at its end) exactly when Lark parses it — i.e. for every solution
derivable from the grammar (see tests/test_ebnf.py for which prompt solutions are not, e.g. ``#b``
literals or ``let``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_ebnf import _examples  # the prompt-file parser shared with the grammar tests

import gad
from gad.engine.vocab import Vocabulary

BENCH = Path(__file__).resolve().parents[1] / "data" / "gad-bench"
PROBLEMS = ["SLIA/bikes", "SLIA/dr-name", "SLIA/name-combine", "SLIA/phone-1", "SLIA/initials",
            "bv4/find_inv_bvsge_bvadd_4bit", "bv4/find_inv_bvsge_bvand_4bit"]


@pytest.fixture(scope="module")
def vocab(smollm2_tokenizer) -> Vocabulary:
    return Vocabulary.from_tokenizer(smollm2_tokenizer)


@pytest.mark.parametrize("problem", PROBLEMS)
def test_prompt_solutions_accepted_iff_lark_parses(problem, vocab, smollm2_tokenizer, tmp_path) -> None:
    prompt = BENCH / f"{problem}.prompt.txt"
    if not prompt.exists():
        pytest.skip(f"{prompt} not found")
    grammar = gad.Grammar.from_file(BENCH / f"{problem}.ebnf")
    cg = gad.compile(grammar, vocab, cache_dir=tmp_path)
    examples, target = _examples(prompt)
    accepted = 0
    for synth_fun, text, _ in examples:
        if synth_fun != target or text is None:
            continue
        m = cg.matcher()
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        ok = m.accept_tokens(ids) == len(ids) and bool(m.mask()[cg.eos_ids[0]])
        assert ok == grammar.parses(text), (problem, text)
        accepted += ok
    print(f"{problem}: {accepted} solutions accepted")
    assert accepted >= 1
