"""Shared fixtures: paths to ../shared/data and the bundled SmolLM2 tokenizer / model (loaded once)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.skip(f"reference data not found at {DATA}")
    return DATA


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """The bundled SmolLM2-135M-Instruct tokenizer (converted from GGUF once, then cached on disk)."""
    from transformers import AutoTokenizer

    from gad.hf import _resolve_model_dir

    model_dir, _ = _resolve_model_dir(None, None)
    return AutoTokenizer.from_pretrained(str(model_dir))


@pytest.fixture(scope="session")
def smollm2():
    """The bundled model as a gad.hf.HFLanguageModel (CPU here, CUDA when present)."""
    from gad.hf import load_model

    return load_model()
