"""The console's session through CloudFront: requests arrive as the distribution's /v1/*
behaviour forwards them (every viewer header but Host, which is the execute-api domain; the
browser's Origin is the distribution's), and the cookie the API sets belongs to the host the
browser asked, so it stays first-party (docs/console.md, Deployment)."""

from __future__ import annotations

from batchroute.config import Settings
from batchroute.services.accounts.authentication import SESSION_COOKIE
from batchroute_tools.local.provision import LocalStack
from tests.integration.accounts_harness import PASSWORD, make_harness

CONSOLE_ORIGIN = "https://d111111abcdef8.cloudfront.net"
# What CloudFront's ALL_VIEWER_EXCEPT_HOST_HEADER origin request policy sends API Gateway.
FORWARDED = {
    "host": "abc123defg.execute-api.eu-west-1.amazonaws.com",
    "origin": CONSOLE_ORIGIN,
    "referer": f"{CONSOLE_ORIGIN}/console/settings/keys",
    "via": "2.0 0123456789abcdef0123456789abcdef.cloudfront.net (CloudFront)",
    "x-amz-cf-id": "Mq2dVwC9cV8Yt2kM1dIN8Z7C8Q4ZxUeQbGc0u1nC9x6lq3lW0vJjvA==",
    "x-forwarded-for": "203.0.113.7, 130.176.89.12",
    "sec-fetch-site": "same-origin",
}


def DEPLOYED(local_aws: LocalStack) -> Settings:
    """A deployed-mode API (secure cookies) whose PUBLIC_BASE_URL is the distribution, as
    deploy requires (docs/deploy.md): the console's cookie writes come from that origin."""
    return Settings(environment="test", resource_prefix=local_aws.prefix, public_base_url=CONSOLE_ORIGIN)


def _attributes(set_cookie: str) -> dict[str, str]:
    parts = [p.strip() for p in set_cookie.split(";")]
    attributes = {p.split("=", 1)[0].lower(): (p.split("=", 1)[1] if "=" in p else "") for p in parts[1:]}
    attributes["name"], _, attributes["value"] = parts[0].partition("=")
    return attributes


def test_the_session_cookie_is_host_only_and_works_for_same_origin_writes(local_aws: LocalStack) -> None:
    # Given: a deployed-mode API (secure cookies) and an account
    harness = make_harness(DEPLOYED(local_aws))
    harness.register("ann@example.com")
    browser = harness.fresh_client()

    # When: the console signs in through the distribution
    login = browser.post(
        "/v1/auth/login", json={"email": "ann@example.com", "password": PASSWORD}, headers=FORWARDED
    )

    # Then: the cookie names no Domain, so the browser keeps it for the distribution's host
    # (the one it asked), never for the execute-api host CloudFront spoke to
    assert login.status_code == 200
    cookie = _attributes(login.headers["set-cookie"])
    assert cookie["name"] == SESSION_COOKIE
    assert "domain" not in cookie
    assert cookie["path"] == "/"
    assert "secure" in cookie and "httponly" in cookie and cookie["samesite"].lower() == "lax"

    # When: the console makes a cookie-authenticated write from its own origin
    created = browser.post(
        "/v1/auth/account/api-keys",
        json={"label": "from the console"},
        headers={**FORWARDED, "cookie": f"{SESSION_COOKIE}={cookie['value']}"},
    )

    # Then: accepted (same origin: no CORS needed, and none is granted to anyone)
    assert created.status_code == 201, created.text
    assert created.json()["key"]["label"] == "from the console"
    assert not [h for h in created.headers if h.lower().startswith("access-control-")]
    current = browser.get(
        "/v1/sessions/current", headers={**FORWARDED, "cookie": f"{SESSION_COOKIE}={cookie['value']}"}
    )
    assert current.json()["session"] is not None


def test_another_site_gets_no_cors_grant_to_read_with_the_cookie(local_aws: LocalStack) -> None:
    # Given: a signed-in console session
    harness = make_harness(DEPLOYED(local_aws))
    harness.register("ann@example.com")
    browser = harness.fresh_client()
    login = browser.post(
        "/v1/auth/login", json={"email": "ann@example.com", "password": PASSWORD}, headers=FORWARDED
    )
    value = _attributes(login.headers["set-cookie"])["value"]

    # When: a page on another site asks for a CORS preflight and a credentialed read
    evil = {**FORWARDED, "origin": "https://evil.example", "sec-fetch-site": "cross-site"}
    preflight = browser.options(
        "/v1/auth/account/api-keys",
        headers={**evil, "access-control-request-method": "POST"},
    )
    read = browser.get("/v1/auth/account", headers={**evil, "cookie": f"{SESSION_COOKIE}={value}"})

    # Then: no Access-Control-Allow-* header anywhere, so the browser hides the answer from it
    # (SameSite=Lax already keeps the cookie off its cross-site POSTs)
    for answer in (preflight, read):
        assert not [h for h in answer.headers if h.lower().startswith("access-control-allow")]
