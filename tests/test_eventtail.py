"""events.jsonl followed as it grows (ckprof.record.eventtail): whole lines only, non-events skipped."""

import json
import os

from ckprof.record.eventtail import EventTail


def test_a_tail_gives_whole_events_once(tmp_path):
    path = tmp_path / "events.jsonl"
    tail = EventTail(str(path))
    assert tail.new_events() == []  # before the file exists
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    first = {"t_ns": 1, "event": "checkpoint_start", "id": "a"}
    end = json.dumps({"t_ns": 2, "event": "checkpoint_end", "id": "a"}).encode()
    os.write(fd, json.dumps(first).encode() + b"\n" + b'["checkpoint_end"]\n' + b"{not json\n" + end[:10])
    assert tail.new_events() == [first]  # the half-written line waits; a list and a torn line are no events
    os.write(fd, end[10:] + b"\n")
    assert tail.new_events(containing=(b'"checkpoint_end"',)) == [json.loads(end)]
    assert tail.new_events() == []
    os.write(fd, json.dumps(first).encode() + b"\n")
    assert tail.new_events(containing=(b'"checkpoint_end"',)) == []  # filtered before parsing
    os.close(fd)
    tail.close()


def test_a_line_with_the_skipped_head_is_not_searched_or_parsed(tmp_path):
    """The recorder's own file-activity lines (the file tracker is handed their paths in-process)
    are skipped by their head: a wanted key in such a line does not make it parsed, and the same
    key in another event still does."""
    from ckprof.recording.events import line

    path = tmp_path / "events.jsonl"
    activity = {"t_ns": 10**19, "event": "file_activity", "source": "fanotify", "files": [{"path": "/c/a"}]}
    end = {"t_ns": 10**19 + 1, "event": "checkpoint_end", "id": "a", "files": ["/c/a"]}
    path.write_bytes(line(activity) + line(end))
    wanted = (b'"files"',)
    skipping, searching = EventTail(str(path)), EventTail(str(path))
    assert skipping.new_events(containing=wanted, unless_head=b'"event":"file_activity"') == [end]
    assert searching.new_events(containing=wanted) == [activity, end]
    skipping.close()
    searching.close()
