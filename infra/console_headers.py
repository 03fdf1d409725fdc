"""The security headers the console is served with, as plain values (no CDK import).

CloudFront's response headers policy for the console is built from them (infra/console.py),
and anything else that serves console/dist (the local server, the browser test of the CSP)
can send exactly the same, so the console is tried under the policy it is deployed with.
"""

from __future__ import annotations

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        # Chart libraries set style attributes; no script runs from a style.
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
HSTS_MAX_AGE_SECONDS = 2 * 365 * 86_400
FRAME_OPTIONS = "DENY"
REFERRER_POLICY = "strict-origin-when-cross-origin"
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=()"

CONSOLE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Strict-Transport-Security": f"max-age={HSTS_MAX_AGE_SECONDS}; includeSubDomains",
    "X-Frame-Options": FRAME_OPTIONS,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": REFERRER_POLICY,
    "Permissions-Policy": PERMISSIONS_POLICY,
}
