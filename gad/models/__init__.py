"""Language models: the interface samplers use (:class:`LanguageModel`, :class:`DecodeSession`), toy
models, the Hugging Face / bundled GGUF loader with KV-cache sessions, and the ``generate`` logits
processor."""

from __future__ import annotations

from gad.models.base import LanguageModel, ToyLM

__all__ = ["LanguageModel", "ToyLM"]
