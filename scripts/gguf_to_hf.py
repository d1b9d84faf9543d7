#!/usr/bin/env python3
"""Converts a GGUF model into a Hugging Face folder (config, tokenizer, model.safetensors) for engines that
cannot load the GGUF (vLLM's CPU build). transformers' GGUF loader dequantizes the weights to f32; its
save_pretrained refuses a GGUF-loaded model, so the dequantized state dict is written with safetensors.

    gguf_to_hf.py MODEL.gguf OUT_DIR
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    gguf, out = sys.argv[1], sys.argv[2]
    folder, name = os.path.split(os.path.abspath(gguf))
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    os.makedirs(out, exist_ok=True)
    # The weights are written dequantized: drop the GGUF quantization entry (vLLM refuses "gguf" there).
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.save_pretrained(out)
    tok.save_pretrained(out)
    state = model.state_dict()
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # tied: the engine takes it from embed_tokens
    # contiguous copies: safetensors refuses tensors that share memory
    save_file({k: v.detach().contiguous().clone() for k, v in state.items()},
              os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    print(f"gguf_to_hf: {gguf} -> {out} ({len(state)} tensors)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
