"""A model's identity is its config, tokenizer and weights, not its folder's name; the converted-model
cache holds no pickle files and is checked before use (issue 9)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from gad.engine import cachefile
from gad.errors import UnsafeCacheWarning
from gad.models import hf


def _tiny(folder: Path, tokenizer, seed: int) -> Path:
    import torch
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                   max_position_embeddings=64, eos_token_id=tokenizer.eos_token_id)
    model = transformers.LlamaForCausalLM(cfg)
    folder.mkdir(parents=True)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


@pytest.mark.model
def test_models_in_folders_of_the_same_name_differ_and_a_moved_model_does_not(tmp_path: Path,
                                                                               smollm2_tokenizer) -> None:
    import shutil

    from gad import api
    from gad.errors import TrieMismatchError
    from gad.grammar import Grammar

    a = hf.load_model(_tiny(tmp_path / "a" / "model", smollm2_tokenizer, seed=1), device="cpu")
    b = hf.load_model(_tiny(tmp_path / "b" / "model", smollm2_tokenizer, seed=2), device="cpu")
    shutil.copytree(tmp_path / "a" / "model", tmp_path / "moved")
    a2 = hf.load_model(tmp_path / "moved", device="cpu")
    assert a.name == b.name == "model"  # the old identity: the folder's name
    assert a.fingerprint != b.fingerprint
    assert a.fingerprint == a2.fingerprint and a2.name == "moved"
    g = Grammar.from_string('start: "a"+')
    trie = tmp_path / "t.trie"
    api.sample(a, g, "x", n=1, method="asap", trie=trie, max_new_tokens=3, cache_dir=False)
    with pytest.raises(TrieMismatchError, match="model_fingerprint"):
        api.sample(b, g, "x", n=1, method="asap", trie=trie, max_new_tokens=3, cache_dir=False)


def _converted(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\0" * 16)
    (folder / "tokenizer.json").write_text("{}")
    hf._write_manifest(folder, Path("m.gguf"))
    return folder


def test_a_complete_conversion_is_accepted(tmp_path: Path) -> None:
    assert hf._check_converted(_converted(tmp_path / "m")) is None


@pytest.mark.parametrize("damage,reason", [
    ("pickle", "pickle-format"),
    ("no-weights", "no safetensors"),
    ("truncated", "model.safetensors is missing or of another size"),
    ("config", "config.json is unreadable"),
    ("manifest", "manifest is damaged"),
])
def test_a_damaged_or_planted_conversion_is_refused(tmp_path: Path, damage: str, reason: str) -> None:
    f = _converted(tmp_path / "m")
    if damage == "pickle":
        (f / "pytorch_model.bin").write_bytes(b"planted")
    elif damage == "no-weights":
        (f / "model.safetensors").unlink()
    elif damage == "truncated":
        (f / "model.safetensors").write_bytes(b"\0" * 3)
    elif damage == "config":
        (f / "config.json").write_text("{not json")
    else:
        (f / hf._MANIFEST).write_text("[1, 2")
    assert reason in (hf._check_converted(f) or "")


def test_a_killed_conversion_leaves_a_folder_that_the_next_run_removes(tmp_path: Path) -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    dead = tmp_path / f".tmp-SmolLM2-abc-pid{p.pid}-x1y2"
    dead.mkdir()
    (dead / "model.safetensors").write_bytes(b"\0" * 1000)
    live = tmp_path / f".tmp-SmolLM2-abc-pid{os.getpid()}-x3y4"
    live.mkdir()
    keep = tmp_path / "SmolLM2-abc"
    keep.mkdir()
    assert sorted(cachefile.clean_stale_temps(tmp_path)) == [dead.name]
    assert not dead.exists() and live.exists() and keep.exists()


def test_unsafe_models_folder_is_warned_once(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    folder.chmod(0o777)
    cachefile._WARNED.clear()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert cachefile.warn_if_unsafe(folder, "converted-model cache")
        assert cachefile.warn_if_unsafe(folder, "converted-model cache")
    msgs = [str(w.message) for w in rec if issubclass(w.category, UnsafeCacheWarning)]
    assert len(msgs) == 1 and "converted-model cache" in msgs[0] and "writable by every user" in msgs[0]


def test_manifest_lists_the_files_and_sizes(tmp_path: Path) -> None:
    f = _converted(tmp_path / "m")
    m = json.loads((f / hf._MANIFEST).read_text())
    assert m["files"]["model.safetensors"] == 16 and m["source"] == "m.gguf"
