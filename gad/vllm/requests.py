"""Per-request gad arguments for vLLM: parsing and validation (no vLLM import).

A request opts in with ``SamplingParams(extra_args={"gad": {...}})`` (offline) or, over the
OpenAI-compatible server, ``vllm_xargs={"gad": "<the same object as a JSON string>"}`` (``vllm_xargs``
values cannot be nested objects).  Keys:

``grammar``
    Lark text, GBNF/EBNF text (``::=`` rules; or say ``"kind": "ebnf"``), or the name of a grammar
    shipped with gad (``json``, ``sql``, ``text``: :func:`gad.grammar.builtin_names`).  File paths are not
    accepted: a server must not read files a client names.
``json_schema``
    instead of ``grammar``: a JSON Schema (an object, or its JSON text), compiled with
    ``gad.Grammar.from_json_schema`` when this gad has it.
``kind``
    ``"lark"`` or ``"ebnf"`` (default: guessed from the text).
``start``
    the start rule (default ``start``, GBNF ``root``).
``method``
    ``"gcd"`` (default): grammar-constrained decoding, disallowed tokens get ``-inf``; or ``"asap"``:
    ASAp (Park et al., "Grammar-Aligned Decoding", NeurIPS 2024, arXiv 2405.21047), logits
    ``+ T·log Φ̂(u·t)`` from a trie keyed by (model, grammar, prompt, decoding settings).

Sampling-parameter rules (:func:`check_sampling_params`): ``min_tokens`` must be 0 (vLLM's min-tokens
processor bans EOS, which can leave no allowed token once the text is complete); ASAp needs
``temperature > 0`` (it samples), and refuses ``min_p``, presence/frequency/repetition penalties and
``logit_bias`` (they act after the plug-in and change the law the trie estimates).  ``top_k`` /
``top_p`` are allowed and act on the constrained weights ``p^(1/T)·Φ̂`` exactly as in ``gad.sample``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gad.errors import InvalidArgumentError
from gad.grammar import BUILTIN_DIR, Grammar, builtin_names

__all__ = ["GAD_KEY", "METHODS", "GadRequest", "parse_request", "check_sampling_params",
           "validate_sampling_params", "error_message", "settings_of", "identity_digest"]

GAD_KEY = "gad"
METHODS = ("gcd", "asap")
_KEYS = frozenset({"grammar", "json_schema", "kind", "start", "method"})
_GBNF_RULE = re.compile(r"^\s*[A-Za-z_][\w-]*\s*::=", re.MULTILINE)


@dataclass(frozen=True)
class GadRequest:
    """What one request asked gad for.

    Attributes:
        grammar: the validated grammar (shared by every request that sent the same source).
        method: ``"gcd"`` or ``"asap"``.
        key: the grammar's SHA-256 (``grammar.sha256``): the compiled-grammar cache key.
    """

    grammar: Grammar
    method: str

    @property
    def key(self) -> str:
        return self.grammar.sha256


def error_message(exc: BaseException) -> str:
    """The one-line message a failed request gets: ``gad: <ErrorType>: <message>``."""
    return f"gad: {type(exc).__name__}: {exc}"


@functools.lru_cache(maxsize=256)
def _grammar_from_text(text: str, kind: str, start: str | None) -> Grammar:
    if text in builtin_names():
        return Grammar.builtin(text) if start is None else Grammar.from_file(BUILTIN_DIR / f"{text}.lark", start=start)
    return Grammar.from_string(text, kind=kind, path="<request grammar>", start=start)


@functools.lru_cache(maxsize=256)
def _grammar_from_schema(schema_json: str) -> Grammar:
    return Grammar.from_json_schema(json.loads(schema_json))


def _json_text(raw: Any, what: str) -> Any:
    """``raw`` itself, or the value its JSON text holds when it is a string.

    Raises:
        InvalidArgumentError: a string that is not JSON (``what`` names the argument).
    """
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"{what} is not JSON ({exc.msg} at character {exc.pos})") from None


def _as_mapping(raw: Any) -> Mapping[str, Any]:
    raw = _json_text(raw, "extra_args['gad'] (a string)")
    if not isinstance(raw, Mapping):
        raise InvalidArgumentError(f"extra_args['gad'] must be an object (or its JSON text), got "
                                   f"{type(raw).__name__}")
    return raw


def parse_request(extra_args: Mapping[str, Any] | None) -> GadRequest | None:
    """The gad request in ``SamplingParams.extra_args``, or None when the request did not opt in.

    Raises:
        InvalidArgumentError: unknown keys, neither or both of ``grammar`` / ``json_schema``, a bad
            ``kind`` / ``method`` / ``start``, a ``json_schema`` that is not JSON or not an object.
        gad.errors.GrammarError: the grammar does not load (syntax error with line and column,
            undefined symbol, LALR conflict, empty language, unsupported terminal).
    """
    if not extra_args or GAD_KEY not in extra_args:
        return None
    args = _as_mapping(extra_args[GAD_KEY])
    unknown = sorted(set(args) - _KEYS)
    if unknown:
        raise InvalidArgumentError(f"unknown gad argument(s) {', '.join(map(repr, unknown))}; "
                                   f"expected {', '.join(sorted(_KEYS))}")
    method = args.get("method", "gcd")
    if method not in METHODS:
        raise InvalidArgumentError(f"gad argument 'method' must be one of {', '.join(METHODS)}, got {method!r}")
    start = args.get("start")
    if start is not None and not isinstance(start, str):
        raise InvalidArgumentError(f"gad argument 'start' must be a rule name, got {start!r}")
    has_g, has_s = args.get("grammar") is not None, args.get("json_schema") is not None
    if has_g == has_s:
        raise InvalidArgumentError("gad needs exactly one of 'grammar' (Lark/GBNF text or a shipped grammar's "
                                   f"name: {', '.join(builtin_names())}) and 'json_schema'")
    if has_s:
        schema = _json_text(args["json_schema"], "gad argument 'json_schema'")
        if not isinstance(schema, (Mapping, bool)):
            raise InvalidArgumentError(f"gad argument 'json_schema' must be an object, got {type(schema).__name__}")
        return GadRequest(_grammar_from_schema(json.dumps(schema, sort_keys=True)), method)
    text = args["grammar"]
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgumentError("gad argument 'grammar' must be non-empty grammar text or a shipped grammar's name")
    kind = args.get("kind") or ("ebnf" if _GBNF_RULE.search(text) else "lark")
    if kind not in ("lark", "ebnf"):
        raise InvalidArgumentError(f"gad argument 'kind' must be 'lark' or 'ebnf', got {kind!r}")
    return GadRequest(_grammar_from_text(text, kind, start), method)


def _num(params: Any, name: str, default: float) -> float:
    v = getattr(params, name, default)
    return default if v is None else float(v)


def check_sampling_params(req: GadRequest, params: Any) -> None:
    """Refuse sampling parameters that cannot be combined with ``req`` (see the module doc).

    Args:
        params: a ``vllm.SamplingParams`` (or any object with its attribute names).
    Raises:
        InvalidArgumentError: naming the parameter.
    """
    if getattr(params, "structured_outputs", None) is not None:
        raise InvalidArgumentError("gad and vLLM structured_outputs both constrain the request: use one")
    if int(getattr(params, "min_tokens", 0) or 0) > 0:
        raise InvalidArgumentError("gad requests need min_tokens=0 (vLLM's min_tokens bans EOS, "
                                   "which can leave no allowed token once the grammar's text is complete)")
    if req.method != "asap":
        return
    if _num(params, "temperature", 1.0) < 1e-5:
        raise InvalidArgumentError("gad method 'asap' samples: it needs temperature > 0 "
                                   "(use method 'gcd' for greedy decoding)")
    for name, neutral in (("min_p", 0.0), ("presence_penalty", 0.0), ("frequency_penalty", 0.0),
                          ("repetition_penalty", 1.0)):
        if _num(params, name, neutral) != neutral:
            raise InvalidArgumentError(f"gad method 'asap' refuses {name}={getattr(params, name)!r}: it acts after "
                                       "the plug-in and changes the law the ASAp trie estimates")
    if getattr(params, "logit_bias", None):
        raise InvalidArgumentError("gad method 'asap' refuses logit_bias: it changes the law the ASAp trie "
                                   "estimates")


def validate_sampling_params(params: Any) -> GadRequest | None:
    """:func:`parse_request` on ``params.extra_args`` then :func:`check_sampling_params`.

    Returns None for requests without gad arguments.
    Raises:
        GadError: the typed error (its message via :func:`error_message`).
    """
    req = parse_request(getattr(params, "extra_args", None))
    if req is not None:
        check_sampling_params(req, params)
    return req


def settings_of(params: Any) -> dict[str, Any]:
    """The decoding settings an ASAp trie is keyed by: ``temperature``, ``top_k`` (None when off), ``top_p``."""
    top_k = getattr(params, "top_k", None)
    return {"temperature": _num(params, "temperature", 1.0),
            "top_k": None if top_k is None or int(top_k) <= 0 else int(top_k),
            "top_p": _num(params, "top_p", 1.0)}


def identity_digest(identity: Mapping[str, Any]) -> str:
    """A file-name-safe digest of an ASAp trie identity."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]
