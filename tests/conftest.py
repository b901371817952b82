"""Shared fixtures: the test data in tests/data (see its README) and the bundled SmolLM2 tokenizer / model
(loaded once).  ``GAD_DATA_DIR`` points at tests/data for the whole session, so evaluation tasks read the
copies here, never ``../shared``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
SHARED = ROOT.parent / "shared" / "data"  # full data sets: only tests marked as reading them in place
os.environ["GAD_DATA_DIR"] = str(DATA)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """The bundled SmolLM2-135M-Instruct tokenizer (converted from GGUF once, then cached on disk)."""
    from transformers import AutoTokenizer

    from gad.models.hf import _resolve_model_dir

    model_dir, _ = _resolve_model_dir(None, None)
    return AutoTokenizer.from_pretrained(str(model_dir))


@pytest.fixture(scope="session")
def smollm2():
    """The bundled model as a gad.hf.HFLanguageModel (CPU here, CUDA when present)."""
    from gad.models.hf import load_model

    return load_model()
