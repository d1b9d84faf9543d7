#!/usr/bin/env bash
# The depth onset's experiment (EXPERIMENTS.md, "The depth onset"; docs/judge.md, "Depth profile and
# onset"): on SmolLM2-135M with kerncheck's engine, a corpus of windows 4 096 tokens deep, a floor of
# equally correct implementations (bf16+order=1 … 8), and regressions that act only beyond a depth D
# (bf16+bug:deep_score@D=S at D = 1000, 2000, 3000, S = 0.02 and 0.005). Then:
#   - onset: each regression judged against the floor of the eight runs: the depth profile's onset against D;
#   - benign: each floor run judged against floors of six of the other seven (7 floors each, 56 judgments):
#     how often an onset is reported where there is none (and the verdicts).
#   scripts/depth_onset_experiment.sh MODEL OUT_DIR
#     MODEL    SmolLM2-135M (scripts/fetch_smollm2.sh prints its path)
#     OUT_DIR  where the corpus, golden, runs, reports and the summary (summary.json, summary.md) go
# Environment: KC_BIN (default build/src/kerncheck), PYTHON (default .venv/bin/python), KC_ONSET_STAGE=record
# (record only, no judging). Resumable: every file that exists is kept (record's checkpoints resume a run
# cut short). Cost: 15 records of 32 768 positions (the f32 golden included), ~3.5 min each on 2 idle
# cores, ~10 min on 2 busy ones; the judging ~2 min.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 MODEL OUT_DIR" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODEL=$1
OUT=$2
mkdir -p "$OUT"/runs "$OUT"/reports "$OUT"/logs
OUT=$(cd "$OUT" && pwd)
KC=${KC_BIN:-$ROOT/build/src/kerncheck}
PY=${PYTHON:-$ROOT/.venv/bin/python}
FLOOR_RUNS=8
DEPTHS=(1000 2000 3000)
STRENGTHS=(0.02 0.005)

log() { echo "[depth_onset] $(date +%H:%M:%S) $*" >&2; }
# once FILE CMD…: runs CMD unless FILE exists (a failed run leaves no FILE behind).
once() {
  local f=$1
  shift
  if [ -s "$f" ]; then return 0; fi
  log "$*"
  "$@" >>"$OUT/logs/run.txt" 2>&1 || { rm -f "$f"; tail -20 "$OUT/logs/run.txt" >&2; return 1; }
  [ -s "$f" ] || { echo "$0: $* did not write $f" >&2; exit 1; }
}

once "$OUT/corpus.kcc" "$KC" corpus build --tokenizer "$MODEL" --preset deep --depths 4096 \
  --segments-per-depth 8 --decode-last 32 -o "$OUT/corpus.kcc"
once "$OUT/golden.kcg" "$KC" record --model "$MODEL" --corpus "$OUT/corpus.kcc" -o "$OUT/golden.kcg"
record() {  # record VARIANT FILE
  once "$2" "$KC" record --model "$MODEL" --golden "$OUT/golden.kcg" --variant "$1" -o "$2"
}
# Half the floor, the first strength, the rest of the floor, the second strength: a first look comes early.
for i in $(seq 1 $((FLOOR_RUNS / 2))); do record "bf16+order=$i" "$OUT/runs/order$i.kcc"; done
for d in "${DEPTHS[@]}"; do record "bf16+bug:deep_score@$d=${STRENGTHS[0]}" "$OUT/runs/deep$d-${STRENGTHS[0]}.kcc"; done
for i in $(seq $((FLOOR_RUNS / 2 + 1)) $FLOOR_RUNS); do record "bf16+order=$i" "$OUT/runs/order$i.kcc"; done
for s in "${STRENGTHS[@]:1}"; do
  for d in "${DEPTHS[@]}"; do record "bf16+bug:deep_score@$d=$s" "$OUT/runs/deep$d-$s.kcc"; done
done
[ "${KC_ONSET_STAGE:-}" = record ] && { log "recorded"; exit 0; }

# judge GOLDEN CAND JSON NOISE…
judge() {
  local cand=$1 json=$2
  shift 2
  [ -s "$json" ] && return 0
  local args=()
  for n in "$@"; do args+=(--noise "$n"); done
  local rc=0
  "$KC" test "$OUT/golden.kcg" "$cand" "${args[@]}" --json "$json.tmp" >"${json%.json}.txt" 2>>"$OUT/logs/run.txt" || rc=$?
  [ "$rc" -le 2 ] || { echo "$0: kerncheck test $cand: exit $rc" >&2; exit 1; }
  mv "$json.tmp" "$json"
}
all_floor=()
for i in $(seq 1 $FLOOR_RUNS); do all_floor+=("$OUT/runs/order$i.kcc"); done
log "judging the regressions against the floor of $FLOOR_RUNS runs"
for s in "${STRENGTHS[@]}"; do
  for d in "${DEPTHS[@]}"; do judge "$OUT/runs/deep$d-$s.kcc" "$OUT/reports/deep$d-$s.json" "${all_floor[@]}"; done
done
log "judging each floor run against floors of six of the other seven"
for c in $(seq 1 $FLOOR_RUNS); do
  for left in $(seq 1 $FLOOR_RUNS); do
    [ "$left" = "$c" ] && continue
    floor=()
    for i in $(seq 1 $FLOOR_RUNS); do
      if [ "$i" != "$c" ] && [ "$i" != "$left" ]; then floor+=("$OUT/runs/order$i.kcc"); fi
    done
    judge "$OUT/runs/order$c.kcc" "$OUT/reports/benign-$c-without$left.json" "${floor[@]}"
  done
done
"$PY" "$ROOT/scripts/depth_onset_summary.py" "$OUT"
