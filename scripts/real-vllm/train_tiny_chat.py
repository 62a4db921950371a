"""Train tiny-chat (issue 22): make_tiny.py's 2-layer Qwen2 shape, taught the gates' chats on CPU.

    /tmp/tiny-venv/bin/python scripts/real-vllm/train_tiny_chat.py OUT_DIR [--steps N] [--seed S]

Deterministic (seeded data, seeded init, one thread order): the same command gives the same
weights. A BPE tokenizer is trained on the synthetic chats first; `<tool_call>`, `</tool_call>`,
`<think>`, `</think>` are added tokens that are NOT special, as in Qwen's tokenizers, so vLLM keeps
them in the text its hermes tool parser and its reasoning parsers read. The weights are saved in
bfloat16 (a few MB) with the template vLLM renders. Then run verify_tiny_chat.py on OUT_DIR.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_chat_data import CHAT_TEMPLATE, Example, corpus_sentences, examples  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAGS = ["<tool_call>", "</tool_call>", "<think>", "</think>"]


def build_tokenizer(texts: list[str], vocab: int) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=vocab, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAGS])
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    hf.chat_template = CHAT_TEMPLATE
    return hf


def render(hf: PreTrainedTokenizerFast, ex: Example) -> str:
    """The prompt text exactly as vLLM asks the template for it (add_generation_prompt, tools, kwargs)."""
    return str(
        hf.apply_chat_template(
            ex.messages, tools=ex.tools, add_generation_prompt=True, tokenize=False, **ex.kwargs
        )
    )


def encode(hf: PreTrainedTokenizerFast, ex: Example, limit: int) -> tuple[list[int], list[int]]:
    prompt = hf(render(hf, ex), add_special_tokens=False)["input_ids"]
    target = hf(ex.target + ("<|im_end|>" if ex.ends else ""), add_special_tokens=False)["input_ids"]
    ids = (prompt + target)[:limit]
    labels = ([-100] * len(prompt) + target)[:limit]
    return ids, labels


def batches(encoded: list[tuple[list[int], list[int]]], size: int, pad: int, rng: random.Random):
    """Length-bucketed batches (little padding), in a seeded random order, forever."""
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
    groups = [order[i : i + size] for i in range(0, len(order), size)]
    while True:
        rng.shuffle(groups)
        for group in groups:
            width = max(len(encoded[i][0]) for i in group)
            ids = torch.full((len(group), width), pad)
            labels = torch.full((len(group), width), -100)
            mask = torch.zeros((len(group), width), dtype=torch.long)
            for row, i in enumerate(group):
                x, y = encoded[i]
                ids[row, : len(x)], labels[row, : len(y)], mask[row, : len(x)] = (
                    torch.tensor(x),
                    torch.tensor(y),
                    1,
                )
            yield ids, labels, mask


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--examples", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--threads", type=int, default=1)  # 2 threads crawl on a shared 2-core host
    ap.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu", help="cuda: seconds on the GPU machine"
    )
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    if args.device == "cuda":  # cuBLAS is deterministic only with a fixed workspace
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    started = time.monotonic()
    train = examples(ROOT, "train", args.seed, args.examples)
    texts = [e.target for e in train] + [json.dumps(e.messages, ensure_ascii=False) for e in train[:2000]]
    texts += corpus_sentences(ROOT) + [
        (ROOT / "launcher/data/bench_corpus_zh.txt").read_text(encoding="utf-8")
    ]
    hf = build_tokenizer(texts + [CHAT_TEMPLATE], vocab=2000)
    encoded = [encode(hf, e, 384) for e in train]
    cfg = Qwen2Config(
        vocab_size=len(hf),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        eos_token_id=hf.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=hf.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
    )
    model = Qwen2ForCausalLM(cfg).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    warm = max(1, args.steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps)))
    )
    feed = batches(encoded, args.batch, hf.pad_token_id, random.Random(args.seed))
    model.train()
    print(
        f"{len(encoded)} sequences, {sum(len(x) for x, _ in encoded)} tokens, "
        f"setup {time.monotonic() - started:.0f} s",
        flush=True,
    )
    for step in range(1, args.steps + 1):
        ids, labels, mask = (t.to(args.device) for t in next(feed))
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 25 == 0 or step == args.steps:
            print(
                f"step {step}/{args.steps} loss {loss.item():.4f} {time.monotonic() - started:.0f} s",
                flush=True,
            )
    args.out.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(args.out)
    model.to("cpu", torch.bfloat16).save_pretrained(args.out, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"tiny-chat at {args.out}: vocab {len(hf)}, {params} parameters, {args.steps} steps, "
        f"{len(train)} examples, {time.monotonic() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
