"""The fault tier: every failure a user can cause or suffer, with real processes, signals, full
file systems and HTTP (docs/faults.md). Bounded: the whole tier runs in well under 3 minutes."""
