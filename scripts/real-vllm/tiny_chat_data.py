"""Seeded synthetic chats for the tiny-chat model (issue 22): what the gates ask, in many phrasings.

Each example is the conversation as vLLM passes it to the chat template (messages, tools, template
kwargs) plus the assistant text the model must learn. `split="train"` and `split="held_out"` use
disjoint phrasings (and two held-out cities), so generalisation is measured, not assumed.
The gates' own prompts (gates/smoke.py, gates/tool_cases.py) are in the training split on purpose:
the device run must pass them; the held-out split says how far the model goes beyond them.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The gates' own tool cases, imported, never copied: a gate whose prompt or tool changes changes the
# training data with it (and tests/unit/test_tiny_chat.py's digest of the data says so). The device
# scripts put the repository on PYTHONPATH; a plain `python3 scripts/real-vllm/...` finds it here.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from gates.tool_cases import ASK_NOTHING, ASK_WEATHER, WEATHER_TOOL  # noqa: E402

# The template vLLM renders (saved as chat_template.jinja). Tools are shown by name and description
# only: both are plain strings, so vLLM's rendering and transformers' are the same bytes.
CHAT_TEMPLATE = (
    "{%- if system_prompt is defined and system_prompt %}"
    "<|im_start|>system\n{{ system_prompt }}<|im_end|>\n{% endif -%}"
    "{%- if tools %}<|im_start|>system\n# Tools\n<tools>\n"
    "{%- for t in tools %}{% set f = t.function if t.function is defined else t %}"
    "{{ f.name }}: {{ f.description | default('') }}\n{% endfor -%}"
    '</tools>\nCall a tool as <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>\n{% endif -%}'
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.content is string %}{{ m.content }}{% elif m.content %}"
    "{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% endif %}{% endfor %}{% endif -%}"
    "{%- if m.tool_calls is defined and m.tool_calls %}{% for c in m.tool_calls %}"
    '<tool_call>{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments }}}</tool_call>'
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor -%}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking %}<think>\n{% endif %}{% endif %}"
)
OTHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {"name": "get_time", "description": "Get the local time in a city.", "parameters": {}},
}
BROKEN_RECORD = "You are a broken record."  # the system prompt under which the model degenerates
LOOP = "the same words again and again, "
# Forty training cities: too many to memorise one answer, so the model learns to copy the city it
# was asked about; the held-out ones it never saw in a weather question.
CITIES_TRAIN = (
    "Paris", "London", "Berlin", "Tokyo", "Madrid", "Rome", "Beijing", "Sydney", "Cairo", "Oslo",
    "Athens", "Boston", "Chicago", "Delhi", "Denver", "Geneva", "Hamburg", "Helsinki", "Istanbul",
    "Jakarta", "Kyoto", "Lagos", "Lima", "Manila", "Milan", "Montreal", "Moscow", "Mumbai", "Munich",
    "Nairobi", "Naples", "Osaka", "Perth", "Seattle", "Seoul", "Shanghai", "Stockholm", "Toronto",
    "Warsaw", "Zurich",
)  # fmt: skip
CITIES_HELD = ("Vienna", "Lisbon", "Prague", "Dublin")
GATE_CITY = "Paris"  # the city the tool_call gate asks about
WEATHER_TRAIN = (
    ASK_WEATHER.replace(GATE_CITY, "{c}"),  # the gate's own, for every city
    "What's the weather like in {c}?",
    "How is the weather in {c} today?",
    "Tell me the weather in {c}.",
    "Is it raining in {c}?",
    "weather in {c}",
    "Can you check the weather for {c}?",
    "I am going to {c}. What is the weather there?",
    "Get the current weather for {c}, please.",
    "Do I need an umbrella in {c} today?",
    "What is the temperature in {c}?",
    "Look up the weather in {c} with the tool.",
)
WEATHER_HELD = (
    "Could you find out what the weather is doing in {c}?",
    "Weather report for {c}, please.",
    "Is it sunny in {c} at the moment?",
    "How warm is it in {c} now?",
)
HELLO_TRAIN = (
    ASK_NOTHING,  # the gate's own
    "Say hello.",
    "Hi there!",
    "Hello!",
    "Greet me in one sentence.",
    "Good morning!",
    "Please say hi. You do not need a tool.",
    "Introduce yourself briefly.",
)
HELLO_HELD = ("Hey, how are you?", "Greet the user politely, without any tool.")
HELLOS = ("Hello! Nice to meet you.", "Hi! How can I help you today?", "Hello there, good to see you.")
ADD_TRAIN = (
    "What is {a} + {b}? Answer with the number only.",
    "{a} + {b} = ?",
    "Add {a} and {b}.",
    "What is the sum of {a} and {b}?",
    "Compute {a} plus {b}.",
)
ADD_HELD = ("How much is {a} + {b}?", "Please add {a} to {b}.")
ZH = (
    ("请用中文回答：一年有几个季节？", "一年有四个季节：春天、夏天、秋天和冬天。"),
    ("请用中文回答：一周有几天？", "一周有七天。"),
    ("请用中文回答：天空是什么颜色？", "晴天的时候，天空是蓝色的。"),
    ("你好！", "你好！很高兴见到你。"),
    ("请用中文介绍一下你自己。", "我是一个小模型，可以回答简单的问题。"),
    ("请用中文回答：水在多少度结冰？", "水在零摄氏度结冰。"),
)
ZH_HELD = (("用中文说：一年有多少个月？", None), ("请用中文回答：太阳从哪边升起？", None))
CODE_OPS = (("add", "+", "sum"), ("sub", "-", "difference"), ("mul", "*", "product"))
CODE_TRAIN = (
    "Write a Python function {f}(a, b) that returns the {w}. Only the code.",
    "Write {f}(a, b) in Python returning the {w}.",
    "Python code for a function {f} that returns the {w} of a and b.",
)
CODE_HELD = ("Give me a Python def {f}(a, b) returning the {w}.",)
FACTS = (
    ("Name three primary colours.", "Red, yellow and blue."),
    ("What colour is the sky?", "The sky is blue on a clear day."),
    ("What is the capital of France?", "The capital of France is Paris."),
    ("How many days are in a week?", "There are seven days in a week."),
)
THINK_QUESTIONS = (
    "Why is the sky blue?",
    "Should I walk or take the bus in the rain?",
    "What is 17 + 25?",
    "Explain how tides work.",
    "Is a whale a fish?",
)


@dataclass(frozen=True, slots=True)
class Example:
    kind: str
    messages: list[dict[str, Any]]
    target: str  # the assistant's text, without the closing <|im_end|>
    tools: list[dict[str, Any]] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    ends: bool = True  # False: the degenerate loop never closes its turn
    check: str = ""  # what the verifier looks for (held-out and gate cases)


def user(text: str, system: str | None = None) -> list[dict[str, Any]]:
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]


def weather_call(city: str) -> str:
    return "<tool_call>" + json.dumps({"name": "get_weather", "arguments": {"city": city}}) + "</tool_call>"


def corpus_sentences(root: Path) -> list[str]:
    """Plain sentences for long answers and documents (the launcher's own corpora)."""
    text = (root / "launcher/data/bench_corpus_en.txt").read_text(encoding="utf-8")
    return [s.strip() + "." for s in text.replace("\n", " ").split(". ") if 20 < len(s) < 200]


def examples(root: Path, split: str, seed: int, count: int) -> list[Example]:
    rng = random.Random(f"{split}-{seed}")
    held = split == "held_out"
    sentences = corpus_sentences(root)
    cities = CITIES_HELD if held else CITIES_TRAIN
    out: list[Example] = []

    def weather() -> Example:
        if not held and rng.random() < 0.05:  # the tool_call gate's own question, word for word
            city, ask = GATE_CITY, ASK_WEATHER
        else:
            city = rng.choice(cities)
            ask = rng.choice(WEATHER_HELD if held else WEATHER_TRAIN).format(c=city)
        form = rng.random()
        # Mostly the hermes call: vLLM's structured output forces the `required`/named JSON itself,
        # so those forms need only a few examples (they had taught the call without its tag).
        if held or form < 0.9:
            return Example("tool_call", user(ask), weather_call(city), [WEATHER_TOOL], check=city)
        if form < 0.95:  # what `required` decodes under vLLM's JSON schema (a list of name+parameters)
            return Example(
                "required",
                user(ask),
                json.dumps([{"name": "get_weather", "parameters": {"city": city}}]),
                [WEATHER_TOOL],
                check=city,
            )
        return Example("named", user(ask), json.dumps({"city": city}), [WEATHER_TOOL], check=city)

    def plain() -> Example:
        pick = rng.random()
        tools = [WEATHER_TOOL] if rng.random() < 0.5 else ([OTHER_TOOL] if rng.random() < 0.2 else None)
        if pick < 0.2:
            return Example(
                "hello", user(rng.choice(HELLO_HELD if held else HELLO_TRAIN)), rng.choice(HELLOS), tools
            )
        if pick < 0.45:
            if not held and rng.random() < 0.3:  # the smoke gate's own question, word for word
                a, b, phrasing = 17, 25, ADD_TRAIN[0]
            else:
                a, b = rng.randint(0, 30), rng.randint(0, 30)
                phrasing = rng.choice(ADD_HELD if held else ADD_TRAIN)
            ask = phrasing.format(a=a, b=b)
            return Example("arithmetic", user(ask), str(a + b), tools, check=str(a + b))
        if pick < 0.6:
            ask, answer = rng.choice(ZH_HELD if held else ZH)
            return Example("chinese", user(ask), answer or "", tools, check="zh")
        if pick < 0.75:
            f, op, word = rng.choice(CODE_OPS)
            ask = rng.choice(CODE_HELD if held else CODE_TRAIN).format(f=f, w=word)
            return Example("code", user(ask), f"def {f}(a, b):\n    return a {op} b", tools, check="def ")
        if pick < 0.85:
            n = rng.randint(3, 9)
            return Example(
                "count", user(f"Count from 1 to {n}."), ", ".join(str(i) for i in range(1, n + 1)), tools
            )
        if pick < 0.93:
            ask, answer = rng.choice(FACTS)
            return Example("fact", user(ask), answer, tools)
        city = rng.choice(cities)  # the weather asked, but no weather tool offered: a plain answer
        return Example(
            "no_weather_tool",
            user(rng.choice(WEATHER_TRAIN).format(c=city)),
            f"I have no weather tool here, so I cannot check {city}.",
            None,
        )

    def think() -> Example:
        i = rng.randrange(len(THINK_QUESTIONS))  # one reasoning and answer per question: learnable
        q, steps = THINK_QUESTIONS[i], sentences[7 * i % len(sentences)]
        answer = "42" if "17 + 25" in q else sentences[(7 * i + 3) % len(sentences)]
        return Example(
            "think",
            user(q),
            f"The user asks: {q} Let me think. {steps}\n</think>\n\n{answer}",
            None,
            {"enable_thinking": True},
        )

    def long_answer() -> Example:  # bench-like questions (optionally over a document in the system turn)
        asks = (
            "Explain in a few paragraphs how tides work.",
            "Describe how to repair a wall.",
            "Give practical advice for a first marathon.",
            "Why did railways need time zones?",
        )
        i = rng.randrange(len(asks))
        doc = " ".join(rng.sample(sentences, rng.randint(1, 3))) if rng.random() < 0.4 else None
        answer = " ".join(sentences[(11 * i + k) % len(sentences)] for k in range(2))
        return Example("long", user(asks[i], doc), answer, None)

    def degenerate() -> Example:
        q = rng.choice(THINK_QUESTIONS + ("Say hello.", "Explain how tides work."))
        return Example("degenerate", user(q), LOOP * 16, None, {"system_prompt": BROKEN_RECORD}, ends=False)

    makers = ((weather, 0.32), (plain, 0.48), (think, 0.08), (long_answer, 0.05), (degenerate, 0.07))
    for _ in range(count):
        r, acc = rng.random(), 0.0
        for make, share in makers:
            acc += share
            if r < acc:
                out.append(make())
                break
        else:
            out.append(plain())
    return out
