"""What the "model" answers: deterministic, short, right for simple questions at temperature 0."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

TOKEN = re.compile(r"\w+|[^\w\s]|\s+")
FACTS = (
    (re.compile(r"capital of france", re.IGNORECASE), "Paris"),
    (re.compile(r"capital of germany", re.IGNORECASE), "Berlin"),
    (re.compile(r"capital of japan", re.IGNORECASE), "Tokyo"),
    (re.compile(r"largest planet", re.IGNORECASE), "Jupiter"),
    (re.compile(r"chemical symbol for gold|symbol of gold", re.IGNORECASE), "Au"),
    (re.compile(r"how many days.*week", re.IGNORECASE), "7"),
    (
        re.compile(r"what model are you|who are you", re.IGNORECASE),
        "I am GLM-5, a large language model trained by Z.ai.",
    ),
    (re.compile(r"\bsay\s+(?:the word\s+)?[\"']?(\w+)[\"']?", re.IGNORECASE), None),
)
ARITH = re.compile(r"(-?\d+(?:\.\d+)?)\s*([-+*/x×])\s*(-?\d+(?:\.\d+)?)")
GARBAGE = "!!!!!!!!!!!!!!!!"
FILLER = ("the", " model", " is", " serving", " tokens", " from", " the", " lab", ".")


def tokens(text: str) -> list[str]:
    """A crude tokenizer: words, punctuation and whitespace runs are one token each."""
    return [t for t in TOKEN.findall(text) if not t.isspace()] if text else []


def split_tokens(text: str) -> list[str]:
    """Pieces that concatenate back to ``text`` (whitespace stays attached), for streaming."""
    out: list[str] = re.findall(r"\s*\S+", text)
    return out or ([text] if text else [])


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:.6g}"


def answer_for(prompt: str) -> tuple[str, str]:
    """(reasoning, answer) for the last user message."""
    m = ARITH.search(prompt)
    if m:
        a, op, b = float(m.group(1)), m.group(2), float(m.group(3))
        if op in "x×*":
            value = a * b
        elif op == "+":
            value = a + b
        elif op == "-":
            value = a - b
        else:
            value = a / b if b else math.nan
        text = _number(value) if not math.isnan(value) else "undefined"
        sign = {"x": "*", "×": "*"}.get(op, op)
        reasoning = f"The user is asking a simple math question: {_number(a)} {sign} {_number(b)}. That equals {text}."
        return (reasoning, text)
    for pattern, reply in FACTS:
        found = pattern.search(prompt)
        if found:
            text = reply if reply is not None else found.group(1)
            return (f"The user asks a short factual question. The answer is {text}.", text)
    return (
        "The user wrote a general message. I should reply briefly and helpfully.",
        "Hello! I am GLM-5. How can I help you today?",
    )


@dataclass
class Completion:
    reasoning: list[str]
    content: list[str]
    finish_reason: str
    prompt_tokens: int
    nan: bool = False  #: NaN logits: greedy picks token 0 every step and the log-probabilities are NaN (null)

    @property
    def completion_tokens(self) -> int:
        return len(self.reasoning) + len(self.content)


def complete(
    prompt: str,
    max_tokens: int | None,
    *,
    thinking: bool,
    garbage: bool = False,
    ignore_eos: bool = False,
    temperature: float = 0.0,
) -> Completion:
    reasoning_text, answer = answer_for(prompt)
    if garbage:
        reasoning_text, answer = "", GARBAGE
    elif temperature > 0.5:
        answer = answer + random.choice(("", " ", ""))
    reasoning = split_tokens(reasoning_text) if thinking else []
    content = split_tokens(answer)
    limit = max_tokens if max_tokens is not None else 4096
    if ignore_eos:
        filler = [FILLER[i % len(FILLER)] for i in range(max(0, limit - len(reasoning) - len(content)))]
        content = content + filler
    finish = "stop"
    if len(reasoning) >= limit:
        reasoning, content, finish = reasoning[:limit], [], "length"
    elif len(reasoning) + len(content) > limit:
        content, finish = content[: limit - len(reasoning)], "length"
    elif ignore_eos:
        finish = "length"
    return Completion(reasoning, content, finish, len(tokens(prompt)))


def nan_greedy(completion: Completion) -> Completion:
    """What 0.5.23 answers at temperature 0 when the logits are NaN: an all-greedy batch takes argmax
    (sglang 0.5.23 layers/sampler.py:207, ``is_all_greedy``), which torch resolves to the first NaN, token 0
    ("!" in GLM's vocabulary), every step, without raising; the log-probabilities are NaN, which the ORJSON
    response writes as null."""
    n = max(1, completion.completion_tokens)
    return Completion([], [GARBAGE[:1]] * n, "length", completion.prompt_tokens, nan=True)


def logprob_entry(token: str, top: int, position: int, nan: bool = False) -> dict[str, object]:
    if nan:
        return {"token": token, "logprob": None, "bytes": list(token.encode()), "top_logprobs": []}
    value = -0.0001 - (position % 7) * 0.0123
    entry: dict[str, object] = {"token": token, "logprob": round(value, 6), "bytes": list(token.encode())}
    entry["top_logprobs"] = [{"token": token, "logprob": round(value, 6), "bytes": list(token.encode())}] + [
        {"token": f"<alt{i}>", "logprob": round(value - 3.0 - i, 6), "bytes": list(f"<alt{i}>".encode())}
        for i in range(max(0, top - 1))
    ]
    return entry
