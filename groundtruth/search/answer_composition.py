"""Generative answers: the prompt built from the retrieved passages, and the check of the
model's [n] citation markers against the citations that are returned."""

from __future__ import annotations

import re
from dataclasses import dataclass

from groundtruth.models import Chunk

# The model says this, alone, when the passages do not hold the answer.
NOT_IN_SOURCES = "NOT_IN_SOURCES"

SYSTEM_PROMPT = (
    "You answer questions about software documentation. Use only the numbered passages you are "
    "given; never add facts from elsewhere. After each statement put the number of the passage "
    "that supports it in square brackets, like [1] or [2][3]. Be brief. If the passages do not "
    f"contain the answer, reply with exactly {NOT_IN_SOURCES} and nothing else."
)

_MARKER_GROUP = re.compile(r"\[(\s*\d+\s*(?:,\s*\d+\s*)*)\]")


@dataclass(frozen=True)
class CheckedAnswer:
    text: str
    removed_markers: list[str]
    cited: list[int]


def answer_messages(*, question: str, chunks: list[Chunk]) -> list[dict[str, str]]:
    """The chat messages: instructions, then every passage under its citation number."""
    passages = []
    for number, chunk in enumerate(chunks, start=1):
        heading = " > ".join(chunk.heading or [])
        source = f"{chunk.repository.name}:{chunk.path} lines {chunk.start_line}-{chunk.end_line}"
        passages.append(f"[{number}] ({source}{'; ' + heading if heading else ''})\n{chunk.text}")
    user = "Passages:\n\n" + "\n\n".join(passages) + f"\n\nQuestion: {question}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def answer_markers_check(*, text: str, citation_numbers: set[int]) -> CheckedAnswer:
    """Keeps the markers that name a returned citation and removes every other one.

    `[1, 4]` becomes `[1]` when only 1 is a citation; a group with no valid number disappears,
    with the space before it, so no dangling `text [].` is left.
    """
    removed: list[str] = []
    cited: list[int] = []

    def replace(match: re.Match[str]) -> str:
        numbers = [int(part) for part in match.group(1).split(",")]
        valid = [number for number in numbers if number in citation_numbers]
        removed.extend(f"[{number}]" for number in numbers if number not in citation_numbers)
        cited.extend(number for number in valid if number not in cited)
        return "".join(f"[{number}]" for number in valid)

    checked = _MARKER_GROUP.sub(replace, text)
    if removed:
        checked = re.sub(r"[ \t]+([.,;:!?)])", r"\1", checked)
        checked = re.sub(r"[ \t]{2,}", " ", checked)
        checked = re.sub(r"[ \t]+$", "", checked, flags=re.MULTILINE)
    return CheckedAnswer(text=checked.strip(), removed_markers=removed, cited=cited)


def answer_is_refusal(text: str) -> bool:
    return text.strip().strip(".").upper() == NOT_IN_SOURCES
