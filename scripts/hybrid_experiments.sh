#!/usr/bin/env bash
# The recurrent-state experiments on a Gated DeltaNet hybrid (EXPERIMENTS.md, "recurrent-state findings on
# the hybrid"): every figure from scratch with the built CLI, then printed.
#   scripts/hybrid_experiments.sh MODEL_DIR OUT_DIR
#     MODEL_DIR  an HF Qwen3.5 / Qwen3-Next folder with tokenizer.json (tests/data/models/hybrid-tiny)
#     OUT_DIR    where corpora, goldens, candidates, traces and figures go
# Environment: KC_BIN (the CLI; default build/src/kerncheck, else `kerncheck` on PATH), PYTHON (default
# .venv/bin/python: numpy, ml_dtypes, safetensors for the post-processing).
# Idempotent: a finished file is reused while the model's files are the same (OUT_DIR/model.sha256); a
# changed model (new weights) clears OUT_DIR's results first. Cost: ~3 min on 2 idle cores (hybrid-mem, 5b
# included), a few minutes with hybrid-tiny on 2 busy cores.
#
# Experiments (numbering as in EXPERIMENTS.md, last part):
#   0 context: per-token decay alpha of each GDN head (trace --tensors gdn.ba --dump + the model's A_log,
#     dt_bias)
#   1 sweep of gdn.state mantissa bits 23,16..2 on the bf16 base, knee against the bf16 / bf16+attn=flash
#     floor, on a corpus of depths 256, 512 (4 segments each) whose last 128 positions are decoded
#   2 f32 and gdn=fla: final gdn.state of one prefill call vs the same prompt in 512-, 64- and 100-token
#     calls (trace --reference-prefill-block 0 --prefill-block B): agreeing mantissa bits per layer
#   3 per-layer gdn.state error after one decode step, bf16 base + round:gdn.state=N (and f32 base)
#   4 KL at the last prefill position, round:gdn.state=N, one call / one block / blocks of 512 and 64
#   5 KL by decode step over 512 teacher-forced decode steps (trace --decode-last 512) on the 4 windows of a
#     depth-2048 corpus: round:gdn.state=7 vs f32, bf16+round:gdn.state=7 and =16 vs bf16, bf16 vs f32;
#     5b the same over 1536 steps on the first prose and code windows (round:gdn.state=7 vs f32, =16 on bf16)
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 MODEL_DIR OUT_DIR" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODEL=$(cd "$1" && pwd)
OUT=$2
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
KC=${KC_BIN:-$ROOT/build/src/kerncheck}
[ -x "$KC" ] || KC=$(command -v kerncheck) || { echo "$0: no kerncheck CLI (build it or set KC_BIN)" >&2; exit 2; }
PY=${PYTHON:-$ROOT/.venv/bin/python}
export PYTHONDONTWRITEBYTECODE=1

