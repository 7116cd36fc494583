"""Unit and provenance of every figure in the report (copied into each JSON report as `fields`).

measured: read from a counter or sensor; derived: computed from measured values by a stated
rule; estimated: from a model. Energy entries carry their own provenance (the worst of their
sources': an estimated NVMe power makes the SSD's joules estimated).
"""

M, D, E = "measured", "derived", "estimated"

FIELDS = {
    "checkpoints[].start_s": {"unit": "s since recording start", "provenance": M},
    "checkpoints[].app_end_s": {"unit": "s since recording start", "provenance": M},
    "checkpoints[].durable_end_s": {"unit": "s since recording start", "provenance": D},
    "checkpoints[].duration_s": {"unit": "s", "provenance": D},
    "checkpoints[].blocking_s": {"unit": "s", "provenance": D},
    "checkpoints[].durable_duration_s": {"unit": "s", "provenance": D},
    "checkpoints[].pending_bytes_at_return": {"unit": "B", "provenance": D},
    "checkpoints[].bytes_app": {"unit": "B (the save's files, each counted once across its parts)", "provenance": M},
    "checkpoints[].bytes_device": {
        "unit": "B (written for a save, read for a load; this checkpoint's share of each interval it shares with others)",
        "provenance": D,
    },
    "checkpoints[].ssd_efficiency.*.bytes": {
        "unit": "B (this checkpoint's, on the SSD's block devices)",
        "provenance": D,
    },
    "checkpoints[].ssd_efficiency.*.energy_j": {"unit": "J", "provenance": "per entry"},
    "checkpoints[].ssd_efficiency.*.mean_w": {"unit": "W", "provenance": "per entry"},
    "checkpoints[].ssd_efficiency.*.gb_per_s_per_w": {
        "unit": "GB/s per W (= GB/J, 1 GB = 1e9 B)",
        "provenance": "per entry",
    },
    "checkpoints[].ssd_efficiency.*.j_per_gib": {"unit": "J/GiB", "provenance": "per entry"},
    "checkpoints[].writers[].bytes": {
        "unit": "B (the files this process alone wrote, their sizes after the save; null: a size unknown)",
        "provenance": M,
    },
    "checkpoints[].own_finish_s": {"unit": "s (the app's fsync/rename after the save call returned)", "provenance": M},
    "checkpoints[].device_busy_s": {"unit": "s (the busiest device's %util × time, start → return)", "provenance": D},
    "checkpoints[].predicted_cold_restore_s": {
        "unit": "s (its bytes / the devices' cold read rate)",
        "provenance": "estimated",
    },
    "checkpoints[].prediction_error": {
        "unit": "fraction: (predicted − measured) / measured, a cold load",
        "provenance": D,
    },
    "checkpoints[].restore_bytes_app": {"unit": "B (a load's files)", "provenance": M},
    "checkpoints[].restore_bytes_device": {
        "unit": "B (read by the recorded devices, this load's share)",
        "provenance": D,
    },
    "checkpoints[].cache_served_share": {
        "unit": "fraction of a load's bytes in the page cache as it started (cachestat(2))",
        "provenance": M,
    },
    "checkpoints[].device_read_share": {"unit": "fraction: device bytes read / the load's bytes", "provenance": D},
    "checkpoints[].parts[].start_s": {"unit": "s since recording start", "provenance": M},
    "checkpoints[].parts[].app_end_s": {"unit": "s since recording start", "provenance": M},
    "checkpoints[].parts[].duration_s": {"unit": "s", "provenance": D},
    "checkpoints[].parts[].bytes_app": {"unit": "B", "provenance": M},
    "checkpoints[].device_to_app_ratio": {"unit": "ratio", "provenance": D},
    "checkpoints[].app_gib_per_s": {"unit": "GiB/s", "provenance": D},
    "checkpoints[].device_gib_per_s": {"unit": "GiB/s", "provenance": D},
    "checkpoints[].sampling_gap_s": {
        "unit": "s (longest block-sample interval in the window when it is a gap; null otherwise)",
        "provenance": M,
    },
    "checkpoints[].device_span_s": {"unit": "s", "provenance": D},
    "checkpoints[].devices.*.write_bytes": {"unit": "B (this checkpoint's share)", "provenance": D},
    "checkpoints[].devices.*.read_bytes": {"unit": "B (this checkpoint's share)", "provenance": D},
    "checkpoints[].devices.*.mean_read_gib_per_s": {"unit": "GiB/s", "provenance": D},
    "checkpoints[].devices.*.peak_read_gib_per_s": {"unit": "GiB/s", "provenance": D},
    "checkpoints[].devices.*.mean_write_gib_per_s": {"unit": "GiB/s", "provenance": D},
    "checkpoints[].devices.*.peak_write_gib_per_s": {"unit": "GiB/s", "provenance": D},
    "checkpoints[].devices.*.mean_aqu_sz": {"unit": "requests (iostat aqu-sz)", "provenance": D},
    "checkpoints[].devices.*.peak_aqu_sz": {"unit": "requests (iostat aqu-sz)", "provenance": D},
    "checkpoints[].devices.*.peak_in_flight": {"unit": "requests", "provenance": M},
    "checkpoints[].energy.*.energy_j": {"unit": "J", "provenance": "per entry"},
    "checkpoints[].energy.*.above_idle_j": {"unit": "J", "provenance": "per entry"},
    "checkpoints[].energy.*.j_per_gib": {"unit": "J/GiB", "provenance": "per entry"},
    "checkpoints[].energy.*.coverage": {"unit": "fraction of window with readings", "provenance": D},
    "checkpoints[].energy.*.update_period_s": {
        "unit": "s (how often the slowest sensor's value changes)",
        "provenance": D,
    },
    "checkpoints[].energy.*.energy_j_min": {
        "unit": "J (a window shorter than two sensor updates)",
        "provenance": "estimated",
    },
    "checkpoints[].energy.*.energy_j_max": {
        "unit": "J (a window shorter than two sensor updates)",
        "provenance": "estimated",
    },
    "checkpoints[].energy_total_j": {"unit": "J", "provenance": "worst of the components'"},
    "checkpoints[].energy_total_basis": {
        "unit": "text (the components added; a node meter stands for the parts inside it)",
        "provenance": D,
    },
    "checkpoints[].peak_temp_c": {"unit": "°C", "provenance": M},
    "checkpoints[].throttle_events": {"unit": "events", "provenance": M},
    "checkpoints[].throttle_s": {"unit": "s (the longest of the sources)", "provenance": M},
    "checkpoints[].gpu_idle_s": {
        "unit": "s (mean over the GPUs known in the window; idle: the share of each NVML period no kernel ran: docs/power.md)",
        "provenance": D,
    },
    "checkpoints[].workload_write_s": {
        "unit": "s (a ckprof workload save: barrier to the last rank's fsync; null for other saves)",
        "provenance": M,
    },
    "checkpoints[].gpu_idle_basis": {
        "unit": "text (which GPUs the mean stands on, or 'unknown: why')",
        "provenance": D,
    },
    "run.failed_checkpoints": {"unit": "count", "provenance": M},
    "run.wall_s": {"unit": "s", "provenance": M},
    "run.blocked_s": {"unit": "s", "provenance": D},
    "run.blocked_share": {"unit": "fraction of wall time", "provenance": D},
    "run.goodput_estimate": {"unit": "fraction of wall time", "provenance": E},
    "run.mean_checkpoint_s": {"unit": "s", "provenance": D},
    "run.mean_device_gib_per_s": {"unit": "GiB/s", "provenance": D},
    "run.mean_energy_j": {"unit": "J", "provenance": "worst of the components'"},
    "run.idle_power_w": {"unit": "W (per source)", "provenance": D},
    "run.idle_power_w_by_component": {"unit": "W (sum of the component's sources)", "provenance": D},
    "scale.mtbf_s": {"unit": "s", "provenance": E},
    "scale.young_interval_s": {"unit": "s", "provenance": E},
    "scale.daly_interval_s": {"unit": "s", "provenance": E},
    "scale.overhead_at_daly": {"unit": "fraction of wall time", "provenance": E},
    "scale.goodput_at_daly": {"unit": "fraction of wall time", "provenance": E},
    "throttling.onsets[].temp_c": {"unit": "°C", "provenance": M},
    "throttling.temp_vs_write_correlation": {"unit": "Pearson r", "provenance": D},
    "throttling.hot_vs_cool.bandwidth_ratio_hot_to_cool": {"unit": "ratio", "provenance": D},
}


def unit_of(path: str) -> str:
    return FIELDS.get(path, {}).get("unit", "")


def provenance_of(path: str) -> str:
    return FIELDS.get(path, {}).get("provenance", "")
