#!/usr/bin/env bash
# Time to verdict with a vLLM server (docs/engines.md "Measured"): the quick corpus, its golden from
# kerncheck's f32 engine (once), then `record --server` (phase both) against vLLM's CPU build in f32
# (scripts/vllm_cpu.sh) and `kerncheck test`. Prints the anchor (wall time of record --server + test)
# and kerncheck's share of it (its own CPU time in record, plus the test's wall time) as a ratio.
#   bench/server_verdict.sh BUILD_DIR [CONCURRENCY]
# Against a floor recorded once (docs/floor.md): KC_GOLDEN=G KC_FLOOR=FLOOR/floor.json use that golden (no
# corpus or golden is made) and judge with `test --floor`; the server runs in KC_VLLM_DTYPE (the floor's
# precision, e.g. bfloat16) and the candidate is labelled bf16 when it is bfloat16.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kc="$(cd "${1:?usage: $0 BUILD_DIR [CONCURRENCY]}" && pwd)/src/kerncheck"
conc="${2:-4}"
gguf="$("$root/scripts/fetch_smollm2.sh")"
tmp="$(mktemp -d)"
export KC_VLLM_PORT="${KC_VLLM_PORT:-8331}"
trap '"$root/scripts/vllm_cpu.sh" stop; rm -rf "$tmp"' EXIT
floor=()
variant=()
t0=$(date +%s.%N)
if [ -n "${KC_FLOOR:-}" ]; then
  cp "${KC_GOLDEN:?KC_FLOOR needs KC_GOLDEN (the golden of the floor)}" "$tmp/g.st"
  floor=(--floor "$KC_FLOOR")
  [ "${KC_VLLM_DTYPE:-float32}" = bfloat16 ] && variant=(--variant bf16)
else
  "$kc" corpus build --tokenizer "$gguf" --preset quick -o "$tmp/c.kcc" >/dev/null
  "$kc" record --model "$gguf" --corpus "$tmp/c.kcc" -o "$tmp/g.st" >/dev/null 2>&1
fi
t1=$(date +%s.%N)
url="$("$root/scripts/vllm_cpu.sh" start)"
t2=$(date +%s.%N)
"$kc" record --server "$url" --golden "$tmp/g.st" --concurrency "$conc" "${variant[@]}" -o "$tmp/cand.st" 2>/dev/null | tee "$tmp/rec.txt"
t3=$(date +%s.%N)
"$kc" test "$tmp/g.st" "$tmp/cand.st" "${floor[@]}" --json "$tmp/r.json" >"$tmp/test.txt" || true
t4=$(date +%s.%N)
head -1 "$tmp/test.txt"
cpu=$(sed -n "s/.*kerncheck's own CPU time \([0-9.]*\) s.*/\1/p" "$tmp/rec.txt")
python3 - "$t0" "$t1" "$t2" "$t3" "$t4" "$cpu" "$(uptime)" <<'PY'
import sys
t0, t1, t2, t3, t4, cpu = map(float, sys.argv[1:7])
anchor = (t3 - t2) + (t4 - t3)
ours = cpu + (t4 - t3)
print(f"golden (kerncheck f32 engine, once) {t1 - t0:.1f} s; vLLM start {t2 - t1:.1f} s")
print(f"record --server {t3 - t2:.1f} s (kerncheck CPU {cpu:.2f} s), test {t4 - t3:.2f} s")
print(f"anchor: time to verdict {anchor:.1f} s; ours: kerncheck's share {ours:.2f} s; ratio {ours / anchor:.4f}")
print(f"load: {sys.argv[7]}")
PY
