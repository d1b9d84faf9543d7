#!/usr/bin/env python3
"""The GPU check without vLLM (scripts/gpu_check.sh): SmolLM2-135M through transformers on the GPU with
kerncheck.torch — four bf16 floor runs (attention implementations sdpa and eager, batch sizes 1 and 4), a
benign candidate (sdpa, batch size 2) and a degraded one (layer 15's MLP output rounded to 3 mantissa bits),
each scored at the golden's positions (recorded by kerncheck's f32 engine).
  .venv/bin/python bench/gpu_torch_check.py GGUF OUT_DIR
"""
import subprocess
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "build" / "python"))
import kerncheck.torch as kt  # noqa: E402

gguf, out = sys.argv[1], Path(sys.argv[2])
hf = out / "hf"
if not hf.exists():
    subprocess.run([sys.executable, ROOT / "scripts" / "gguf_to_hf.py", gguf, hf], check=True)
golden = out / "g.kcg"


def load(attn):
    return AutoModelForCausalLM.from_pretrained(hf, torch_dtype=torch.bfloat16, attn_implementation=attn).cuda().eval()


t0 = time.time()
for attn in ("sdpa", "eager"):
    m = load(attn)
    for b in (1, 4):
        f = out / f"floor-{attn}-b{b}.kcc"
        if not f.exists():
            kt.record_candidate(m, golden, f, batch_size=b, variant="bf16", progress=False)
    if attn == "sdpa":
        if not (out / "benign.kcc").exists():
            kt.record_candidate(m, golden, out / "benign.kcc", batch_size=2, variant="bf16", progress=False)
        if not (out / "degraded.kcc").exists():
            h = kt.round_module_output(m, "model.layers.15.mlp", 3)
            kt.record_candidate(m, golden, out / "degraded.kcc", batch_size=1, variant="bf16", progress=False)
            h.remove()
    del m
    torch.cuda.empty_cache()
print(f"gpu_torch_check: floor and candidates recorded in {time.time() - t0:.0f} s on {torch.cuda.get_device_name()}")
