"""An answer sent back as the SDK has it reaches every vendor as an assistant turn of text:
its refusal is that text, and what no vendor takes beside it is left out
(providers/conversation.py, docs/routing.md "Item input")."""

from __future__ import annotations

from typing import Any

import pytest

from batchroute.providers.conversation import conversation

_USER = {"role": "user", "content": "hi"}
_ECHOES = {"annotations": [], "audio": None, "function_call": None, "tool_calls": None}


@pytest.mark.parametrize(
    ("answer", "sent"),
    [
        ({"content": "Hello", "refusal": None, **_ECHOES}, "Hello"),
        ({"content": None, "refusal": "I can't help with that.", **_ECHOES}, "I can't help with that."),
        ({"content": "", "refusal": "No."}, "No."),
        ({"content": "Partly.", "refusal": "No more."}, "Partly.\n\nNo more."),
        (
            {"content": [{"type": "text", "text": "Partly."}], "refusal": "No more."},
            [{"type": "text", "text": "Partly."}, {"type": "text", "text": "No more."}],
        ),
    ],
)
def test_an_answer_is_an_assistant_turn_of_its_text(answer: dict[str, Any], sent: object) -> None:
    talk = conversation({"messages": [_USER, {"role": "assistant", **answer}, _USER]})
    assert talk.messages[1] == {"role": "assistant", "content": sent}
