"""How any string from a recording or a command line is written into a report: one function per
output format, used for every field (docs/faults.md, "What is escaped where").

Both make invisible characters visible first: C0/C1 control characters and the Unicode bidi
controls (U+202A–U+202E, U+2066–U+2069, U+200E/U+200F, U+061C: Unicode TR #9, the "Trojan
Source" CVE-2021-42574) are shown as \\uXXXX, so a path or a command cannot reorder or hide
what a reader sees. JSON output keeps strings as they are (it is data; json.dumps escapes).
"""

from __future__ import annotations

import html as _html
import re

_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Markdown: raw HTML passes through most renderers, and these build tables, code and links
_MD_SPECIAL = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "`": "\\`", "\\": "\\\\"}


def visible(s) -> str:
    """`s` as text with every control and bidi character written as \\uXXXX; newlines and tabs as spaces."""
    text = str(s).replace("\r\n", " ").replace("\n", " ").replace("\t", " ")
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def md(s) -> str:
    """`s` for a Markdown table cell or list item: no HTML, no table break, no code or link."""
    text = "".join(_MD_SPECIAL.get(ch, ch) for ch in visible(s))
    return text.replace("](", "]\\(")  # [text](url) would be a link; "[d]" stays as it reads


def html(s) -> str:
    """`s` for HTML text or a quoted attribute."""
    return _html.escape(visible(s), quote=True)
