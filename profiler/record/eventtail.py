"""Following a recording's events.jsonl as it grows: the one tail the live endpoint and the file
tracker share.

Markers append whole lines with O_APPEND (docs/recording-format.md); a look can still land
inside a line being written, so the bytes after the last newline wait for the next look. Lines
that are not JSON, or JSON that is not an event (`format.event_problem`), are skipped here: the
reader reports them.
"""

from __future__ import annotations

import json
import os

from ckprof.recording.format import event_problem

# `{"t_ns":` + at most 20 digits + `,"event":"` + a short name: the head a line's event is read from
HEAD_BYTES = 64


class EventTail:
    """New complete events of an events.jsonl since the last call; the file may not exist yet."""

    def __init__(self, path: str):
        self.path = path
        self._fd: int | None = None
        self._partial = b""

    def new_lines(self) -> list[bytes]:
        """The complete lines appended since the last call (none before the file exists)."""
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return []
        chunks = []
        while chunk := os.read(self._fd, 1 << 16):
            chunks.append(chunk)
        if not chunks:
            return []
        *lines, self._partial = (self._partial + b"".join(chunks)).split(b"\n")
        return lines

    def new_events(self, containing: tuple[bytes, ...] = (), unless_head: bytes = b"") -> list[dict]:
        """The events appended since the last call; with `containing`, only lines holding one of
        those byte strings are parsed (a cheap test: most lines are not what a caller wants); with
        `unless_head`, a line holding it in its first HEAD_BYTES is skipped unsearched (the
        recorder's own long lines, whose `event` key comes second: recording/events.line)."""
        out = []
        for line in self.new_lines():
            if unless_head and line.find(unless_head, 0, HEAD_BYTES) >= 0:
                continue
            if containing and not any(c in line for c in containing):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if event_problem(ev) is None:
                out.append(ev)
        return out

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
