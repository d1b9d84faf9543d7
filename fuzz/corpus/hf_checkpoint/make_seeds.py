#!/usr/bin/env python3
"""Writes the seeds of fuzz/hf_checkpoint.cpp here: tiny valid checkpoints (framed as that file describes)
of the three supported architectures, single-file and sharded. Run from anywhere; needs numpy, safetensors."""
import json
import struct
from pathlib import Path

import numpy as np
from safetensors.numpy import save

OUT = Path(__file__).resolve().parent
V, D, F, H, KV, HD = 16, 8, 12, 2, 1, 4


def weights(arch, tied, dtype):
    rng = np.random.default_rng(0)
    w = {"model.embed_tokens.weight": (V, D), "model.norm.weight": (D,)}
    for i in range(1):
        p = f"model.layers.{i}."
        w.update({p + "input_layernorm.weight": (D,), p + "post_attention_layernorm.weight": (D,),
                  p + "self_attn.q_proj.weight": (H * HD, D), p + "self_attn.k_proj.weight": (KV * HD, D),
                  p + "self_attn.v_proj.weight": (KV * HD, D), p + "self_attn.o_proj.weight": (D, H * HD),
                  p + "mlp.gate_proj.weight": (F, D), p + "mlp.up_proj.weight": (F, D), p + "mlp.down_proj.weight": (D, F)})
        if arch == "qwen2":
            w.update({p + "self_attn.q_proj.bias": (H * HD,), p + "self_attn.k_proj.bias": (KV * HD,),
                      p + "self_attn.v_proj.bias": (KV * HD,)})
        if arch == "qwen3":
            w.update({p + "self_attn.q_norm.weight": (HD,), p + "self_attn.k_norm.weight": (HD,)})
    if not tied:
        w["lm_head.weight"] = (V, D)
    return {k: rng.standard_normal(s).astype(dtype) for k, s in w.items()}


def config(arch, tied):
    c = {"model_type": arch, "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                                                "qwen3": "Qwen3ForCausalLM"}[arch]],
         "vocab_size": V, "hidden_size": D, "intermediate_size": F, "num_hidden_layers": 1,
         "num_attention_heads": H, "num_key_value_heads": KV, "hidden_act": "silu", "rms_norm_eps": 1e-6,
         "max_position_embeddings": 64, "tie_word_embeddings": tied,
         "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    if arch == "qwen3":
        c["head_dim"] = HD
    return json.dumps(c).encode()


def frame(cfg, st, index=None):
    b = bytes([1 if index is not None else 0]) + struct.pack("<H", len(cfg)) + cfg
    if index is not None:
        b += struct.pack("<H", len(index)) + index
    return b + st


for arch, tied, dtype in [("llama", True, np.float32), ("qwen2", False, np.float16), ("qwen3", True, np.float32)]:
    w = weights(arch, tied, dtype)
    st = save(w)
    (OUT / f"{arch}_single").write_bytes(frame(config(arch, tied), st))
    idx = json.dumps({"metadata": {"total_size": sum(a.nbytes for a in w.values())},
                      "weight_map": {k: "model-00001-of-00001.safetensors" for k in w}}).encode()
    (OUT / f"{arch}_sharded").write_bytes(frame(config(arch, tied), st, idx))
print(sorted(p.name for p in OUT.iterdir()))
