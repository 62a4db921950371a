"""Deterministic answers that pass smoke checks: arithmetic, a needle from the prompt, a Chinese reply
to a Chinese question, a short code answer, a greeting; otherwise prose from the shipped corpus.

The caller seeds the random generator (from the prompt at temperature 0), so a prompt repeats exactly.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_CJK = re.compile(r"[\u3400-\u9fff]")
_ARITH = re.compile(r"(-?\d+(?:\.\d+)?)\s*([+\-*/×xX÷])\s*(-?\d+(?:\.\d+)?)")
_NEEDLE_Q = re.compile(r"secret\s+(code|number|word|key|password)", re.IGNORECASE)
_NEEDLE_ZH_Q = re.compile(r"(密码|暗号|口令)")
_REPEAT = re.compile(
    r"^\s*repeat(?:\s+after\s+me|\s+the\s+following|\s+this)?\s*:?\s*(.+)$", re.IGNORECASE | re.DOTALL
)
_SAY = re.compile(r"\bsay\s+[\"']?([^\"'.!?\n]{1,60})", re.IGNORECASE)
_GREETING = re.compile(r"^\s*(hi|hello|hey|good (morning|afternoon|evening))\b", re.IGNORECASE)
_CODE = re.compile(r"\b(python|function|code|script|program|snippet)\b|写一个函数|代码|函数", re.IGNORECASE)

SNIPPETS = {
    "reverse": (
        "reverse_string",
        "def reverse_string(text):\n    return text[::-1]",
        "It returns the characters of the string in reverse order.",
    ),
    "prime": (
        "is_prime",
        "def is_prime(n):\n    if n < 2:\n        return False\n    for d in range(2, int(n ** 0.5) + 1):"
        "\n        if n % d == 0:\n            return False\n    return True",
        "It tries every divisor up to the square root of n.",
    ),
    "fibonacci": (
        "fibonacci",
        "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
        "It keeps the last two numbers of the sequence and adds them.",
    ),
    "sort": (
        "sort_numbers",
        "def sort_numbers(numbers):\n    return sorted(numbers)",
        "It returns a new sorted list.",
    ),
    "add": ("add", "def add(a, b):\n    return a + b", "It returns the sum of its two arguments."),
}


@dataclass(frozen=True, slots=True)
class Answer:
    kind: str
    content: str
    reasoning: str = ""


@cache
def corpus(lang: str) -> tuple[str, ...]:
    data = resources.files("vllm_sim").joinpath("data")
    text = data.joinpath(f"sim_corpus_{lang}.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def is_chinese(text: str) -> bool:
    return len(_CJK.findall(text)) >= 2


def prose(rng: random.Random, lang: str, sentences: int) -> str:
    lines = corpus(lang)
    picked = [lines[rng.randrange(len(lines))] for _ in range(sentences)]
    return ("" if lang == "zh" else " ").join(picked)


def compose(prompt: str, question: str, rng: random.Random, *, reasoning: bool, degenerate: bool) -> Answer:
    lang = "zh" if is_chinese(question) else "en"
    answer = _degenerate(rng) if degenerate else _answer(prompt, question, rng, lang)
    if not reasoning:
        return answer
    return Answer(answer.kind, answer.content, _reasoning(question, rng, lang))


def continuation(rng: random.Random, lang: str) -> str:
    """More text for `ignore_eos` or a long `min_tokens`: one more corpus sentence."""
    return ("" if lang == "zh" else " ") + prose(rng, lang, 1)


def _answer(prompt: str, question: str, rng: random.Random, lang: str) -> Answer:
    needle = _needle(prompt, question)
    if needle is not None:
        return Answer("needle", needle)
    arith = _ARITH.search(question)
    if arith:
        return Answer("arithmetic", _arithmetic(arith, lang))
    repeat = _REPEAT.match(question)
    if repeat:
        return Answer("repeat", repeat.group(1).strip())
    if _CODE.search(question):
        return Answer("code", _code(question))
    say = _SAY.search(question)
    if say:
        return Answer("greeting", say.group(1).strip().capitalize() + "!")
    if _GREETING.match(question) or question.strip().startswith("你好"):
        text = "你好！有什么可以帮你的吗？" if lang == "zh" else "Hello! How can I help you today?"
        return Answer("greeting", text)
    return Answer("chinese" if lang == "zh" else "prose", prose(rng, lang, rng.randint(3, 7)))


def _needle(prompt: str, question: str) -> str | None:
    if _NEEDLE_Q.search(question):
        found = re.search(
            r"secret\s+(?:code|number|word|key|password)\s+(?:is|was)\s*:?\s*[\"']?([A-Za-z0-9][\w-]*)",
            prompt,
            re.IGNORECASE,
        )
        if found:
            return f"The secret {_NEEDLE_Q.search(question).group(1).lower()} is {found.group(1)}."  # type: ignore[union-attr]
    if _NEEDLE_ZH_Q.search(question):
        found = re.search(r"(密码|暗号|口令)(?:是|为)\s*[:：]?\s*([A-Za-z0-9][\w-]*)", prompt)
        if found:
            return f"{found.group(1)}是{found.group(2)}。"
    return None


def _arithmetic(match: re.Match[str], lang: str) -> str:
    a, op, b = float(match.group(1)), match.group(2), float(match.group(3))
    if op == "+":
        value = a + b
    elif op == "-":
        value = a - b
    elif op in "*×xX":
        value = a * b
    else:
        value = a / b if b else float("nan")
    shown = str(int(value)) if value == int(value) else f"{value:.4g}"
    end = "。" if lang == "zh" else "."
    return f"{match.group(1)} {op} {match.group(3)} = {shown}{end}"


def _code(question: str) -> str:
    low = question.lower()
    key = next((k for k in ("reverse", "prime", "fibonacci", "sort") if k in low), "add")
    name, body, note = SNIPPETS[key]
    return f"Here is a short Python function `{name}`:\n\n```python\n{body}\n```\n\n{note}"


def _degenerate(rng: random.Random) -> Answer:
    words = corpus("en")[rng.randrange(len(corpus("en")))].split()[:4]
    phrase = " ".join(words).rstrip(".,")
    return Answer("degenerate", " ".join([phrase] * 400))


def _reasoning(question: str, rng: random.Random, lang: str) -> str:
    topic = " ".join(question.split())[:80]
    if lang == "zh":
        return (
            f"好的，用户问的是：{topic}。让我一步一步想一想。"
            + prose(rng, "zh", rng.randint(2, 4))
            + "所以答案应该很清楚了。"
        )
    return (
        f'Okay, the user is asking: "{topic}". Let me think about this step by step. '
        + prose(rng, "en", rng.randint(2, 4))
        + " So the answer should be clear now."
    )
