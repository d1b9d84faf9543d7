#!/usr/bin/env bash
# Bit-exactness check of the engine across a refactoring: records a small corpus with kerncheck's engine for
# a handful of variants on the Llama (SmolLM2 GGUF: Q4_1 decode GEMV, packed GEMM prefill) and the hybrid
# (tests/data/models/hybrid-tiny: GDN + attention, fixed-tile GEMM) and prints the sha256 of every
# candidate's full logits (--logits-out) and of the golden's tensors. Run it with the old and the new binary
# and diff the outputs: any changed bit changes a hash.
# With a third argument (tests' kc_causal_logits of the same build), also the HF fixtures of tests/data/fixtures
# (Qwen3-Next dense and MoE, Qwen3.5, Llama/Qwen): prefill, decode and prefill in blocks.
#   bench/engine_bitexact.sh KERNCHECK OUT_DIR [KC_CAUSAL_LOGITS] > hashes.txt
# (KC_THREADS as you like: the results do not depend on it)
set -uo pipefail
KC=$(realpath "$1"); OUT=$2
ROOT=${KC_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
PY=${PYTHON:-$ROOT/.venv/bin/python}
GGUF=${KC_SMOLLM2:-$(PYTHON=$PY "$ROOT/scripts/fetch_smollm2.sh")}
HYB=$ROOT/tests/data/models/hybrid-tiny
mkdir -p "$OUT"
# The golden's tensors without its metadata (which holds times and paths).
tensors_hash() {
  "$PY" - "$1" <<'PY'
import hashlib, sys
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
h = hashlib.sha256()
for k in sorted(t):
    h.update(k.encode()); h.update(t[k].tobytes())
print(h.hexdigest())
PY
}
run() {  # name model golden variant [extra args]
  local name=$1 model=$2 golden=$3 variant=$4; shift 4
  "$KC" record --model "$model" --golden "$golden" --variant "$variant" "$@" \
    -o "$OUT/$name.kcr" --logits-out "$OUT/$name.npy" >/dev/null 2>"$OUT/$name.log"
  if [ -f "$OUT/$name.npy" ]; then echo "$name $(sha256sum <"$OUT/$name.npy" | cut -c1-16)"
  else echo "$name FAILED: $(tail -1 "$OUT/$name.log")"; fi
  rm -f "$OUT/$name.npy"
}
if [ -z "${KC_BITEXACT_FIXTURES_ONLY:-}" ]; then
# depths 256 and 384 (> kDeepKeys = 256 keys, several flash blocks), decode tail 24 (the quantized GEMV)
for m in llama hybrid; do
  if [ $m = llama ]; then model=$GGUF; else model=$HYB; fi
  "$KC" corpus build --tokenizer "$model" --depths 256,384 --segments-per-depth 2 --decode-last 24 \
    -o "$OUT/$m.kcc" >/dev/null
  "$KC" record --model "$model" --corpus "$OUT/$m.kcc" -o "$OUT/$m.kcg" >/dev/null 2>"$OUT/$m.golden.log"
  echo "$m.golden $(tensors_hash "$OUT/$m.kcg" | cut -c1-16)"
done
L=("$GGUF" "$OUT/llama.kcg")
H=("$HYB" "$OUT/hybrid.kcg")
run llama.f32 "${L[@]}" f32
run llama.bf16 "${L[@]}" bf16
run llama.p_fp8x448 "${L[@]}" bf16+p=fp8x448
run llama.flash "${L[@]}" attn=flash
run llama.order7 "${L[@]}" order=7
run llama.flash_order3 "${L[@]}" attn=flash+order=3
run llama.bugs "${L[@]}" bug:deep_score=1+bug:rope=12+bug:norm_rsqrt=14+bug:silu=12+bug:gemm_acc=64
run llama.block64 "${L[@]}" f32 --prefill-block 64
run hybrid.f32 "${H[@]}" f32
run hybrid.bf16 "${H[@]}" bf16
run hybrid.fla "${H[@]}" gdn=fla
run hybrid.flash "${H[@]}" attn=flash
run hybrid.order5 "${H[@]}" order=5
run hybrid.p_fp8x448 "${H[@]}" bf16+p=fp8x448
run hybrid.block64 "${H[@]}" f32 --prefill-block 64
# The judge on some of them (metrics' exp and sums): the JSON report with OUT_DIR masked in its paths and
# without the golden's checksum (which covers its command line, OUT_DIR included).
json_hash() {
  "$PY" - "$1" "$OUT" <<'PY'
import hashlib, json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k != "checksum"}
    return [strip(x) for x in v] if isinstance(v, list) else v
text = open(sys.argv[1]).read().replace(sys.argv[2].rstrip("/") + "/", "OUT/")
print(hashlib.sha256(json.dumps(strip(json.loads(text)), sort_keys=True).encode()).hexdigest())
PY
}
judge() {  # name golden candidate noise…
  local name=$1 golden=$2 cand=$3; shift 3
  local noise=(); for n in "$@"; do noise+=(--noise "$OUT/$n.kcr"); done
  "$KC" test "$OUT/$golden" "$OUT/$cand.kcr" "${noise[@]}" --allow-floor-mismatch --min-positions 100 \
    --json "$OUT/$name.json" >/dev/null 2>&1
  echo "$name $(json_hash "$OUT/$name.json" | cut -c1-16)"
}
judge judge.llama.bf16 llama.kcg llama.bf16 llama.flash llama.order7 llama.flash_order3
judge judge.llama.bugs llama.kcg llama.bugs llama.flash llama.order7 llama.flash_order3
judge judge.hybrid.bf16 hybrid.kcg hybrid.bf16 hybrid.flash hybrid.order5
fi
if [ -n "${3:-}" ]; then
  CL=$(realpath "$3")
  ids=$(seq 1 2 467 | tr '\n' ' ')  # 234 tokens: every fixture's vocab is 512 or larger
  for fx in "$ROOT"/tests/data/fixtures/*/; do
    [ -f "$fx/config.json" ] || continue
    n=$(basename "$fx")
    for mode in "" "--decode-from 200" "--prefill-block 64" "--gdn-fla"; do
      tag=$(echo "$mode" | tr -d ' -')
      if "$CL" "$fx" "$OUT/fx.npy" $mode $ids >/dev/null 2>"$OUT/fx.log"; then
        echo "fixture.$n${tag:+.$tag} $(sha256sum <"$OUT/fx.npy" | cut -c1-16)"
      else
        echo "fixture.$n${tag:+.$tag} FAILED: $(tail -1 "$OUT/fx.log")"
      fi
    done
  done
  rm -f "$OUT/fx.npy"
fi
