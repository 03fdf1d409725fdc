"""A cancel whose first answer is lost, against the real app in-process (moto): the first
POST cancels the batch, its answer never arrives (a read time-out, a gateway's 502), the
client retries, and the service refuses the retry with 409 `batch_not_cancellable` as
`canceled`. The client returns the canceled batch (and the CLI exits 0); a 409 to a first
attempt still raises."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from batchroute_client import Client, ConflictError
from batchroute_client.cli import main
from batchroute_client.cli.runtime import Runtime
from fastapi.testclient import TestClient

from tests.integration.principals import TestOrg
from tests.integration.test_client_api import http as http  # the fixtures
from tests.integration.test_client_api import org as org
from tests.integration.test_quotes import _item


class LoseFirstCancelAnswer(httpx.BaseTransport):
    """Forwards every request to the app; the answer to the first cancel is lost after the
    app has acted on it, as `lost` says: a read time-out or a gateway's 502."""

    def __init__(self, app: httpx.BaseTransport, lost: str) -> None:
        self.app, self.lost, self.cancels = app, lost, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.app.handle_request(request)
        body = response.read()
        if request.url.path.endswith("/cancel"):
            self.cancels += 1
            if self.cancels == 1 and self.lost == "timeout":
                raise httpx.ReadTimeout("the answer was lost", request=request)
            if self.cancels == 1:
                return httpx.Response(
                    502, text="<html>Bad Gateway</html>", headers={"content-type": "text/html"}
                )
        return httpx.Response(response.status_code, headers=response.headers, content=body)


def _new_batch(http: TestClient, org: TestOrg) -> str:
    setup = Client(api_key=org.api_key(), http_client=http, sleep=lambda _: None)
    return setup.batches.create(quote_id=setup.quotes.model(items=[_item(0)]).quote_id).id


@pytest.mark.parametrize("lost", ["timeout", "502"])
def test_a_cancel_whose_answer_was_lost_returns_the_canceled_batch(
    http: TestClient, org: TestOrg, lost: str
) -> None:
    batch_id = _new_batch(http, org)
    transport = LoseFirstCancelAnswer(http._transport, lost)
    lossy = httpx.Client(transport=transport, base_url="http://testserver")
    sdk = Client(api_key=org.api_key(), http_client=lossy, sleep=lambda _: None)
    canceled = sdk.batches.cancel(batch_id, reason="stop")
    assert (canceled.id, canceled.state, canceled.cancel_reason) == (batch_id, "canceled", "stop")
    assert transport.cancels == 2
    # A cancel that is not a retry is answered 409, as it should be
    with pytest.raises(ConflictError) as again:
        sdk.batches.cancel(batch_id)
    assert again.value.code == "batch_not_cancellable" and again.value.details == {"state": "canceled"}


def test_the_cli_cancel_whose_answer_was_lost_exits_0(
    http: TestClient, org: TestOrg, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch_id = _new_batch(http, org)
    lossy = httpx.Client(
        transport=LoseFirstCancelAnswer(http._transport, "timeout"), base_url="http://testserver"
    )
    env = {
        "BATCHROUTE_API_KEY": org.api_key(),
        "BATCHROUTE_BASE_URL": "http://testserver",
        "BATCHROUTE_CONFIG": str(tmp_path / "config.toml"),
    }
    runtime = Runtime(env=env, http_client=lambda: lossy, sleep=lambda _: None, bars=False, width=120)
    assert main(["cancel", batch_id], runtime) == 0
    out = capsys.readouterr().out
    assert batch_id in out and "canceled" in out
