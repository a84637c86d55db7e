"""Password masking for amqp(s) URLs in free text: the one rule for every text sojourn writes.
The analysis's report and compare.html's settings and labels call it here; loadgen.redact's
`mask_text` (log lines, errors, run.json) delegates to it. Standard library only, so the analysis
keeps its rule without importing loadgen."""

from __future__ import annotations

import re

__all__ = ["mask_urls"]

# The password is everything between the user's ':' and the *last* '@' of the URL's
# whitespace-delimited token, so a password holding '@' or '/' (written unescaped) is masked whole;
# the scheme in any case. Where the token holds an '@' after the host, more is masked, never less.
_AMQP_PASSWORD = re.compile(r"(amqps?://[^:/@\s]*:)\S*@", re.IGNORECASE)


def mask_urls(text: str) -> str:
    """Replace the password of every amqp(s) URL in `text` with `****`."""
    return _AMQP_PASSWORD.sub(r"\1****@", text)
