"""The Python client against the local stack over HTTP (`make run`'s code): quote, create,
`wait` with progress to completion, results, items and receipt through the client's iterators
and models, and the batch's webhook verified with `batchroute_client.webhooks.verify`; the
catalog and the account's settings read and written through the typed resources."""

from __future__ import annotations

import httpx
import pytest
from batchroute_client import Batch, Client, ConflictError
from batchroute_client.webhooks import InvalidSignatureError, verify

from tests.e2e.test_batches_e2e import LLAMA, SECRET, Receiver, _agent_key, _item, receiver  # noqa: F401

pytestmark = pytest.mark.e2e


def test_the_client_drives_a_batch_to_completion_and_verifies_its_webhook(
    api: httpx.Client,
    receiver: Receiver,  # noqa: F811
) -> None:
    key = _agent_key(api, "client")["Authorization"].removeprefix("Bearer ")
    with Client(api_key=key, base_url=str(api.base_url), timeout=10) as client:
        items = [_item(n, LLAMA, f"Question {n}: what is a lane?") for n in range(4)]
        items[1]["input"]["messages"][0]["content"] += " [simulate:fail]"
        quote = client.quotes.model(items=items)
        assert quote.item_count == 4 and quote.selected_lanes

        batch = client.batches.create(
            quote_id=quote.quote_id, webhook={"url": receiver.url, "secret": SECRET}
        )
        seen: list[Batch] = []
        done = client.batches.wait(batch.id, poll_interval=0.25, timeout=60, on_progress=seen.append)
        assert done.state == "completed" and done.counts.completed == 3 and done.counts.failed == 1
        assert seen[-1] == done and all(b.id == batch.id for b in seen)

        rows = list(client.batches.results(batch.id, page_size=2))
        assert [r.customer_item_id for r in rows] == [f"item-{n}" for n in range(4)]
        assert rows[1].status == "failed" and rows[1].error and rows[0].output
        failed = list(client.batches.items(batch.id, status="failed"))
        assert [i.customer_item_id for i in failed] == ["item-1"]
        assert batch.id in {b.id for b in client.batches.list(state="completed")}
        with pytest.raises(ConflictError):
            client.batches.cancel(batch.id)

    delivery = receiver.wait_for(lambda d: b'"batch.completed"' in d.body, timeout=30)
    event = verify(delivery.body, delivery.headers, SECRET)
    assert event["type"] == "batch.completed" and event["batch"]["id"] == batch.id
    with pytest.raises(InvalidSignatureError):
        verify(delivery.body, delivery.headers, "not-the-secret")


def test_the_client_chats_direct_streamed_and_queued(api: httpx.Client) -> None:
    key = _agent_key(api, "client-chat")["Authorization"].removeprefix("Bearer ")
    messages = [{"role": "user", "content": "Say hello"}]
    with Client(api_key=key, base_url=str(api.base_url), timeout=10) as client:
        answer = client.chat.create(LLAMA, messages, max_tokens=16)
        assert answer.text and answer.provider and answer.usage["total_tokens"] > 0
        chunks = list(client.chat.stream(LLAMA, messages, max_tokens=16))
        assert len(chunks) > 2 and "".join(c.text for c in chunks)
        job = client.chat.queue(LLAMA, messages, max_tokens=16)
        assert job.id.startswith("chatjob_") and job.status
        done = client.batches.wait(job.batch_id, poll_interval=0.25, timeout=60)
        assert done.state == "completed"
        finished = client.chat_job(job.id)
        assert finished.status == "completed" and finished.result and finished.result["choices"]


def test_the_client_reads_the_catalog_and_its_settings_typed(api: httpx.Client) -> None:
    key = _agent_key(api, "settings")["Authorization"].removeprefix("Bearer ")
    with Client(api_key=key, base_url=str(api.base_url), timeout=10) as client:
        # the public catalog, typed
        models = client.catalog.models(operation="embeddings")
        assert list(models) and all(m.providers for m in models)
        first = next(iter(models))
        assert client.catalog.model(first.id).id == first.id
        assert client.catalog.provider(client.catalog.providers()[0].slug).slug
        assert client.catalog.fees().control_plane_fee_per_lane.currency == "usd"
        # the account's own settings, written and read back
        account = client.settings.update_profile(display_name="Client Co")
        assert account.org.display_name == "Client Co"
        assert client.settings.retention().retention_tier
        assert client.billing.auto_topup().enabled is False
        assert list(client.delivery_targets.list()) == []
