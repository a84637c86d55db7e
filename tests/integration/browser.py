"""Open a generated HTML page in headless Chromium: rendered DOM, console errors, screenshot.

Dependency-free (no selenium/playwright): Debian's `chromium` is run twice, once with
`--dump-dom` and once with `--screenshot`. Console errors are caught by a small script
injected at the top of a copy of the page (window.onerror, unhandled rejections and
console.error are written into a `<pre id="__sojourn_console_errors">` element that the
dumped DOM carries), plus any "Uncaught" line Chromium logs on stderr.

    dom, errors, png = render_in_chromium(Path("report.html"), tmp_path)

Reusable for any sojourn page (run report, compare, index). Nothing is installed here:
`chromium_path()` is None where Chromium is absent and callers skip.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["chromium_path", "render_in_chromium", "CHROMIUM_FLAGS"]

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--mute-audio",
)

_ERRORS_ID = "__sojourn_console_errors"
_HOOK = f"""<script>(function(){{
  var sink = [];
  function put(msg){{ sink.push(String(msg)); var el = document.getElementById("{_ERRORS_ID}");
    if (el) el.textContent = JSON.stringify(sink); }}
  window.addEventListener("error", function(e){{ put("error: " + (e.message || e.type) + " at " +
    (e.filename || "") + ":" + (e.lineno || "")); }}, true);
  window.addEventListener("unhandledrejection", function(e){{ put("unhandled rejection: " + e.reason); }});
  var orig = console.error; console.error = function(){{ put("console.error: " +
    Array.prototype.join.call(arguments, " ")); return orig.apply(console, arguments); }};
  document.addEventListener("DOMContentLoaded", function(){{ var el = document.createElement("pre");
    el.id = "{_ERRORS_ID}"; el.style.display = "none"; el.textContent = JSON.stringify(sink);
    document.body.appendChild(el); }});
}})();</script>"""


def chromium_path() -> str | None:
    """The Chromium binary ($SOJOURN_CHROMIUM, else chromium / chromium-browser on PATH)."""
    for candidate in (os.environ.get("SOJOURN_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="sojourn-chromium-") as profile:
        return subprocess.run(
            [*args[:1], *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def _instrumented_copy(html_path: Path, tmp_dir: Path) -> Path:
    text = Path(html_path).read_text(encoding="utf-8")
    head = re.search(r"<head[^>]*>", text, re.IGNORECASE)
    at = head.end() if head else 0
    copy = Path(tmp_dir) / f"instrumented-{Path(html_path).name}"
    copy.write_text(text[:at] + _HOOK + text[at:], encoding="utf-8")
    return copy


def _errors_from(dom: str, stderr: str) -> list[str]:
    errors: list[str] = []
    found = re.search(rf'<pre id="{_ERRORS_ID}"[^>]*>(.*?)</pre>', dom, re.DOTALL)
    if found:
        import json

        errors += json.loads(html.unescape(found.group(1)) or "[]")
    else:
        errors.append("the console-error hook did not run (page did not load or scripts are off)")
    errors += [line.strip() for line in stderr.splitlines() if "CONSOLE" in line and "Uncaught" in line]
    return errors


def render_in_chromium(
    html_path: Path,
    tmp_dir: Path,
    *,
    width: int = 1400,
    height: int = 5200,
    budget_ms: int = 15000,
    timeout: float = 120,
) -> tuple[str, list[str], Path]:
    """(rendered DOM, console errors, screenshot PNG path) for the page at `html_path`.

    `budget_ms` is Chromium's virtual time budget: scripts and timers run that long
    (virtual) before the DOM is dumped / the screenshot taken.
    """
    binary = chromium_path()
    if binary is None:
        raise FileNotFoundError("chromium not found (apt-get install chromium)")
    tmp_dir = Path(tmp_dir)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    page = _instrumented_copy(Path(html_path), tmp_dir)
    url = page.resolve().as_uri()
    common = [
        f"--virtual-time-budget={budget_ms}",
        f"--window-size={width},{height}",
        "--enable-logging=stderr",
        "--v=0",
    ]
    dumped = _run([binary, *common, "--dump-dom", url], timeout)
    if dumped.returncode != 0 or "<html" not in dumped.stdout:
        raise RuntimeError(f"chromium --dump-dom failed ({dumped.returncode}): {dumped.stderr[-2000:]}")
    screenshot = tmp_dir / f"{Path(html_path).stem}.png"
    shot = _run([binary, *common, f"--screenshot={screenshot}", url], timeout)
    if not screenshot.is_file():
        raise RuntimeError(f"chromium --screenshot wrote nothing ({shot.returncode}): {shot.stderr[-2000:]}")
    return dumped.stdout, _errors_from(dumped.stdout, dumped.stderr + shot.stderr), screenshot
