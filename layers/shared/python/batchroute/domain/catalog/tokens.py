"""A conservative token estimate for quotes: no tokenizer is available offline.

prompt tokens = ceil(UTF-8 bytes of all text / 3) + 4 per message + 3 per request
                + 1600 per image part

Why bytes / 3 is safe (docs/routing.md has the long form): BPE tokenizers average about
4 characters (= 4 bytes) of English per token, so /3 over-estimates English by a third;
CJK characters are 3 bytes in UTF-8 and tokenize at about one token per character, so /3
still covers them. The per-message and per-request overheads are the chat-template tokens
(role markers, separators, the reply primer) the vendors document. Images are priced by
pixels, which the quote does not fetch: 1600 is the largest per-image cost of the vendors'
published formulas (Anthropic resizes to about 1.15 megapixels, about 1600 tokens; OpenAI
high detail tops out at 8 tiles, 85 + 8 x 170 = 1445).

Settlement uses the providers' actual usage, so the estimate only has to be a safe upper
bound for holds and context-window checks, not exact. Everything here is linear in the
input size and avoids per-character Python work: `str.isascii` and `str.encode` run in C.
"""

from __future__ import annotations

from typing import Final

BYTES_PER_TOKEN: Final = 3
TOKENS_PER_MESSAGE: Final = 4
TOKENS_PER_REQUEST: Final = 3
TOKENS_PER_IMAGE: Final = 1600
DEFAULT_OUTPUT_TOKENS: Final = 1024  # responses and vision items that do not say
EMBEDDING_OUTPUT_TOKENS: Final = 0  # embeddings bill input only

# Nesting deeper than this in free-form parts is counted as its JSON text would be, roughly.
_MAX_WALK = 100_000


def utf8_len(text: str) -> int:
    """UTF-8 byte length; lone surrogates (valid in JSON escapes) count as 3 bytes."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def tokens_for_bytes(byte_count: int) -> int:
    return -(-byte_count // BYTES_PER_TOKEN)  # ceiling division


def prompt_tokens(*, text_bytes: int, messages: int, images: int) -> int:
    return (
        tokens_for_bytes(text_bytes)
        + TOKENS_PER_MESSAGE * messages
        + TOKENS_PER_REQUEST
        + TOKENS_PER_IMAGE * images
    )


def value_bytes(value: object) -> int:
    """Bytes of every string, key and number in a JSON value: free-form message fields
    (tool calls, function outputs, tool definitions, schemas) reach the model as text too.
    Iterative, so a deeply nested input cannot exhaust the stack."""
    total = 0
    stack: list[object] = [value]
    seen = 0
    while stack:
        current = stack.pop()
        seen += 1
        if isinstance(current, str):
            total += utf8_len(current)
        elif isinstance(current, dict):
            for key, item in current.items():
                total += utf8_len(key) if isinstance(key, str) else 8
                stack.append(item)
        elif isinstance(current, list):
            stack.extend(current)
        elif isinstance(current, bool) or current is None:
            total += 4
        elif isinstance(current, int | float):
            total += len(repr(current))
        if seen > _MAX_WALK:  # pathological input: what is left counts at one token each
            total += len(stack) * BYTES_PER_TOKEN
            break
    return total


def output_tokens(requested: int, lane_max_output_tokens: int) -> int:
    """Requested output is capped by what the lane can produce."""
    return min(requested, lane_max_output_tokens)
