"""Energy: the one engine that turns power readings and energy counters into joules over a
window (energy), where a recording's power comes from (sources), and the SSD power model (ssd)."""
