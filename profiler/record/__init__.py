"""Recording a run: the wrapped child and its signals, the markers channel, the sampling loop,
which collectors run, clocks. Writes a recording (ckprof.recording.writer); reads nothing back."""
