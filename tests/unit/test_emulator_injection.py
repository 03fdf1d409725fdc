"""The emulators' fault injection (docs/emulators.md): `Behaviour.inject` makes the next N
requests to one provider meet a fault whatever they hold; `answered` counts every fault."""

from __future__ import annotations

from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig, Work


def _work(provider: str, text: str = "hello") -> Work:
    return Work(provider=provider, model="m", operation="chat", messages=({"role": "user", "content": text},))


def test_injected_faults_hit_the_next_requests_of_that_provider_only() -> None:
    behaviour = Behaviour(EmulatorConfig())
    behaviour.inject("groq", "rate_limited", 2)
    behaviour.inject("groq", "reset", 1)
    # Another provider is untouched
    assert behaviour.fault(_work("openai")) is None
    # The next three requests to groq meet the queued faults in order, then it answers
    kinds = [fault.kind if (fault := behaviour.fault(_work("groq", f"q{n}"))) else None for n in range(4)]
    assert kinds == ["rate_limited", "rate_limited", "reset", None]
    # Marker faults are counted beside the injected ones
    assert behaviour.fault(_work("groq", "[simulate:transient]")) is not None
    assert behaviour.answered == {"rate_limited": 2, "reset": 1, "transient": 1}
