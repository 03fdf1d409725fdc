"""Feedback: docs/feedback.md."""