# A new model (same path, new weights) invalidates everything.
sha=$(cd "$MODEL" && cat config.json model*.safetensors* tokenizer.json | sha256sum | cut -d' ' -f1)
if [ -f "$OUT/model.sha256" ] && [ "$(cat "$OUT/model.sha256")" != "$sha" ]; then
  echo "model changed: clearing $OUT" >&2
  rm -rf "$OUT"/logs "$OUT"/corpus "$OUT"/sweep "$OUT"/fla "$OUT"/state "$OUT"/kl0 "$OUT"/decode "$OUT"/*.txt "$OUT"/*.json \
    "$OUT"/*.html
fi
echo "$sha" >"$OUT/model.sha256"
mkdir -p "$OUT"/logs "$OUT"/corpus "$OUT"/sweep "$OUT"/fla "$OUT"/state "$OUT"/kl0 "$OUT"/decode

log() { echo "[hybrid_experiments] $*" >&2; }
# once FILE CMD…: runs CMD unless FILE exists (CMD writes FILE; a failed run leaves no FILE behind).
once() {
  local f=$1
  shift
  if [ -s "$f" ]; then return 0; fi
  log "$*"
  "$@" >>"$OUT/logs/run.txt" 2>&1 || { rm -f "$f"; tail -20 "$OUT/logs/run.txt" >&2; return 1; }
  [ -s "$f" ] || { echo "$0: $* did not write $f" >&2; exit 1; }
}
# trace_once JSON ARGS…: kerncheck trace with --json JSON, stdout kept next to it as .txt.
trace_once() {
  local j=$1
  shift
  if [ -s "$j" ]; then return 0; fi
  log "trace $*"
  "$KC" trace --model "$MODEL" --max-tokens 4096 "$@" --json "$j.tmp" >"${j%.json}.txt" 2>>"$OUT/logs/run.txt" ||
    { tail -5 "$OUT/logs/run.txt" >&2; exit 1; }
  mv "$j.tmp" "$j"
}

start=$(date +%s)
# ---------------------------------------------------------------------------------------------------------
# Corpora (the hybrid's own tokenizer) and the trace prompts (the first prose and code windows of corpus B).
once "$OUT/corpus/sweep.kcc" "$KC" corpus build --tokenizer "$MODEL" --depths 256,512 --segments-per-depth 4 \
  --decode-last 128 -o "$OUT/corpus/sweep.kcc"
once "$OUT/corpus/long.kcc" "$KC" corpus build --tokenizer "$MODEL" --depths 2048 --segments-per-depth 4 \
  --decode-last 512 -o "$OUT/corpus/long.kcc"
if [ ! -s "$OUT/corpus/long-seg3.txt" ]; then
  "$PY" - "$OUT/corpus" <<'EOF'
import json, sys
from safetensors import safe_open
d = sys.argv[1]
with safe_open(f"{d}/long.kcc", "np") as f:
    segs = json.loads(f.metadata()["segments"])
for dom in ("prose", "code"):
    s = next(s for s in segs if s["domain"] == dom)
    open(f"{d}/prompt-{dom}.txt", "w", encoding="utf-8").write(s["text"])
for i, s in enumerate(segs):
    open(f"{d}/long-seg{i}.txt", "w", encoding="utf-8").write(s["text"])
EOF
fi

# ---------------------------------------------------------------------------------------------------------
# 0. Context: how long the model's GDN layers remember (the per-token decay α = exp(g), from gdn.ba).
trace_once "$OUT/state/decay.json" --prompt "$OUT/corpus/prompt-prose.txt" --reference f32 --variant f32 \
  --decode-steps 0 --tensors gdn.ba --dump "$OUT/state/decay.safetensors"

# ---------------------------------------------------------------------------------------------------------
# 1. The gdn.state mantissa sweep.
G1=$OUT/sweep/golden.kcg
once "$G1" "$KC" record --model "$MODEL" --corpus "$OUT/corpus/sweep.kcc" -o "$G1"
once "$OUT/sweep/noise-bf16.kcc" "$KC" record --model "$MODEL" --golden "$G1" --variant bf16 \
  -o "$OUT/sweep/noise-bf16.kcc"
once "$OUT/sweep/noise-bf16-flash.kcc" "$KC" record --model "$MODEL" --golden "$G1" --variant bf16+attn=flash \
  -o "$OUT/sweep/noise-bf16-flash.kcc"
if [ ! -s "$OUT/sweep.json" ]; then
  log "sweep gdn.state"
  "$KC" sweep --model "$MODEL" --golden "$G1" --tensor gdn.state --bits 23,16..2 --base bf16 \
    --noise "$OUT/sweep/noise-bf16.kcc" --noise "$OUT/sweep/noise-bf16-flash.kcc" --out-dir "$OUT/sweep" \
    --json "$OUT/sweep.json.tmp" --html "$OUT/sweep.html" >"$OUT/sweep.txt" 2>>"$OUT/logs/run.txt" ||
    [ -s "$OUT/sweep.json.tmp" ]  # rc 1 when a width fails: a result, not an error
  mv "$OUT/sweep.json.tmp" "$OUT/sweep.json"
fi

# ---------------------------------------------------------------------------------------------------------
# 2. One prefill call vs the same prompt in pieces: final gdn.state, same variant on both sides.
for dom in prose code; do
  for v in f32 gdn=fla; do
    for b in 512 64 100; do
      n=${v//=/-}
      if [ ! -s "$OUT/fla/$dom-$n-b$b.json" ]; then
        trace_once "$OUT/fla/$dom-$n-b$b.json" --prompt "$OUT/corpus/prompt-$dom.txt" --reference "$v" \
          --variant "$v" --reference-prefill-block 0 --prefill-block "$b" --decode-steps 0 --tensors gdn.state \
          --dump "$OUT/fla/$dom-$n-b$b.safetensors"
      fi
    done
  done
done

# ---------------------------------------------------------------------------------------------------------
# 3. Per-layer gdn.state error after one decode step, by mantissa bits (against the f32 reference).
for base in bf16 f32; do
  for n in 23 16 12 10 8 7 6 5 4; do
    if [ "$base" = f32 ]; then v=round:gdn.state=$n; else v=bf16+round:gdn.state=$n; fi
    trace_once "$OUT/state/$base-b$n.json" --prompt "$OUT/corpus/prompt-prose.txt" --variant "$v" \
      --decode-steps 1 --tensors gdn.state,gdn.core,hidden
  done
done

# ---------------------------------------------------------------------------------------------------------
# 4. KL at the last prefill position: one call, one block holding the whole prompt, blocks of 512 and 64.
for n in 7 16; do
  for b in 0 4096 512 64; do
    trace_once "$OUT/kl0/b$n-pb$b.json" --prompt "$OUT/corpus/prompt-prose.txt" --variant "round:gdn.state=$n" \
      --prefill-block "$b" --decode-steps 0 --tensors gdn.state
  done
done

# ---------------------------------------------------------------------------------------------------------
# 5. KL over 512 decode steps: each segment of the long corpus, its last 512 tokens decoded teacher-forced
#    (trace --decode-last: full-vocabulary KL in f64 from the logits; a candidate file's f32 log-probs cannot
#    resolve KL below ~1e-8). round:gdn.state=7 against f32, bf16+round:gdn.state=7 against bf16 (the state
#    alone on each base; and 16 bits on bf16), and bf16 against f32 (the base's own distance, for scale).
for i in 0 1 2 3; do
  for pair in f32:round:gdn.state=7 bf16:bf16+round:gdn.state=7 bf16:bf16+round:gdn.state=16 f32:bf16; do
    ref=${pair%%:*}
    v=${pair#*:}
    n=${ref}-${v//[:=+]/-}
    trace_once "$OUT/decode/seg$i-$n.json" --prompt "$OUT/corpus/long-seg$i.txt" --reference "$ref" --variant "$v" \
      --decode-last 512 --tensors gdn.state
  done
done
# 5b. The same over 1 536 decode steps (the first prose and code windows, 513 prompt tokens prefilled): does an
#     error in a state that remembers keep growing past 512 steps, or settle where forgetting balances it?
for dom in prose code; do
  for pair in f32:round:gdn.state=7 bf16:bf16+round:gdn.state=16; do
    ref=${pair%%:*}
    v=${pair#*:}
    trace_once "$OUT/decode/long-$dom-${ref}-${v//[:=+]/-}.json" --prompt "$OUT/corpus/prompt-$dom.txt" \
      --reference "$ref" --variant "$v" --decode-last 1536 --tensors gdn.state
  done
done
log "computed in $(( $(date +%s) - start )) s"

# ---------------------------------------------------------------------------------------------------------
# The figures.
"$PY" - "$OUT" "$MODEL" <<'EOF'
import json, math, sys
from pathlib import Path
import ml_dtypes  # noqa: F401  (numpy learns bfloat16: the model's weights)
import numpy as np
from safetensors.numpy import load_file

out = Path(sys.argv[1])
figs = {}


def kl_rows(golden, cand):
    """KL(golden ‖ candidate) per position over the golden's top-k + the tail bucket (nats)."""
    g, c = load_file(str(golden)), load_file(str(cand))
    lr, lc = g["top_logprobs"].astype(np.float64), c["logprobs_at_ref"].astype(np.float64)
    kl = (np.exp(lr) * (lr - lc)).sum(1)
    ro, co = g["other_logprob"].astype(np.float64), c["other_logprob"].astype(np.float64)
    tail = np.where(np.isfinite(ro), np.exp(ro) * (ro - co), 0.0)
    return np.maximum(kl + tail, 0.0), g


def g3(x):
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


# 0 ---------------------------------------------------------------------------------------------------------
print("== 0. per-token state decay alpha = exp(-exp(A_log) * softplus(a + dt_bias)) over the prose prompt")
dd = load_file(str(out / "state" / "decay.safetensors"))
w = {}
for f in sorted(Path(sys.argv[2]).glob("*.safetensors")):
    if f.name != "reference.safetensors":
        w.update(load_file(str(f)))
rows0 = []
for k in sorted((k for k in dd if k.startswith("ref/prefill/gdn.ba@")), key=lambda k: int(k.split("@")[1])):
    L = int(k.split("@")[1])
    pre = next(p for p in ("model.language_model.", "model.") if f"{p}layers.{L}.linear_attn.A_log" in w)
    A = w[f"{pre}layers.{L}.linear_attn.A_log"].astype(np.float64)
    dt = w[f"{pre}layers.{L}.linear_attn.dt_bias"].astype(np.float64)
    ba = dd[k].astype(np.float64)
    Hv = A.size
    a = ba[:, Hv:]
    x = a + dt
    g = -np.exp(A) * np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))
    alpha = np.exp(g)
    half = np.log(0.5) / np.minimum(g, -1e-30)  # tokens until a contribution has decayed to half
    rows0.append(dict(layer=L, alpha_median=[float(np.median(alpha[:, h])) for h in range(Hv)],
                      half_life_median=[float(np.median(half[:, h])) for h in range(Hv)]))
    print(f"layer {L}: median alpha per head " + " ".join(f"{v:.3f}" for v in rows0[-1]["alpha_median"])
          + "; median half-life (tokens) " + " ".join(f"{v:.3g}" for v in rows0[-1]["half_life_median"]))
hl = [(v, r["layer"], h) for r in rows0 for h, v in enumerate(r["half_life_median"])]
top = max(hl)
print(f"over the {len(hl)} heads: median half-life {np.median([v for v, _, _ in hl]):.3g} tokens; longest {top[0]:.3g}"
      f" (layer {top[1]} head {top[2]}); {sum(v >= 10 for v, _, _ in hl)} heads >= 10 tokens,"
      f" {sum(a <= 0.011 for r in rows0 for a in r['alpha_median'])} with median alpha <= 0.011")
figs["decay"] = rows0

# 1 ---------------------------------------------------------------------------------------------------------
print()
sw = json.loads((out / "sweep.json").read_text())
g1 = out / "sweep" / "golden.kcg"
print("== 1. gdn.state mantissa sweep (base bf16; corpus depths 256, 512 x 4 segments, last 128 decoded)")
fl = sw["floor"]
print(f"floor (bf16, bf16+attn=flash): KL median {g3(fl['kl_median'])}, p99 {g3(fl['kl_p99'])}, "
      f"flip rate m<=1 {g3(fl['flip_rate_uncertain'])}; KL median limit {g3(fl['kl_median_limit'])}")
print(f"{'bits':>4} {'KL median':>10} {'decode med':>10} {'decode mean':>11} {'prefill med':>11} {'KL p99':>9} "
      f"{'flips':>5} {'PPL':>8}  verdict")
rows1 = []
for r in sw["rows"]:
    kl, g = kl_rows(g1, r["candidate"])
    dec = g["phase"] == 1
    row = dict(bits=r["bits"], kl_median=r["kl_median"], kl_decode_median=float(np.median(kl[dec])),
               kl_decode_mean=float(kl[dec].mean()), kl_prefill_median=float(np.median(kl[~dec])),
               kl_p99=r["kl_p99"], flips=r["flips"], ppl=r["ppl"], verdict=r["verdict"],
               failed=[f"{x['rule']} {x['split']} {x['statistic']}" for x in r["failed"][:3]])
    rows1.append(row)
    print(f"{row['bits']:>4} {g3(row['kl_median']):>10} {g3(row['kl_decode_median']):>10} "
          f"{g3(row['kl_decode_mean']):>11} {g3(row['kl_prefill_median']):>11} {g3(row['kl_p99']):>9} "
          f"{row['flips']:>5} {row['ppl']:>8.4f}  {row['verdict']}  {'; '.join(row['failed'])}")
for n in ("noise-bf16", "noise-bf16-flash"):
    kl, g = kl_rows(g1, out / "sweep" / f"{n}.kcc")
    print(f"  {n}: decode KL median {g3(float(np.median(kl[g['phase'] == 1])))}, "
          f"mean {g3(float(kl[g['phase'] == 1].mean()))}")
print(f"knee: {sw['knee']} bits; isolated: {sw.get('isolated')}; statistic: {sw.get('knee_statistic')}")
figs["sweep"] = dict(floor=fl, rows=rows1, knee=sw["knee"], isolated=sw.get("isolated"))


# 2 ---------------------------------------------------------------------------------------------------------
def agree(a, b):
    """How many mantissa bits a and b (f32) agree to."""
    a, b = a.astype(np.float32).ravel(), b.astype(np.float32).ravel()
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    nb = np.abs(b.astype(np.float64))
    rel_l2 = math.sqrt((d ** 2).sum() / (nb ** 2).sum())
    nz = nb > 0
    rel = d[nz] / nb[nz]
    bits = lambda x: 24.0 if x == 0 else -math.log2(x)
    ia, ib = a.view(np.uint32), b.view(np.uint32)
    same_se = (ia >> 23) == (ib >> 23)  # sign and exponent equal
    x = (ia ^ ib) & 0x7FFFFF
    lead = np.where(x == 0, 23, 22 - np.floor(np.log2(np.maximum(x, 1))).astype(np.int64))
    lead = np.where(same_se, lead, 0)
    return dict(bits_l2=bits(rel_l2), bits_median=bits(float(np.median(rel))), bits_max=bits(float(rel.max())),
                lead_median=float(np.median(lead)), equal=float((ia == ib).mean()))


print("\n== 2. final gdn.state: one prefill call vs the same prompt in calls of B tokens (same variant both sides)")
print("   bits = -log2(relative difference): l2 = norm-wise, med/max = element-wise median/max;"
      " lead = median count of equal leading mantissa bits (23 = equal); eq = fraction bitwise equal")
rows2 = []
for dom in ("prose", "code"):
    for v in ("f32", "gdn-fla"):
        for b in (512, 64, 100):
            p = out / "fla" / f"{dom}-{v}-b{b}.safetensors"
            t = load_file(str(p))
            ntok = len(t["prompt"])
            layers = sorted({int(k.split("@")[1]) for k in t if k.startswith("ref/prefill/gdn.state@")})
            per = []
            for L in layers:
                s = agree(t[f"var/prefill/gdn.state@{L}"], t[f"ref/prefill/gdn.state@{L}"])
                per.append(dict(layer=L, **s))
            ref_l, var_l = t["ref/prefill/logits"], t["var/prefill/logits"]
            lr = ref_l - np.logaddexp.reduce(ref_l.astype(np.float64))
            lv = var_l - np.logaddexp.reduce(var_l.astype(np.float64))
            kl = float(max((np.exp(lr) * (lr - lv)).sum(), 0.0))
            rows2.append(dict(domain=dom, variant=v, block=b, tokens=ntok, layers=per, kl_last=kl))
            if not rows2[:-1] or rows2[-2]["domain"] != dom or rows2[-2]["variant"] != v:
                print(f"{dom} ({ntok} tokens), {v}: per GDN layer {[s['layer'] for s in per]}")
            print(f"  B={b:<3} l2 " + " ".join(f"{s['bits_l2']:4.1f}" for s in per)
                  + " | med " + " ".join(f"{s['bits_median']:4.1f}" for s in per)
                  + " | lead " + " ".join(f"{s['lead_median']:2.0f}" for s in per)
                  + " | eq " + " ".join(f"{s['equal']:4.2f}" for s in per) + f" | KL last {kl:.1e}")
figs["pieces"] = rows2

# 3 ---------------------------------------------------------------------------------------------------------
print("\n== 3. gdn.state relative error vs f32 after prefill (one call) and after decode step 1, by mantissa bits")
rows3 = {}
for base in ("bf16", "f32"):
    tabs = {}
    for n in (23, 16, 12, 10, 8, 7, 6, 5, 4):
        j = json.loads((out / "state" / f"{base}-b{n}.json").read_text())
        tabs[n] = {t["layer"]: (t["prefill"], t["decode"][0]) for t in j["tensors"] if t["name"] == "gdn.state"}
        tabs[n]["kl_decode1"] = j["logits"]["decode"][0]["kl"]
    layers = sorted(k for k in tabs[23] if isinstance(k, int))
    print(f"base {base}{' + round:gdn.state=N' if base == 'bf16' else ': round:gdn.state=N only'}; decode step 1 "
          "(prefill in brackets)")
    print("   N " + " ".join(f"{'layer ' + str(L):>20}" for L in layers) + f" {'KL dec1':>9}")
    for n in tabs:
        print(f"{n:>4} " + " ".join(f"{tabs[n][L][1]:9.2e} ({tabs[n][L][0]:8.2e})" for L in layers)
              + f" {tabs[n]['kl_decode1']:9.2e}")
    rows3[base] = {str(n): {str(k): v for k, v in t.items()} for n, t in tabs.items()}
figs["state_error"] = rows3

# 4 ---------------------------------------------------------------------------------------------------------
print("\n== 4. KL(f32 || round:gdn.state=N) at the last prefill position (both runs in the same prefill calls)")
rows4 = []
for n in (7, 16):
    for b in (0, 4096, 512, 64):
        j = json.loads((out / "kl0" / f"b{n}-pb{b}.json").read_text())
        k = j["logits"]["prefill"]["kl"]
        rows4.append(dict(bits=n, prefill_block=b, tokens=j["prompt_tokens"], kl=k,
                          rel_err=j["logits"]["prefill"]["rel_err"]))
        what = "one call" if b == 0 else f"blocks of {b}" + (" (the prompt fits one)" if b >= j["prompt_tokens"] else "")
        print(f"N={n:<2} {what:34} prompt {j['prompt_tokens']} tokens: KL {k!r}  logits rel err "
              f"{j['logits']['prefill']['rel_err']:.3e}")
figs["kl_last_prefill"] = rows4

# 5 ---------------------------------------------------------------------------------------------------------
print("\n== 5. KL(reference || variant) by decode step: 4 windows of 2049 tokens (2 prose, 2 code), the last 512"
      " decoded teacher-forced; mean over the windows in 64-step bins; gdn.state rel. error (mean over GDN layers)")
def state_err(j):
    """gdn.state relative error per decode step of one trace JSON, mean over the GDN layers."""
    return np.array([np.mean([t["decode"][k] for t in j["tensors"] if t["name"] == "gdn.state"])
                     for k in range(len(j["decoded"]))])


rows5 = {}
for n in ("f32-round-gdn.state-7", "bf16-bf16-round-gdn.state-7", "bf16-bf16-round-gdn.state-16", "f32-bf16"):
    js = [json.loads((out / "decode" / f"seg{i}-{n}.json").read_text()) for i in range(4)]
    kl = np.array([[d["kl"] for d in j["logits"]["decode"]] for j in js])  # [segment, step]
    st = np.array([state_err(j) for j in js])
    kl0 = [j["logits"]["prefill"]["kl"] for j in js]
    bins = []
    for lo in range(0, kl.shape[1], 64):
        b = kl[:, lo:lo + 64]
        bins.append(dict(steps=f"{lo + 1}-{lo + 64}", mean=float(b.mean()), median=float(np.median(b)),
                         max=float(b.max()), state_err=float(st[:, lo:lo + 64].mean())))
    first, last = bins[0]["mean"], bins[-1]["mean"]
    rows5[n] = dict(kl_last_prefill=kl0, bins=bins, growth_last_over_first=last / first if first > 0 else None)
    print(f"{js[0]['reference']} -> {js[0]['variant']}: KL at the last prefill position {', '.join(f'{x:.2g}' for x in kl0)}")
    print("   steps       " + " ".join(f"{b['steps']:>9}" for b in bins))
    print("   KL mean     " + " ".join(f"{b['mean']:9.2e}" for b in bins))
    print("   KL median   " + " ".join(f"{b['median']:9.2e}" for b in bins))
    print("   state err   " + " ".join(f"{b['state_err']:9.2e}" for b in bins))
    gr = rows5[n]["growth_last_over_first"]
    print("   last bin / first bin (mean KL): " + ("n/a (KL 0)" if gr is None else f"{gr:.3g}"))
    print(f"   steps with KL exactly 0: {int((kl == 0).sum())} of {kl.size}")
    st0 = np.mean([[t["prefill"] for t in j["tensors"] if t["name"] == "gdn.state"] for j in js])
    at = {k: float(st[:, k - 1].mean()) for k in (1, 16, 64, 128, 256, 512)}
    rows5[n]["state_err_after_prefill"], rows5[n]["state_err_at_step"] = float(st0), at
    print(f"   state err after prefill {st0:.2e}; at step " + ", ".join(f"{k}: {e:.2e}" for k, e in at.items()))
figs["decode_growth"] = rows5

print("\n== 5b. The same over 1536 decode steps: the first prose and code windows (2049 tokens, 513 prefilled);"
      " KL mean and gdn.state rel. error (mean over GDN layers) in 256-step bins")
rows5b = {}
for dom in ("prose", "code"):
    for n in ("f32-round-gdn.state-7", "bf16-bf16-round-gdn.state-16"):
        j = json.loads((out / "decode" / f"long-{dom}-{n}.json").read_text())
        kl = np.array([d["kl"] for d in j["logits"]["decode"]])
        st = state_err(j)
        bins = [dict(steps=f"{lo + 1}-{lo + 256}", mean=float(kl[lo:lo + 256].mean()),
                     state_err=float(st[lo:lo + 256].mean())) for lo in range(0, len(kl), 256)]
        first, last = bins[0]["mean"], bins[-1]["mean"]
        rows5b[f"{dom}/{n}"] = dict(bins=bins, growth_last_over_first=last / first if first > 0 else None)
        print(f"{dom}: {j['reference']} -> {j['variant']} ({len(kl)} steps)")
        print("   steps       " + " ".join(f"{b['steps']:>9}" for b in bins))
        print("   KL mean     " + " ".join(f"{b['mean']:9.2e}" for b in bins))
        print("   state err   " + " ".join(f"{b['state_err']:9.2e}" for b in bins))
        print("   last bin / first bin (mean KL): " + ("n/a (KL 0)" if first == 0 else f"{last / first:.3g}"))
figs["decode_growth_1536"] = rows5b
(out / "figures.json").write_text(json.dumps(figs, indent=1))
print(f"\nfigures: {out / 'figures.json'}")
EOF
