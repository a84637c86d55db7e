"""Password masking for amqp(s) URLs in any text the analysis writes (the report, compare.html's
settings and labels). The analysis never imports loadgen, so this is its own copy of the rule
loadgen.redact applies to logs, traces and run.json; standard library only."""

from __future__ import annotations

import re

__all__ = ["mask_urls"]

# The password is everything between the user's ':' and the *last* '@' before the
# host, so a password that itself contains '@' is masked whole.
_AMQP_PASSWORD = re.compile(r"(amqps?://[^:/@\s]*:)[^/\s]*@", re.IGNORECASE)


def mask_urls(text: str) -> str:
    """Replace the password of every amqp(s) URL in `text` with `****`."""
    return _AMQP_PASSWORD.sub(r"\1****@", text)
