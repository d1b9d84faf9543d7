#!/usr/bin/env bash
# How many floor runs a non-batch-invariant engine needs: vLLM's CPU build in bf16 serving SmolLM2-135M,
# judged against floors of its own runs (docs/engines.md "Measured", the bf16 rows).
#   scripts/vllm_floor_experiment.sh BUILD_DIR [OUT_DIR]
# A corpus of the default sources (depths 256 and 512, KC_SEGMENTS segments each, default 6; last 8 decoded),
# its golden from kerncheck's f32 engine, then from one bf16 server: KC_FLOOR_RUNS floor runs (default 6) at
# concurrencies cycling 1, 2, 3, 4, and one candidate at concurrency 3. Prints whether the runs differ
# and the verdict of the candidate against the first 2, 4, … floor runs, then against the whole floor with an
# fp8 KV cache (where the CPU has it) as the degraded control. Reuses finished files in OUT_DIR.
set -euo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR [OUT_DIR]}" && pwd)
root="$(cd "$(dirname "$0")/.." && pwd)"
out=${2:-$root/vllm-floor-experiment}
mkdir -p "$out"
kc="$build/src/kerncheck"
segs=${KC_SEGMENTS:-6}
runs=${KC_FLOOR_RUNS:-6}
gguf=$("$root/scripts/fetch_smollm2.sh")
export KC_VLLM_PORT=${KC_VLLM_PORT:-8331}
trap '"$root/scripts/vllm_cpu.sh" stop >/dev/null 2>&1 || true' EXIT

[ -f "$out/c.kcc" ] || "$kc" corpus build --tokenizer "$gguf" --depths 256,512 --segments-per-depth "$segs" \
  --decode-last 8 -o "$out/c.kcc"
[ -f "$out/g.st" ] || "$kc" record --model "$gguf" --corpus "$out/c.kcc" -o "$out/g.st"

need=0
for i in $(seq 1 "$runs"); do [ -f "$out/floor$i.st" ] || need=1; done
[ -f "$out/cand.st" ] || need=1
if [ "$need" = 1 ]; then
  url=$(KC_VLLM_DTYPE=bfloat16 "$root/scripts/vllm_cpu.sh" start)
  for i in $(seq 1 "$runs"); do
    [ -f "$out/floor$i.st" ] || "$kc" record --server "$url" --golden "$out/g.st" --variant bf16 \
      --concurrency $(( (i - 1) % 4 + 1 )) -o "$out/floor$i.st" >/dev/null
  done
  [ -f "$out/cand.st" ] || "$kc" record --server "$url" --golden "$out/g.st" --variant bf16 --concurrency 3 \
    -o "$out/cand.st" >/dev/null
  "$root/scripts/vllm_cpu.sh" stop >/dev/null
fi

echo "== do the runs differ? (sha256 of each run's log-prob tensors)"
for f in "$out"/floor*.st "$out/cand.st"; do
  printf '%s  %s\n' "$("$root/.venv/bin/python" - "$f" <<'EOF' 2>/dev/null || sha256sum "$f" | cut -c1-16
import hashlib, sys
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
h = hashlib.sha256()
for k in sorted(t):
    h.update(k.encode()); h.update(t[k].tobytes())
print(h.hexdigest()[:16])
EOF
)" "$(basename "$f")"
done

verdict() {  # verdict LABEL ARGS…: one line with the exit code's verdict and the report's reasons
  local label=$1 rc
  shift
  set +e
  "$kc" test "$out/g.st" "$@" --json "$out/v.json" >"$out/v.txt" 2>&1
  rc=$?
  set -e
  "$root/.venv/bin/python" - "$label" "$rc" "$out/v.json" <<'EOF'
import json, sys
label, rc, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    r = json.load(open(path))
except Exception:
    print(f"{label}: exit {rc}"); sys.exit(0)
tests = r.get("floor_test", {}).get("tests", [])
mde = max((t["mde_ratio"] for t in tests if t.get("matters")), default=None)
power = f"MDE x (worst split that matters) {mde:.2f}" if mde else "no floor test (the floor runs are identical)"
d = r.get("decided_by") or {}
by = f"  decided by {d['rule']} {d['statistic']} on {d['split']}" if rc == 1 and d else ""
print(f"{label}: {r['verdict']}  KL mean {r['kl']['mean']:.3e}  {power}{by}"
      + "".join(f"\n    {x}" for x in r.get("inconclusive_reasons", [])))
EOF
}

echo "== the candidate (concurrency 3) against floors of n runs"
for n in $(seq 2 2 "$runs"); do
  args=()
  for i in $(seq 1 "$n"); do args+=(--noise "$out/floor$i.st"); done
  verdict "floor of $n" "$out/cand.st" "${args[@]}"
done

all=()
for i in $(seq 1 "$runs"); do all+=(--noise "$out/floor$i.st"); done
if [ ! -f "$out/fp8kv.st" ] && [ ! -f "$out/fp8kv.refused" ]; then
  if url=$(KC_VLLM_DTYPE=bfloat16 "$root/scripts/vllm_cpu.sh" start --kv-cache-dtype fp8 2>"$out/fp8kv.err"); then
    "$kc" record --server "$url" --golden "$out/g.st" --variant bf16+kv=fp8 --concurrency 3 \
      -o "$out/fp8kv.st" >/dev/null
  else
    touch "$out/fp8kv.refused"
  fi
  "$root/scripts/vllm_cpu.sh" stop >/dev/null 2>&1 || true
fi
if [ -f "$out/fp8kv.st" ]; then
  verdict "fp8 KV cache, floor of $runs" "$out/fp8kv.st" "${all[@]}" --allow-floor-mismatch
else
  echo "fp8 KV cache: the server refused to start ($(grep -o 'FP8 KV cache on CPU requires[^.]*' "$out/fp8kv.err" | head -1))"
fi
