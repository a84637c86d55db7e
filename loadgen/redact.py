"""Mask passwords in broker URLs before they reach a log line, trace, report or run.json."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from analysis.redact import mask_urls

__all__ = ["mask_url", "mask_text"]


def mask_url(url: str) -> str:
    """`amqp://user:secret@host/` -> `amqp://user:****@host/`; URLs without a password are unchanged."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{parts.username or ''}:****@{host}" + (f":{parts.port}" if parts.port else "")
    except ValueError:  # e.g. a non-numeric port: fall back to masking by pattern
        return mask_text(url)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def mask_text(text: str) -> str:
    """Mask every amqp(s) URL password that appears anywhere in free text (analysis.redact's rule)."""
    return mask_urls(text)
