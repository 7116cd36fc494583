"""The recording format: its names and part files (format), the writer, the reader
(`ckprof.load`) for one host or a job of many, counters and rates derived on reading, time
conversion between a host's monotonic clock and the wall clock, and importing power traces."""
