"""The security headers the console is served with, as plain values (no CDK import).

CloudFront's response headers policy for the console is built from them (infra/console.py),
and anything else that serves console/dist (the local server, the browser test of the CSP)
can send exactly the same, so the console is tried under the policy it is deployed with.

The one origin besides its own that the console may connect to is the uploads bucket's: a
file too large to paste is PUT there by a signed URL (console/src/api/upload.ts,
docs/files.md), deployed at the bucket's S3 host names, locally at the moto server.
"""

from __future__ import annotations

from collections.abc import Sequence


def content_security_policy(upload_origins: Sequence[str] = ()) -> str:
    """The policy; `upload_origins` (scheme and host, no path) are added to connect-src."""
    return "; ".join(
        (
            "default-src 'self'",
            "script-src 'self'",
            # Chart libraries set style attributes; no script runs from a style.
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "font-src 'self'",
            " ".join(("connect-src 'self'", *upload_origins)),
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )


CONTENT_SECURITY_POLICY = content_security_policy()
HSTS_MAX_AGE_SECONDS = 2 * 365 * 86_400
FRAME_OPTIONS = "DENY"
REFERRER_POLICY = "strict-origin-when-cross-origin"
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=()"


def console_headers(upload_origins: Sequence[str] = ()) -> dict[str, str]:
    return {
        "Content-Security-Policy": content_security_policy(upload_origins),
        "Strict-Transport-Security": f"max-age={HSTS_MAX_AGE_SECONDS}; includeSubDomains",
        "X-Frame-Options": FRAME_OPTIONS,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": REFERRER_POLICY,
        "Permissions-Policy": PERMISSIONS_POLICY,
    }


CONSOLE_HEADERS = console_headers()
