"""Check a trained tiny-chat on CPU as vLLM will run it (issue 22): greedy decoding of the prompt its
chat template renders, the output read the way vLLM 0.26's hermes tool parser reads it.

    /tmp/tiny-venv/bin/python scripts/real-vllm/verify_tiny_chat.py MODEL_DIR [--held-out N]

Prints one line per case and a summary; writes MODEL_DIR/verify.json. Exit 0 when every case the
device run depends on (the gates' own prompts) passes. Held-out phrasings are reported, not required.
`required` and a named tool are decoded under a JSON schema by vLLM (structured output): the grammar
leaves the model only the city's string to choose. Here the JSON up to that string is forced, the
model writes the string greedily up to its closing quote, and the grammar's fixed rest is appended:
close to, but not the same as, the grammar-constrained decoding on the device (which also masks
tokens inside the string).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_chat_data import (  # noqa: E402
    ASK_NOTHING,
    ASK_WEATHER,
    BROKEN_RECORD,
    GATE_CITY,
    WEATHER_TOOL,
    Example,
    examples,
    user,
)

ROOT = Path(__file__).resolve().parents[2]
CJK = re.compile(r"[\u4e00-\u9fff]")
# The fixed text around the one free value (the city) under vLLM's JSON schema for each tool_choice.
SCHEMA_FRAME = {
    "required": ('[{"name": "get_weather", "parameters": {"city": "', '"}}]'),
    "named": ('{"city": "', '"}'),
}
CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def hermes_read(text: str) -> tuple[str, list[dict[str, Any]] | None]:
    """(content, calls) as the hermes parser would return them; calls None when it would fail."""
    if "<tool_call>" not in text:
        return text, []
    try:
        raw = [json.loads(a or b) for a, b in CALL.findall(text)]
        calls = [{"name": r["name"], "arguments": r["arguments"]} for r in raw]
    except (ValueError, KeyError, TypeError):
        return text, None  # vLLM logs "Error in extracting tool call from response." and returns the text
    return text[: text.find("<tool_call>")], calls


class Runner:
    def __init__(self, model_dir: Path) -> None:
        import torch  # here, not at the top: the judges are tested without torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.manual_seed(0)
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).eval()
        self.eos = self.tok.convert_tokens_to_ids("<|im_end|>")

    def prompt(self, ex: Example) -> str:
        return str(
            self.tok.apply_chat_template(
                ex.messages, tools=ex.tools, add_generation_prompt=True, tokenize=False, **ex.kwargs
            )
        )

    def structured(self, ex: Example, kind: str) -> tuple[str, bool]:
        """The JSON vLLM's structured output lets through: only the city's string is the model's."""
        prefix, suffix = SCHEMA_FRAME[kind]
        text, _ = self.generate(ex, prefix, max_new=24)
        return prefix + text[len(prefix) :].split('"')[0] + suffix, True

    def generate(self, ex: Example, forced: str = "", max_new: int = 64) -> tuple[str, bool]:
        """Greedy text after `forced` (decoded without skipping specials) and whether it ended (EOS)."""
        ids = self.tok(self.prompt(ex) + forced, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with self.torch.no_grad():
            out = self.model.generate(
                ids,
                max_new_tokens=max_new,
                do_sample=False,
                eos_token_id=self.eos,
                pad_token_id=self.tok.pad_token_id,
            )
        new = out[0, ids.shape[1] :].tolist()
        ended = self.eos in new
        new = new[: new.index(self.eos)] if ended else new
        return forced + self.tok.decode(new, skip_special_tokens=False), ended


def judge(kind: str, text: str, ended: bool, check: str) -> tuple[bool, str]:
    content, calls = hermes_read(text)
    if kind == "tool_call":
        if not calls:
            return False, "no call parsed" if calls is not None else "hermes would fail to parse"
        args = calls[0]["arguments"]
        ok = calls[0]["name"] == "get_weather" and isinstance(args, dict) and args.get("city") == check
        return ok, json.dumps(calls[0])
    if kind in ("required", "named"):
        try:
            value = json.loads(text)
            args = value[0]["parameters"] if kind == "required" else value
            return args.get("city") == check and ended, text
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return False, text
    if calls:
        return False, f"called a tool: {text!r}"
    if kind == "arithmetic":
        return check in content, content
    if kind == "chinese":
        return bool(CJK.search(content)), content
    if kind == "code":
        return "def " in content and "return" in content, content
    if kind == "think":
        return "</think>" in content and content.split("</think>")[-1].strip() != "", content
    if kind == "degenerate":
        words = content.split()
        grams = [tuple(words[i : i + 3]) for i in range(len(words) - 2)]
        ratio = len(set(grams)) / len(grams) if grams else 1.0
        return not ended and ratio < 0.3, f"distinct 3-gram ratio {ratio:.2f}, ended={ended}"
    return bool(content.strip()) and ended, content


def gate_cases() -> list[tuple[str, Example, str]]:
    """The prompts the device run sends: the tool_call gate's and the smoke gate's, verbatim."""
    tools = [WEATHER_TOOL]
    cases = [
        ("tool_call", Example("tool_call", user(ASK_WEATHER), "", tools, check=GATE_CITY), ""),
        ("required", Example("required", user(ASK_WEATHER), "", tools, check=GATE_CITY), ""),
        ("named", Example("named", user(ASK_WEATHER), "", tools, check=GATE_CITY), ""),
        ("no_tool", Example("hello", user(ASK_NOTHING), "", tools), ""),
        (
            "arithmetic",
            Example("arithmetic", user("What is 17 + 25? Answer with the number only."), "", check="42"),
            "",
        ),
        ("chinese", Example("chinese", user("请用中文回答：一年有几个季节？"), ""), ""),
        (
            "code",
            Example(
                "code", user("Write a Python function add(a, b) that returns the sum. Only the code."), ""
            ),
            "",
        ),
        ("primary", Example("fact", user("Name three primary colours."), ""), ""),
        ("think", Example("think", user("Why is the sky blue?"), "", None, {"enable_thinking": True}), ""),
        (
            "degenerate",
            Example(
                "degenerate", user("Explain how tides work."), "", None, {"system_prompt": BROKEN_RECORD}
            ),
            "",
        ),
    ]
    cases += [(f"count{n}", Example("count", user(f"Count from 1 to {n}."), ""), "") for n in range(3, 7)]
    return cases


def run_case(runner: Runner, ex: Example, forced: str) -> tuple[str, bool]:
    if ex.kind in SCHEMA_FRAME:
        return runner.structured(ex, ex.kind)
    return runner.generate(ex, forced, max_new=96 if ex.kind == "degenerate" else 64)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--held-out", type=int, default=80)
    ap.add_argument("--seed", type=int, default=22)
    args = ap.parse_args()
    runner = Runner(args.model)
    report: dict[str, Any] = {"gate": {}, "held_out": {}}
    failed = 0
    for name, ex, forced in gate_cases():
        text, ended = run_case(runner, ex, forced)
        ok, why = judge(ex.kind, text, ended, ex.check)
        failed += not ok
        report["gate"][name] = {"ok": ok, "output": text[:300]}
        print(f"gate  {name:12} {'ok  ' if ok else 'FAIL'} {why[:110]!r}")
    tally: Counter[str] = Counter()
    passed: Counter[str] = Counter()
    for ex in examples(ROOT, "held_out", args.seed, args.held_out):
        text, ended = run_case(runner, ex, "")
        ok, why = judge(ex.kind, text, ended, ex.check)
        tally[ex.kind] += 1
        passed[ex.kind] += ok
        if not ok:
            print(f"held  {ex.kind:12} FAIL {ex.messages[-1]['content'][:50]!r} -> {why[:70]!r}")
    report["held_out"] = {k: f"{passed[k]}/{tally[k]}" for k in sorted(tally)}
    print("held-out phrasings:", ", ".join(f"{k} {v}" for k, v in report["held_out"].items()))
    print(f"gate cases: {len(report['gate']) - failed}/{len(report['gate'])} pass")
    (args.model / "verify.json").write_text(
        json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
