"""The OpenAI emulator's Responses API answers, as pure functions of the request body and the
shared behaviour's `Answer` (docs/emulators.md): the `response` object, its server-sent
events, and the hosted tool calls a response with hosted tools shows.

Fields follow OpenAI's OpenAPI document (`Response`: the required fields always, null where
the document allows it; optional fields only when there is something to say) and parse with
the SDK's `openai.types.responses` types. A hosted tool the request declares (and does not
switch off with `tool_choice: "none"`) is "called" once, before the message: a
`web_search_call`, `file_search_call` or `code_interpreter_call` item, so the adapter's
usage counting of billed tool calls can be exercised.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from batchroute_tools.emulators.behaviour import Answer, EmulatorConfig, Work
from batchroute_tools.emulators.server import sse

HOSTED_CALLS: Final = ("web_search", "file_search", "code_interpreter")


def work_messages(body: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """A Responses request's instructions and input as the chat-style messages `Work` holds
    (what the markers and the prompt-token estimate read)."""
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    given = body.get("input")
    if isinstance(given, str):
        return (*messages, {"role": "user", "content": given})
    for item in given if isinstance(given, list) else []:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "function_call":
            messages.append({"role": "assistant", "content": str(item.get("arguments") or "")})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "content": output if isinstance(output, str) else str(output)})
        elif "role" in item:
            messages.append({"role": str(item["role"]), "content": item.get("content")})
    return tuple(messages)


def hosted_calls(body: Mapping[str, Any], ident: str, *, done: bool = True) -> list[dict[str, Any]]:
    """One call item per hosted tool the request offers (module doc)."""
    if body.get("tool_choice") == "none":
        return []
    status = "completed" if done else "in_progress"
    query = _last_user_text(body)[:80] or "query"
    calls: list[dict[str, Any]] = []
    kinds = [t.get("type") for t in body.get("tools") or [] if isinstance(t, Mapping)]
    for n, kind in enumerate(kinds):
        if kind == "web_search" or (isinstance(kind, str) and kind.startswith("web_search_preview")):
            calls.append(
                {
                    "id": f"ws_{ident}{n}",
                    "type": "web_search_call",
                    "status": status,
                    "action": {"type": "search", "query": query},
                }
            )
        elif kind == "file_search":
            calls.append(
                {"id": f"fs_{ident}{n}", "type": "file_search_call", "status": status, "queries": [query]}
            )
        elif kind == "code_interpreter":
            calls.append(
                {
                    "id": f"ci_{ident}{n}",
                    "type": "code_interpreter_call",
                    "status": status,
                    "container_id": f"cntr_{ident}",
                    "code": "print(len(" + repr(query) + "))",
                    "outputs": [{"type": "logs", "logs": str(len(query))}] if done else None,
                }
            )
    return calls


def _last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(work_messages(body)):
        if message["role"] != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        for part in content if isinstance(content, list) else []:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                return str(part["text"])
    return ""


def message_item(ident: str, text: str | None, *, status: str) -> dict[str, Any]:
    content = [] if text is None else [_text_part(text)]
    return {
        "id": f"msg_{ident}",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def response_object(
    body: Mapping[str, Any],
    work: Work,
    answer: Answer,
    *,
    ident: str,
    created: int,
    status: str = "completed",
) -> dict[str, Any]:
    """The `response` OpenAI answers (status `completed`, or `incomplete` at the output
    limit; `in_progress` with no output yet for a stream's first events)."""
    done = status != "in_progress"
    if done and answer.finish == "length":
        status = "incomplete"
    output: list[dict[str, Any]] = []
    if done:
        output = [*hosted_calls(body, ident), message_item(ident, answer.content, status=status)]
    response: dict[str, Any] = {
        "id": f"resp_{ident}",
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": body.get("instructions"),
        "model": work.model,
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "metadata": body.get("metadata") or {},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": list(body.get("tools") or []),
        "temperature": body.get("temperature", 1.0),
        "top_p": body.get("top_p", 1.0),
    }
    if "max_output_tokens" in body:
        response["max_output_tokens"] = body["max_output_tokens"]
    if isinstance(body.get("text"), Mapping):
        response["text"] = body["text"]
    if done:
        response["usage"] = {
            "input_tokens": answer.prompt_tokens,
            "input_tokens_details": {"cached_tokens": answer.cache_read_tokens, "cache_write_tokens": 0},
            "output_tokens": answer.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        }
    return response


def stream_events(
    body: Mapping[str, Any], work: Work, answer: Answer, *, ident: str, created: int, config: EmulatorConfig
) -> Iterator[tuple[float, bytes]]:
    """The server-sent events of a streamed response, as OpenAI orders them."""
    sequence = iter(range(1_000_000))

    def event(kind: str, *, delay: float = 0.0, **fields: Any) -> tuple[float, bytes]:
        return delay, sse(kind, {"type": kind, "sequence_number": next(sequence), **fields})

    opening = response_object(body, work, answer, ident=ident, created=created, status="in_progress")
    yield event("response.created", delay=config.ttft_seconds, response=opening)
    yield event("response.in_progress", response=opening)
    calls = hosted_calls(body, ident)
    for index, call in enumerate(calls):
        started = hosted_calls(body, ident, done=False)[index]
        yield event("response.output_item.added", output_index=index, item=started)
        yield event("response.output_item.done", output_index=index, item=call)
    at = len(calls)
    item_id = f"msg_{ident}"
    yield event(
        "response.output_item.added", output_index=at, item=message_item(ident, None, status="in_progress")
    )
    place: dict[str, Any] = {"item_id": item_id, "output_index": at, "content_index": 0}
    yield event("response.content_part.added", **place, part=_text_part(""))
    for piece in answer.pieces:
        yield event(
            "response.output_text.delta", delay=config.inter_token_seconds, **place, delta=piece, logprobs=[]
        )
    yield event("response.output_text.done", **place, text=answer.content, logprobs=[])
    yield event("response.content_part.done", **place, part=_text_part(answer.content))
    final = response_object(body, work, answer, ident=ident, created=created)
    yield event("response.output_item.done", output_index=at, item=final["output"][-1])
    last = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    yield event(last, response=final)
