"""A worker's files of a run, sent to the master over Locust's own messaging when the worker does
not share the master's run directory (another host, or another mount of it).

The worker sends each file it wrote (its trace parts and memory samples) in chunks of CHUNK_BYTES,
the last chunk of a file with the file's SHA-256, then a manifest naming every file and its
digest. The master writes each chunk under its run directory at the same relative path (a hidden
temporary name, renamed once the digest matches), and a worker is complete when every file of
its manifest has arrived whole. Pure bookkeeping and file I/O: the messages themselves are sent
and received by loadgen.run.worker_files.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from loadgen.errors import LoadgenError

__all__ = [
    "CHUNK_BYTES",
    "TOKEN_FILE",
    "Receiver",
    "ShippingError",
    "chunks",
    "files_to_ship",
    "new_token",
    "shares_run_dir",
    "write_token",
]

CHUNK_BYTES = 256 << 10
"""Bytes per message: small enough that Locust's heartbeats, on the same connection, are not held up."""
TOKEN_FILE = ".sojourn-master"
"""In the master's run directory: the token that tells a worker it sees the same directory."""
_SHIPPED_DIRS = ("traces", "memory")


class ShippingError(LoadgenError):
    """A chunk names a path outside the run directory, or a file arrived with another digest."""


def new_token() -> str:
    return secrets.token_hex(16)


def write_token(run_dir: str | os.PathLike, token: str) -> None:
    path = Path(run_dir) / TOKEN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(token)


def shares_run_dir(run_dir: str | os.PathLike, token: str) -> bool:
    """Whether this process sees the master's run directory itself (the master wrote `token` there)."""
    try:
        return (Path(run_dir) / TOKEN_FILE).read_text() == token
    except OSError:
        return False


def files_to_ship(root: str | os.PathLike) -> list[str]:
    """The finished files under `root` a worker sends: its trace parts and memory samples, as
    POSIX paths relative to `root` (hidden files, half-written or spilled, are not finished)."""
    base = Path(root)
    out = []
    for top in _SHIPPED_DIRS:
        for path in sorted((base / top).rglob("*")):
            rel = path.relative_to(base)
            if path.is_file() and not any(part.startswith(".") for part in rel.parts):
                out.append(rel.as_posix())
    return out


def chunks(root: str | os.PathLike, rel: str, size: int = CHUNK_BYTES) -> Iterator[dict[str, Any]]:
    """The messages of one file: {"path", "offset", "data"}, the last one with "sha256" too (an
    empty file is one message with no data)."""
    digest = hashlib.sha256()
    offset = 0
    with open(Path(root) / rel, "rb") as f:
        data = f.read(size)
        while True:
            following = f.read(size)
            digest.update(data)
            chunk: dict[str, Any] = {"path": rel, "offset": offset, "data": data}
            if not following:
                chunk["sha256"] = digest.hexdigest()
                yield chunk
                return
            yield chunk
            offset += len(data)
            data = following


def digest_of(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class _Worker:
    received: dict[str, str] = field(default_factory=dict)  # path -> digest of a file that arrived whole
    manifest: dict[str, str] | None = None  # path -> digest, once the worker has sent it
    bytes: int = 0


class Receiver:
    """The master's side: chunks into files under `run_dir`, and which workers are complete."""

    def __init__(self, run_dir: str | os.PathLike):
        self.root = Path(run_dir).resolve()
        self.workers: dict[str, _Worker] = {}

    def _target(self, rel: str) -> Path:
        parts = PurePosixPath(rel).parts
        if not parts or parts[0] not in _SHIPPED_DIRS or any(p in ("..", "") or p.startswith(".") for p in parts):
            raise ShippingError(f"a worker sent a file outside traces/ and memory/: {rel!r}")
        return self.root.joinpath(*parts)

    def chunk(self, worker: str, data: dict[str, Any]) -> None:
        """One chunk of a file from `worker` (chunks of a file come in order)."""
        rel, offset, payload = str(data["path"]), int(data["offset"]), bytes(data["data"])
        target = self._target(rel)
        tmp = target.with_name(f".{target.name}.{worker}.shipping")
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "r+b" if offset else "wb") as f:
            f.seek(offset)
            f.write(payload)
        state = self.workers.setdefault(worker, _Worker())
        state.bytes += len(payload)
        if "sha256" in data:
            got = digest_of(tmp)
            if got != data["sha256"]:
                tmp.unlink(missing_ok=True)
                raise ShippingError(f"{rel} from {worker} arrived damaged (SHA-256 {got}, sent {data['sha256']})")
            os.replace(tmp, target)
            state.received[rel] = got

    def manifest(self, worker: str, files: dict[str, str]) -> None:
        """Every file `worker` sent, with its digest: the worker is complete once all arrived."""
        self.workers.setdefault(worker, _Worker()).manifest = dict(files)

    def complete(self, worker: str) -> bool:
        state = self.workers.get(worker)
        return (
            state is not None
            and state.manifest is not None
            and all(state.received.get(rel) == digest for rel, digest in state.manifest.items())
        )

    def missing(self, worker: str) -> list[str]:
        """The files of `worker`'s manifest not (or not whole) here; all of them before its manifest."""
        state = self.workers.get(worker)
        if state is None or state.manifest is None:
            return ["(its manifest)"]
        return sorted(rel for rel, digest in state.manifest.items() if state.received.get(rel) != digest)

    def received_bytes(self) -> int:
        return sum(w.bytes for w in self.workers.values())
