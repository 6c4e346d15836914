"""A client for any OpenAI-compatible chat completions endpoint (LLM_BASE_URL, LLM_MODEL,
LLM_API_KEY), through httpx. The key is sent as a Bearer header and never logged or echoed in
errors."""

from __future__ import annotations

from dataclasses import dataclass

import httpx


class LanguageModelError(Exception):
    """The model could not give an answer (unreachable, timeout, error status, malformed reply)."""


@dataclass(frozen=True)
class ChatModel:
    base_url: str
    model: str
    api_key: str
    timeout_seconds: float

    @property
    def endpoint(self) -> str:
        base = self.base_url.rstrip("/")
        return base if base.endswith("/chat/completions") else f"{base}/chat/completions"


def chat_completion_create(*, model: ChatModel, messages: list[dict[str, str]]) -> str:
    """The text of the first choice. Raises LanguageModelError on any failure."""
    headers = {"Authorization": f"Bearer {model.api_key}"} if model.api_key else {}
    body = {"model": model.model, "messages": messages, "temperature": 0}
    try:
        response = httpx.post(model.endpoint, json=body, headers=headers, timeout=model.timeout_seconds)
    except httpx.TimeoutException as exc:
        raise LanguageModelError(f"the language model did not answer within {model.timeout_seconds:g} s") from exc
    except httpx.HTTPError as exc:
        raise LanguageModelError(f"the language model endpoint is unreachable ({type(exc).__name__})") from exc
    if response.status_code != 200:
        raise LanguageModelError(f"the language model endpoint answered HTTP {response.status_code}")
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LanguageModelError("the language model endpoint sent a malformed answer") from exc
    if not isinstance(content, str) or not content.strip():
        raise LanguageModelError("the language model returned an empty answer")
    return content.strip()
