"""Representative traffic for gates: real sentences at realistic prompt lengths, in English and
Chinese — not a four-character warm-up (which hid the allocator's real working set in the field)."""

from __future__ import annotations

import itertools
from typing import Any

PARAGRAPHS = (
    "The river rose through the night, and by morning the lower streets of the town were under water. "
    "Volunteers carried sandbags from the church to the bakery while the mayor spoke on the radio about "
    "the bridges that had to be closed.",
    "A compiler reads the program once to build a tree of its structure, then walks that tree to check "
    "types, and finally emits instructions for the machine. Each pass hands a simpler form to the next.",
    "秋天的早晨，山路上起了薄雾。老师带着学生们沿着小溪往上走，一边走一边讲解岩石的形成和河流的变化。",
    "When the orchestra tuned, the oboe gave the A and every section answered it in turn, strings first, "
    "then the winds, until the hall was filled with one long, slightly uneven note.",
    "数据库在写入之前先记录日志，这样即使机器突然断电，重新启动后也能根据日志恢复到一致的状态。",
    "The expedition counted birds along the coast every spring for thirty years; the notebooks show the "
    "terns arriving a little earlier each decade and the gulls staying later into the autumn.",
)
QUESTIONS = (
    "Summarise the text above in two sentences.",
    "List three facts stated in the text above.",
    "请用一句话概括上面的内容。",
    "What happens first in the text above, and what happens last?",
)


def prompt(index: int, paragraphs: int) -> str:
    """Prompt `index` of about `paragraphs` paragraphs (≈ 45 tokens each), deterministic."""
    rotation = itertools.islice(itertools.cycle(PARAGRAPHS), index % len(PARAGRAPHS), None)
    body = "\n\n".join(itertools.islice(rotation, paragraphs))
    return f"{body}\n\n{QUESTIONS[index % len(QUESTIONS)]}"


def chat_request(model: str, index: int, *, paragraphs: int, max_tokens: int) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt(index, paragraphs)}],
        "max_tokens": max_tokens,
        "temperature": 0.7,
        "seed": index,
    }
