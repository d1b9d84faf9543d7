#!/usr/bin/env bash
# The prepared GPU check (docs/engines.md, "On a GPU"): where a CUDA GPU is present, SmolLM2-135M's golden in
# f32 (kerncheck's engine), a floor plan of bf16 configurations on the GPU recorded once with `kerncheck floor`,
# a benign candidate and a degraded one, each judged with `kerncheck test --floor`; prints the figures and the
# time of each step. Elsewhere it prints "no GPU" and exits 0 (CI has none).
#   scripts/gpu_check.sh [OUT_DIR]          (default: ./gpu-check; finished files there are reused)
# The engine: vLLM's CUDA build when KC_GPU_PYTHON (default python3) imports vllm — a server per configuration
# of examples/floor/vllm-gpu.toml; else kerncheck.torch with transformers on the GPU (the .venv's torch must see
# CUDA): the floor's configurations are attention implementations and batch sizes, judged with --noise.
# Needs the SmolLM2 GGUF (KC_SMOLLM2_GGUF, or scripts/fetch_smollm2.sh with network access). Budget: 15 minutes
# of GPU time, setup included (the corpus is sized for it: 6144 positions).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out=${1:-$PWD/gpu-check}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no GPU (nvidia-smi finds none): nothing to check here"
  exit 0
fi
py=${KC_GPU_PYTHON:-python3}
t0=$SECONDS
stamp() { echo "gpu_check: $1 at $((SECONDS - t0)) s"; }
nvidia-smi -L
kc="$root/build/src/kerncheck"
if [ ! -x "$kc" ]; then
  KC_PYTHON=dev "$root/scripts/setup.sh" >/dev/null
  stamp "built kerncheck"
fi
gguf=${KC_SMOLLM2_GGUF:-$(PYTHON="$root/.venv/bin/python" "$root/scripts/fetch_smollm2.sh")}
mkdir -p "$out"
[ -f "$out/c.kcc" ] || "$kc" corpus build --tokenizer "$gguf" --depths 256,512 --segments-per-depth 8 \
  --decode-last 16 -o "$out/c.kcc"
[ -f "$out/g.kcg" ] || "$kc" record --model "$gguf" --corpus "$out/c.kcc" -o "$out/g.kcg"
stamp "golden (kerncheck f32)"

judge() {  # judge NAME ARGS…: one line with the verdict and the figures
  local name=$1 rc
  shift
  set +e
  "$kc" test "$out/g.kcg" "$@" --json "$out/$name.json" >"$out/$name.txt" 2>&1
  rc=$?
  set -e
  "$root/.venv/bin/python" - "$name" "$rc" "$out/$name.json" <<'EOF'
import json, sys
name, rc, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    r = json.load(open(path))
except Exception:
    print(f"{name}: exit {rc} (no report)"); sys.exit(0)
fl = (r.get("floor_stats") or {}).get("kl_mean")
ratio = f", {r['kl']['mean'] / fl:.3g}x the floor" if fl else ""
print(f"{name}: {r['verdict']}  KL mean {r['kl']['mean']:.3e}{ratio}; {r['headline']}")
EOF
}

if "$py" -c "import vllm, torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
  model_dir=$("$root/scripts/vllm_cpu.sh" model 2>/dev/null || true)
  if [ -z "$model_dir" ]; then
    model_dir="$out/hf"
    [ -d "$model_dir" ] || "$py" "$root/scripts/gguf_to_hf.py" "$gguf" "$model_dir"
  fi
  "$kc" floor "$root/examples/floor/vllm-gpu.toml" --golden "$out/g.kcg" -o "$out/floor" \
    --set "python=$(command -v "$py")" --set "model=$model_dir"
  stamp "floor plan recorded (kerncheck floor)"
  port=8391
  for cand in benign:--max-num-seqs=8 degraded:--kv-cache-dtype=fp8; do
    name=${cand%%:*} arg=${cand#*:}
    if [ ! -f "$out/$name.kcc" ]; then
      "$py" -m vllm.entrypoints.openai.api_server --host 127.0.0.1 --port $port --model "$model_dir" \
        --served-model-name smollm2 --dtype bfloat16 --max-logprobs 20 --enable-prompt-tokens-details \
        --enable-prefix-caching "${arg%%=*}" "${arg#*=}" >"$out/$name.log" 2>&1 &
      pid=$!
      trap 'kill $pid 2>/dev/null || true' EXIT
      until curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; do
        kill -0 $pid 2>/dev/null || { echo "gpu_check: the $name server ended; log $out/$name.log"; exit 1; }
        sleep 2
      done
      "$kc" record --server "http://127.0.0.1:$port" --golden "$out/g.kcg" \
        --variant "$([ "$name" = degraded ] && echo bf16+kv=fp8 || echo bf16)" -o "$out/$name.kcc"
      kill $pid; wait $pid 2>/dev/null || true
      trap - EXIT
    fi
    judge "$name" "$out/$name.kcc" --floor "$out/floor/floor.json" $([ "$name" = degraded ] && echo --allow-floor-mismatch)
  done
else
  if ! "$root/.venv/bin/python" -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
    echo "gpu_check: a GPU is present but neither vLLM ($py) nor the .venv's torch can use it: no check run"
    exit 0
  fi
  "$root/.venv/bin/python" "$root/bench/gpu_torch_check.py" "$gguf" "$out"
  for name in benign degraded; do
    judge "$name" "$out/$name.kcc" --noise "$out/floor-sdpa-b1.kcc" --noise "$out/floor-eager-b1.kcc" \
      --noise "$out/floor-sdpa-b4.kcc" --noise "$out/floor-eager-b4.kcc"
  done
fi
stamp "done"
