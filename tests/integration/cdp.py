"""Drive headless Chromium over the DevTools protocol on a pipe: open a page, run a script in
it, click, take a screenshot. Dependency-free (`--remote-debugging-pipe`: JSON messages ended
by a NUL byte, commands on the browser's fd 3, answers and events on its fd 4), for pages that
must be used, not only rendered (a live web UI whose Start button has to work).

    with Browser() as browser:
        browser.open("http://127.0.0.1:8089/")
        browser.wait_for("document.querySelector('button[type=submit]') !== null")
        browser.evaluate("document.body.innerText")
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.integration.browser import CHROMIUM_FLAGS, chromium_path

__all__ = ["Browser", "BrowserError"]


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, width: int = 1400, height: int = 1000, timeout_s: float = 30.0):
        binary = chromium_path()
        if binary is None:
            raise FileNotFoundError("chromium not found (apt-get install chromium)")
        self._profile = tempfile.TemporaryDirectory(prefix="sojourn-cdp-")
        self._timeout_s = timeout_s
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds_3_and_4() -> None:  # the browser reads fd 3 and writes fd 4
            # copies first: either pipe end may itself be fd 3 or 4
            read_end, write_end = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self._proc = subprocess.Popen(
            [
                binary,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={self._profile.name}",
                f"--window-size={width},{height}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=fds_3_and_4,
            pass_fds=(3, 4),  # kept open (the child's, after fds_3_and_4)
            process_group=0,  # its helper processes with it, so that close() stops them all
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._session: str | None = None
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def close(self) -> None:
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self._proc.terminate()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        # Its helpers (renderer, crash handler) can outlive it a moment and still write to the profile:
        # the whole group goes, and the profile is removed once nothing writes to it any more.
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for attempt in range(20):
            try:
                self._profile.cleanup()
                return
            except OSError:
                if attempt == 19:
                    raise
                time.sleep(0.1)

    def send(self, method: str, params: dict | None = None) -> dict:
        """Send one command and wait for its answer (events in between are dropped)."""
        self._next_id += 1
        message: dict = {"id": self._next_id, "method": method, "params": params or {}}
        if self._session is not None:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self._timeout_s
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def _read(self, deadline: float) -> dict:
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("the browser did not answer in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 16)
                if not chunk:
                    raise BrowserError("the browser closed its pipe")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 20.0, every_s: float = 0.2):
        """Evaluate `expression` until it is truthy; its value. BrowserError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                value = self.evaluate(expression)
            except BrowserError:
                value = None  # e.g. the page is between two documents
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"still false after {timeout_s:.0f} s: {expression}")
            time.sleep(every_s)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)
