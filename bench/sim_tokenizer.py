"""Write a local Hugging Face tokenizer folder for tools that insist on one (aiperf, GuideLLM).

No download: a word-level tokenizer shaped like vllm-sim's toy tokenizer (words, digits, CJK
characters, punctuation), built with the `tokenizers` package in the tools' own venv. Token
counts come from the server's usage anyway (`--use-server-token-count`).

    /tmp/aiperf-venv/bin/python bench/sim_tokenizer.py /tmp/sim-tokenizer
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tokenizers import Regex, Tokenizer, models, pre_tokenizers  # type: ignore[import-not-found]


def write(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"<unk>": 0, "<|endoftext|>": 1}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    pattern = Regex(r"[A-Za-z]+|\d|[\u3400-\u9fff]|[^\sA-Za-z\d]")
    tok.pre_tokenizer = pre_tokenizers.Split(pattern, behavior="isolated")
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "<unk>",
        "eos_token": "<|endoftext|>",
        "model_max_length": 1_000_000,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    return folder


if __name__ == "__main__":
    print(write(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/sim-tokenizer")))
