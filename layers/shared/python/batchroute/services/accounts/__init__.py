"""Accounts: registration, sign-in sessions, passwords, API keys, email verification,
password reset and account settings, and how a caller is authenticated (docs/auth.md)."""
