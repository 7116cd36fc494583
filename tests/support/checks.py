"""Acceptance checks that are all evaluated before a test fails, so one run says which hold (the
frameworks tier, the object-store saves)."""

from __future__ import annotations


def checker(failed: list[str]):
    """check(name, ok, detail): printed as `[ok]` or `[FAIL]`, and added to `failed` when it does
    not hold."""

    def check(name: str, ok: bool, detail: str) -> None:
        print(f"  [{'ok' if ok else 'FAIL'}] {name}: {detail}")
        if not ok:
            failed.append(f"{name}: {detail}")

    return check
