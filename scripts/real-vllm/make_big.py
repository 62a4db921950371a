#!/usr/bin/env python3
"""A random-weight Qwen2 of 2.84 B parameters (5.68 GB in bf16), built from a config on the GPU
machine (no download): the multi-GB model of issue 32's sleep/wake runs. The tokenizer and chat
template are tiny-chat's (make_big.py OUT TOKENIZER_DIR)."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM


def main() -> int:
    out, tokenizer_dir = Path(sys.argv[1]), Path(sys.argv[2])
    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=2560, intermediate_size=9728,
                         num_hidden_layers=28, num_attention_heads=20, num_key_value_heads=4,
                         max_position_embeddings=4096, tie_word_embeddings=True, torch_dtype="bfloat16",
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    torch.manual_seed(32)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    for name in tokenizer_dir.iterdir():
        if name.name.startswith(("tokenizer", "special_tokens", "chat_template", "vocab", "merges")):
            shutil.copy(name, out / name.name)
    params = sum(p.numel() for p in model.parameters())
    size = sum(f.stat().st_size for f in out.glob("*.safetensors"))
    print(
        f"big model at {out}: {params / 1e9:.2f} B parameters, {size / 1e9:.2f} GB, {time.monotonic() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
