"""What the bench sends: contexts, the prompt set, cold prompts, rounds, and request bodies.

Rules, each one a trap the operator fell into (docs/bench.md):
- every concurrency level runs the *same* prompt set, as whole copies (c=32 with 8 prompts runs
  each prompt 4 times), never `PROMPTS[i % c]`, which gave c1 only prompt 0;
- every prompt starts with its own header, so no two prompts share a cacheable prefix, and a cold
  prompt gets a fresh unique header and its own shuffle: nothing is nested in anything;
- temperature > 0 sends a seed per (prompt, copy): reproducible, yet copies differ. At temperature
  0 the seed is left out (greedy ignores it); identical copies are then flagged by `checks.py`.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from launcher.bench import corpus
from launcher.errors import BadInput

TEMPLATE_TOKENS = 12  # chat-template tokens around one user message (role markers), roughly
_CONTEXT = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<k>[kK]?)$")

QUESTIONS_DOC = {
    "en": (
        "Using only the document above, write a detailed summary of its three most interesting passages "
        "and explain what each one teaches.",
        "Based on the document above, compare two of the practices it describes and discuss what they have "
        "in common, in several paragraphs.",
        "Write a short essay, grounded in the document above, about patience in different trades.",
        "From the document above, pick one topic and explain it to a curious twelve year old, step by step.",
    ),
    "zh": (
        "请只根据上面的文档，详细总结其中最有意思的三段内容，并分别说明它们告诉了我们什么。",
        "根据上面的文档，比较其中描述的两种做法，分几段讨论它们的共同点。",
        "请以上面的文档为依据，写一篇短文，谈谈耐心在不同行当里是怎样体现的。",
        "从上面的文档中选一个话题，一步一步地讲给一个好奇的十二岁孩子听。",
    ),
}
QUESTIONS_SHORT = {
    "en": (
        "Explain in a few paragraphs how tides work and why storms can make them higher than predicted.",
        "Describe, step by step, how to repair a dry stone wall, and why no mortar is needed.",
        "Why did railways push the world towards standard time zones? Answer in several paragraphs.",
        "Give practical advice, in detail, for someone running their first marathon.",
    ),
    "zh": (
        "请分几段解释潮汐是怎样形成的，以及为什么风暴会让潮位高于预报。",
        "请一步一步说明怎样修一段干砌石墙，以及为什么不需要灰浆。",
        "为什么铁路推动了世界采用统一的时区？请分几段回答。",
        "请给第一次跑马拉松的人一些详细、实用的建议。",
    ),
}


@dataclass(frozen=True, slots=True)
class ContextSpec:
    """A prompt length: `short` (a question alone) or a document of about `tokens` prompt tokens."""

    name: str
    tokens: int

    @property
    def short(self) -> bool:
        return self.tokens == 0


def parse_contexts(text: str) -> tuple[ContextSpec, ...]:
    """`short,8k,28k,64k` (k = 1000 tokens) or plain token counts; order kept, duplicates dropped."""
    specs: list[ContextSpec] = []
    for raw in (p.strip() for p in text.split(",")):
        if not raw:
            continue
        if raw.lower() == "short":
            spec = ContextSpec("short", 0)
        else:
            match = _CONTEXT.match(raw)
            if not match:
                raise BadInput(
                    f"--contexts: {raw!r} is not a context length",
                    hint="use short, or token counts such as 8k, 28k, 64k, 2000",
                )
            tokens = int(float(match.group("n")) * (1000 if match.group("k") else 1))
            if tokens < 64:
                raise BadInput(f"--contexts: {raw!r} is too short for a document", hint="use `short` instead")
            spec = ContextSpec(raw.lower(), tokens)
        if spec.name not in {s.name for s in specs}:
            specs.append(spec)
    if not specs:
        raise BadInput("--contexts is empty", hint="e.g. --contexts short,8k")
    return tuple(specs)


@dataclass(frozen=True, slots=True)
class BenchPrompt:
    """A document (system message, with the prompt's own header first) and a question (user message).

    The document goes in the system message so the question is the user's turn, as in a chat over a
    file; a short prompt has no system message and carries its header in the user message.
    """

    context: str
    index: int
    lang: str
    system: str
    user: str

    @property
    def text(self) -> str:
        return f"{self.system}\n\n{self.user}" if self.system else self.user

    def messages(self) -> list[dict[str, str]]:
        turns = [{"role": "system", "content": self.system}] if self.system else []
        return turns + [{"role": "user", "content": self.user}]


@dataclass(frozen=True, slots=True)
class Slot:
    """One request of a round: prompt `prompt.index`, copy `copy` of the set."""

    prompt: BenchPrompt
    copy: int


class Workload:
    """Builds the run's prompts; `ratios` (server tokens per estimated token, per language) come from
    calibration probes."""

    def __init__(
        self, run_id: str, prompts: int, *, seed: int = 1, ratios: dict[str, float] | None = None
    ) -> None:
        self.run_id = run_id
        self.size = prompts
        self.seed = seed
        self.ratios = dict(ratios or {})

    def _prompt(self, header: str, context: ContextSpec, index: int, doc_seed: int) -> BenchPrompt:
        lang = corpus.LANGS[index % len(corpus.LANGS)]
        pool = QUESTIONS_SHORT if context.short else QUESTIONS_DOC
        question = pool[lang][(index // len(corpus.LANGS)) % len(pool[lang])]
        if context.short:
            return BenchPrompt(context.name, index, lang, "", f"{header}\n{question}")
        extra = (corpus.estimate_tokens(header) + corpus.estimate_tokens(question)) * self.ratios.get(
            lang, 1.0
        )
        budget = max(16.0, context.tokens - TEMPLATE_TOKENS - extra)
        document = corpus.document(doc_seed, budget, self.ratios)
        return BenchPrompt(context.name, index, lang, f"{header}\n\n{document}", question)

    def prompt_set(self, context: ContextSpec) -> tuple[BenchPrompt, ...]:
        """The prompts every concurrency level of this context runs."""
        out = []
        for i in range(self.size):
            header = f"[bench {self.run_id} | {context.name} | prompt {i + 1} of {self.size}]"
            out.append(self._prompt(header, context, i, self.seed * 100_003 + 7919 * i + context.tokens))
        return tuple(out)

    def cold_prompt(self, context: ContextSpec, k: int) -> BenchPrompt:
        """A prompt nobody has sent before: unique header, its own shuffle of the corpus."""
        unique = uuid.uuid4().hex
        header = f"[cold {unique} | bench {self.run_id} | {context.name} | sample {k + 1}]"
        return self._prompt(header, context, k, int(unique[:12], 16))

    def probe_prompt(self, lang: str, tokens_est: float = 1500.0) -> str:
        """A one-language corpus sample for tokenizer calibration (only its token count matters)."""
        return f"[calibration {lang}]\n\n" + corpus.language_sample(lang, tokens_est)

    def round_slots(self, prompts: tuple[BenchPrompt, ...], concurrency: int) -> list[Slot]:
        """Whole copies of the set, enough to keep `concurrency` requests in flight."""
        copies = max(1, -(-concurrency // len(prompts)))
        return [Slot(p, c) for c in range(copies) for p in prompts]


def request_body(
    model: str, messages: list[dict[str, str]], *, max_tokens: int, temperature: float, seed: int | None
) -> bytes:
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": max_tokens,
        "temperature": temperature,
    }
    if seed is not None and temperature > 0:
        body["seed"] = seed
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


def slot_seed(base: int, slot: Slot) -> int:
    return base * 1_000_003 + slot.copy * 1009 + slot.prompt.index
