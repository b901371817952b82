#!/usr/bin/env bash
# Regenerate the GCD-vs-ASAp real runs of issue 3 (bundled SmolLM2-135M-Instruct, CPU).
#
#   benchmarks/run_asap_eval.sh            # full runs: 1,000 samples per method per task
#   RUNS=slia benchmarks/run_asap_eval.sh   # only the SLIA runs (RUNS="binary slia" by default)
#
# Outputs go to runs/asap/ (git-ignored): one `gad eval` out dir per task group, each with
# samples.jsonl, summary.json, summary.csv, plots/*.png.  COPY_FIGS=1 copies the PNGs to docs/figures/.
#
# Notes
# * binary/string_start_w_1_all_0 is an exact task: Q* is enumerated by the harness up to
#   the task's exact_max_len = 6 tokens (`gad eval --exact-max-len T` overrides it); samples longer than that are excluded
#   from KL/TV and reported as share_outside_support.  Sampling budget: the task's 16 tokens.
# * The two SLIA problems are open tasks (union "ideal" estimator, sliding window $WINDOW).
#   --max-new-tokens 64 overrides the task default of 128 (observed solutions are <= ~40 tokens).
# * ASAp is batched: a batch of $BATCH (binary) or $BATCH_SLIA (SLIA) samples uses the trie estimates as they stood at the start of
#   the batch (BATCH=1 is the paper's sequential algorithm).
# * ASAp tries persist under <out>/tries and are REUSED by a rerun: the script deletes the out dirs
#   first so that every run starts from an empty trie.
set -euo pipefail
cd "$(dirname "$0")/.."
export GAD_DATA_DIR="${GAD_DATA_DIR:-$(cd .. && pwd)/shared/data}"  # SyGuS task data, read in place

N_BINARY=${N_BINARY:-1000}
N_SLIA=${N_SLIA:-1000}
BATCH=${BATCH:-8}
BATCH_SLIA=${BATCH_SLIA:-16}
RUNS=${RUNS:-"binary slia"}
SEED=${SEED:-0}
WINDOW=${WINDOW:-500}
OUT=${OUT:-runs/asap}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

run() { echo "+ $*" >&2; /usr/bin/time -f "wall %e s" "$@"; }

mkdir -p "$OUT"
has() { [[ " $RUNS " == *" $1 "* ]]; }

if has binary; then
rm -rf "$OUT/binary"
run gad eval --model bundled --method gcd asap \
    --task binary/string_start_w_1_all_0 \
    -n "$N_BINARY" --seed "$SEED" --batch-size "$BATCH" --window "$WINDOW" \
    --out "$OUT/binary" --no-progress
fi

if has slia; then
rm -rf "$OUT/slia"
run gad eval --model bundled --method gcd asap \
    --task slia/firstname_small slia/lastname_small \
    -n "$N_SLIA" --seed "$SEED" --batch-size "$BATCH_SLIA" --window "$WINDOW" --max-new-tokens 64 \
    --out "$OUT/slia" --no-progress
fi

# Throughput table (samples/s, tokens/s, ASAp/GCD cost per token) from the harness's own files.
python - "$OUT" $RUNS <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for grp in sys.argv[2:]:
    summ = json.loads((out / grp / "summary.json").read_text())
    toks = {}
    for line in (out / grp / "samples.jsonl").read_text().splitlines():
        r = json.loads(line)
        toks[(r["task"], r["method"])] = toks.get((r["task"], r["method"]), 0) + len(r["token_ids"])
    for t, ti in summ["tasks"].items():
        per_tok = {}
        for m, i in ti["methods"].items():
            s, n, k = i["seconds"], i["n"], toks[(t, m)]
            per_tok[m] = s / k
            print(f"{t:38s} {m:5s} n={n:5d} {s:8.1f}s {n/s:7.3f} samples/s {k/s:7.2f} tokens/s "
                  f"fin={i['share_finished']:.3f} kl_at={i['kl_at']} kl_final={i['kl_final']} "
                  f"tv_final={i['tv_final']} mean_logprob={i['mean_logprob']}")
        if "gcd" in per_tok and "asap" in per_tok:
            print(f"{t:38s} ASAp/GCD seconds per token = {per_tok['asap'] / per_tok['gcd']:.3f}")
PY

if [ "${COPY_FIGS:-0}" = 1 ]; then
    mkdir -p docs/figures
    for grp in $RUNS; do
        for f in "$OUT/$grp"/plots/*.png; do cp "$f" "docs/figures/asap_$(basename "$f")"; done
    done
fi
