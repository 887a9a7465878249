"""A small headless-Chromium driver for page tests: the DevTools protocol over a pipe.

Chromium started with ``--remote-debugging-pipe`` reads protocol messages (JSON, each ended by a
NUL byte) on its file descriptor 3 and writes replies and events on descriptor 4; no port, no
network, no third-party package. :class:`Browser` opens one page, evaluates JavaScript in it,
takes screenshots and collects console errors and uncaught exceptions.

Tests skip when no Chromium is installed (``chromium`` on PATH, or ``PRBENCH_CHROMIUM``); CI
installs Debian's ``chromium`` package (see ``.ci/run``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Chromium's flags: headless, as root in a container, nothing fetched, a fresh profile
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--remote-debugging-pipe",
)


def chromium_path() -> str | None:
    """The Chromium executable: ``$PRBENCH_CHROMIUM``, else ``chromium`` on PATH."""
    given = os.environ.get("PRBENCH_CHROMIUM")
    if given:
        return given if Path(given).is_file() else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_or_skip(width: int | None = None) -> Iterator[Browser]:
    """A started Chromium for a module's ``browser`` fixture; the test skips when none is installed.

    Args:
        width: the window's width in CSS pixels (height 900), or None for Chromium's default.
    """
    path = chromium_path()
    if path is None:
        import pytest

        pytest.skip("no Chromium (apt-get install chromium; .ci/run installs it)")
    with Browser(path) as b:
        if width is not None:
            b.viewport(width)
        yield b


class BrowserError(RuntimeError):
    """The browser exited, timed out or answered a command with an error."""


class Browser:
    """One headless Chromium with one page, driven over the DevTools pipe."""

    def __init__(self, executable: str, *, timeout: float = 60.0) -> None:
        """Start Chromium with a fresh profile folder and attach to a blank page."""
        self.timeout = timeout
        self.errors: list[str] = []
        self._profile = tempfile.TemporaryDirectory(prefix="prbench-chromium-")
        # Chromium's stderr (a file: a pipe could fill); closed in close()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds() -> None:  # in the child: the pipe ends become its descriptors 3 and 4
            read_end = os.dup(to_child_r)  # off 3 and 4 first: one of them may be 3 or 4
            write_end = os.dup(from_child_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self._proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4),  # kept open across the exec
            stdout=subprocess.DEVNULL, stderr=self._log,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next = 0
        self._events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.call("Target.attachToTarget",
                                  {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)

    # -- the protocol --------------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium did not answer in time")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                self._log.seek(0)
                err = self._log.read().decode(errors="replace")
                raise BrowserError(f"Chromium closed the pipe: {err[-2000:]}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _event(self, message: dict[str, Any]) -> None:
        self._events.append(message)
        method, params = message.get("method"), message.get("params") or {}
        if method == "Runtime.exceptionThrown":
            detail = params.get("exceptionDetails") or {}
            text = (detail.get("exception") or {}).get("description") or detail.get("text")
            self.errors.append(f"uncaught exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
            self.errors.append("console.error: " + " ".join(args))
        elif method == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
            self.errors.append("log: " + str(params["entry"].get("text")))

    def call(self, method: str, params: dict[str, Any] | None = None, *,
             session: bool = False) -> dict[str, Any]:
        """Send one command and wait for its reply (events met meanwhile are recorded)."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return dict(reply.get("result") or {})
            self._event(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        """Wait for an event of the page (e.g. ``Page.loadEventFired``)."""
        deadline = time.monotonic() + self.timeout
        for seen in self._events:
            if seen.get("method") == method:
                self._events.remove(seen)
                return seen
        while True:
            message = self._read_message(deadline)
            if "id" in message:
                continue
            self._event(message)
            if message.get("method") == method:
                self._events.remove(message)
                return message

    # -- what a test does ----------------------------------------------------------------------

    def open(self, url: str) -> None:
        """Load ``url`` and wait for its load event."""
        self._events = [e for e in self._events if e.get("method") != "Page.loadEventFired"]
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (an exception raises)."""
        result = self.call("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True}, session=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails']}")
        return (result.get("result") or {}).get("value")

    def settle(self) -> None:
        """Let the page run what it queued (a ``toggle`` event, a timer of 0 ms)."""
        self.call("Runtime.evaluate", {"expression": "new Promise(r => setTimeout(r, 0))",
                                       "awaitPromise": True}, session=True)

    def viewport(self, width: int | None, height: int = 900) -> None:
        """Show the page in a ``width`` x ``height`` window (CSS pixels); None: Chromium's own."""
        if width is None:
            self.call("Emulation.clearDeviceMetricsOverride", session=True)
            return
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                  session=True)

    def press(self, key: str) -> None:
        """Type one printable key (``"j"``, ``"/"``) into whatever has the focus."""
        code = {"/": "Slash"}.get(key, f"Key{key.upper()}")
        for kind in ("keyDown", "keyUp"):
            params = {"type": kind, "key": key, "code": code}
            if kind == "keyDown":
                params["text"] = key
            self.call("Input.dispatchKeyEvent", params, session=True)

    def screenshot(self, path: Path) -> Path:
        """A PNG of the page as shown."""
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        """Close the browser and remove its profile folder."""
        with contextlib.suppress(BrowserError):  # it may close the pipe before it answers
            self.call("Browser.close")
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._to_child, self._from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._log.close()
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
