"""A job's report (analysis/jobs.py, the model analysis/job_model.py) as JSON, Markdown and
self-contained HTML; the renderers read the model's attributes.

The job's sections come first (summary, checkpoints across nodes, nodes × checkpoints, notes),
then each host's own report. Every string from a recording goes through ckprof.escape (render.html_text, render.md_cell).
"""

from __future__ import annotations

from ckprof.analysis import model_base
from ckprof.analysis.job_model import JobCheckpoint, JobReport, JobThroughput

from . import job_plots, plots
from . import render as R
from .tables import UNTIMED, b, num, pct

MAX_NODE_COLUMNS = 40  # checkpoints as columns of the per-node table; JSON has them all
MAX_HOST_PLOTS = 4  # hosts whose timeline plots go in the HTML (64 timelines would be slow and huge)


def analyses_to_keep(fmt: str) -> int:
    """How many hosts' whole analyses the job's analysis keeps for this format: those drawn in HTML."""
    return MAX_HOST_PLOTS if fmt == "html" else 0


def _label(c: JobCheckpoint) -> str:
    return f"{c.kind} {c.step}"


def to_json(rep: JobReport) -> str:
    """The report as standard JSON (the schema of docs/report-format.md, `job`)."""
    return model_base.to_json(rep)


def summary_rows(rep: JobReport) -> list[tuple[str, str, str]]:
    j, run = rep.job, rep.job.run
    timed = getattr(run, "blocked_s", None) is not None  # else a save no call timed (findings.blocking_unknown)
    most = ", ".join(f"{h} ({n}×)" for h, n in list(run.slowest_host_counts.items())[:3]) or "—"
    return [
        ("job", f"{j.path} (id {j.id or '—'})", "recorded"),
        ("nodes reported", f"{len(j.hosts)}: {', '.join(j.hosts)}", "recorded"),
        ("nodes left out", ", ".join(j.hosts_left_out) or "none", "see notes"),
        ("wall time (first start → last end, any node)", num(j.wall_s, "{:.1f} s"), "measured"),
        ("checkpoints", f"{run.checkpoints} save, {run.loads} load", "measured"),
        (
            "bytes saved, all nodes (application / devices)",
            f"{b(run.bytes_app_total)} / {b(run.bytes_device_total)}",
            "measured",
        ),
        ("energy of the saves, all nodes", num(run.energy_j_total, "{:.1f} J"), "see host reports"),
        (
            "time the job was blocked by checkpoints",
            f"{num(run.blocked_s, '{:.2f} s')} = {pct(run.blocked_share)} of wall time" if timed else UNTIMED,
            "derived",
        ),
        (
            "mean / longest stall per save",
            f"{num(run.mean_stall_s, '{:.3f} s')} / {num(run.max_stall_s, '{:.3f} s')}" if timed else UNTIMED,
            "derived",
        ),
        ("largest spread across nodes", num(run.max_spread_s, "{:.3f} s"), "derived"),
        ("slowest node most often", most, "derived"),
        ("peak device write / read rate, all nodes", _peaks(j.throughput), "derived from measured counters"),
    ]


def _peaks(tp: JobThroughput | None) -> str:
    if not tp:
        return "unknown (no node has device samples)"
    return (
        f"{num(tp.peak_write_gib_per_s, '{:.3f} GiB/s')} / {num(tp.peak_read_gib_per_s, '{:.3f} GiB/s')} "
        f"over {tp.bin_s} s bins, {tp.hosts} node(s)"
    )


CHECKPOINT_HEADERS = [
    "kind",
    "step",
    "nodes",
    "ranks",
    "stall [s, d]",
    "slowest node",
    "its time [s, d]",
    "fastest node [s, d]",
    "spread [s, d]",
    "slowest device there, GiB/s [d]",
    "held up by: host/rank, s [m], bytes [m], device",
    "app bytes [m]",
    "device bytes [m]",
    "GiB/s over the span, devices [d]",
    "energy J (nodes with it)",
    "not seen on",
]


def checkpoint_rows(rep: JobReport) -> list[list[str]]:
    out = []
    for c in rep.job.checkpoints:
        sd = c.slowest_device
        dev = "—" if sd is None else f"{sd.device} {num(sd.gib_per_s, '{:.3f}')}"
        hb = c.held_up_by
        held = (
            "—"
            if hb is None
            else f"{hb.host}/rank {hb.rank}, {num(hb.seconds, '{:.3f}')}, {b(hb.bytes_app)}, {hb.device or '—'}"
        )
        out.append(
            [
                str(c.kind),
                str(c.step),
                str(c.hosts),
                str(c.ranks),
                num(c.stall_s, "{:.3f}"),
                str(c.slowest_host or "—"),
                num(c.slowest_host_s, "{:.3f}"),
                num(c.fastest_host_s, "{:.3f}"),
                num(c.spread_s, "{:.3f}"),
                dev,
                held,
                b(c.bytes_app),
                b(c.bytes_device),
                num(c.device_gib_per_s, "{:.3f}"),
                f"{num(c.energy_j, '{:.1f}')} ({c.energy_hosts})",
                ", ".join(c.missing_hosts) or "—",
            ]
        )
    return out


def node_table(rep: JobReport) -> tuple[list[str], list[list[str]], str | None]:
    """Nodes × checkpoints: each cell is the node's seconds · device GiB/s · joules; the slowest marked."""
    cps = rep.job.checkpoints
    cut = None
    if len(cps) > MAX_NODE_COLUMNS:
        cut = f"first {MAX_NODE_COLUMNS} of {len(cps)} checkpoints; all of them: ckprof report --format json"
        cps = cps[:MAX_NODE_COLUMNS]
    headers = ["node"] + [f"{_label(c)} [s · GiB/s · J]" for c in cps]
    rows = []
    for h in rep.job.hosts:
        row = [h]
        for c in cps:
            n = c.per_host.get(h)
            if n is None:
                row.append("not seen")
                continue
            cell = f"{num(n.seconds, '{:.3f}', 'no end')} · {num(n.device_gib_per_s, '{:.2f}')} · {num(n.energy_j, '{:.1f}')}"
            row.append(cell + (" ◀ slowest" if h == c.slowest_host and c.hosts > 1 else ""))
        rows.append(row)
    return headers, rows, cut


def _network_cell(c: JobCheckpoint, h: str) -> str:
    """A node's network in one checkpoint: bytes and GiB/s in its direction (sent for a save,
    received for a load), its NFS and S3 bytes where it has them; the slowest node marked."""
    n = c.per_host.get(h)
    if n is None:
        return "not seen"
    net = n.network
    moved, rate = (net.rx_bytes, net.rx_gib_per_s) if c.kind == "load" else (net.tx_bytes, net.tx_gib_per_s)
    cell = "unknown" if moved is None else f"{b(moved)} · {num(rate, '{:.3f}', 'unknown')}"
    if net.nfs_bytes_sent is not None:
        cell += f" · NFS {b(net.nfs_bytes_sent)}"
    if net.s3_bytes_sent is not None:
        cell += f" · S3 {b(net.s3_bytes_received if c.kind == 'load' else net.s3_bytes_sent)}"
    return cell + (" ◀ slowest" if h == c.network_slowest_host and c.hosts > 1 else "")


def network_table(rep: JobReport) -> tuple[list[str], list[list[str]], list[str]]:
    """Nodes × checkpoints, as node_table: each cell the node's network bytes · GiB/s (its
    interfaces, in the checkpoint's direction) and its NFS and S3 bytes where it has them. Also each
    distinct reason a figure is unknown (a null is "unknown", its reason listed under the table)."""
    cps = rep.job.checkpoints[:MAX_NODE_COLUMNS]
    headers = ["node"] + [f"{_label(c)} [B · GiB/s, m · d]" for c in cps]
    rows = [[h] + [_network_cell(c, h) for c in cps] for h in rep.job.hosts]
    reasons: list[str] = []
    for c in cps:
        for n in c.per_host.values():
            for key, why in n.network.unknown.items():
                if key != "fuse_mounts" and why not in reasons:  # FUSE's: under the requests table
                    reasons.append(why)
    return headers, rows, reasons


def stacking_lines(rep: JobReport) -> list[str]:
    """Per node, which interfaces its network bytes sum and which it leaves out as stacked on
    others (analysis/remote.py count_once), each distinct line once; none where nothing is stacked."""
    out: list[str] = []
    for c in rep.job.checkpoints[:MAX_NODE_COLUMNS]:
        for h, n in c.per_host.items():
            stacked = n.network.interfaces_stacked
            if not stacked:
                continue
            left = ", ".join(f"{i} (stacked on {', '.join(lw)})" for i, lw in stacked.items())
            line = f"{h}: summed {', '.join(n.network.interfaces_counted) or 'none'}; left out {left}"
            if line not in out:
                out.append(line)
    return out


def _ms(v: float | None) -> str:
    return num(v, "{:.2f} ms", "unknown")


def _requests_cell(c: JobCheckpoint, h: str) -> str:
    """A node's NFS requests per mount (mean RTT, the highest interval's mean), its S3 requests
    (p50, p99 latency) and its FUSE mounts' queue in one checkpoint; "none" where it has none."""
    n = c.per_host.get(h)
    if n is None:
        return "not seen"
    net, parts = n.network, []
    for mount, m in net.nfs_mounts.items():
        parts.append(
            f"NFS {mount}: {num(m.ops, '{:.0f}', 'unknown')} ops, RTT {_ms(m.mean_rtt_ms)} mean, "
            f"{_ms(m.max_interval_mean_rtt_ms)} max interval, {num(m.retransmits, '{:.0f}', 'unknown')} retrans"
        )
    if (s3 := net.s3_requests) is not None:
        parts.append(
            f"S3: {s3.requests} requests, p50 {_ms(s3.latency_p50_ms)}, p99 {_ms(s3.latency_p99_ms)}, "
            f"{s3.errors} errors"
        )
    for mount, fm in net.fuse_mounts.items():
        parts.append(
            f"FUSE {mount}: {num(fm.max_waiting, '{:.0f}', 'unknown')} waiting at most, "
            f"{num(fm.mean_waiting, '{:.2f}', 'unknown')} mean, daemon wrote {b(fm.daemon_write_bytes)}"
        )
    return " · ".join(parts) or "none"


def requests_table(rep: JobReport) -> tuple[list[str], list[list[str]], list[str]] | None:
    """Nodes × checkpoints: each node's NFS round trips, S3 latencies and FUSE queues (the one-host
    report's rules), and each distinct reason a figure of theirs is null; None when no node has any."""
    cps = rep.job.checkpoints[:MAX_NODE_COLUMNS]
    nets = [n.network for c in cps for n in c.per_host.values()]
    if not any(net.nfs_mounts or net.s3_requests or net.fuse_mounts for net in nets):
        return None
    headers = ["node"] + [f"{_label(c)} [requests m · ms d]" for c in cps]
    rows = [[h] + [_requests_cell(c, h) for c in cps] for h in rep.job.hosts]
    reasons: list[str] = []
    for net in nets:
        whys = [net.unknown[k] for k in ("nfs_mounts", "s3_requests", "fuse_mounts") if k in net.unknown]
        whys += [w for m in net.nfs_mounts.values() for w in m.unknown.values()]
        whys += [w for m in net.fuse_mounts.values() for w in m.unknown.values()]
        whys += list(net.s3_requests.unknown.values()) if net.s3_requests else []
        reasons += [w for w in whys if w not in reasons]
    return headers, rows, reasons


def _demote(md: str) -> list[str]:
    return [("#" + line) if line.startswith("#") else line for line in md.splitlines()]


def to_markdown(rep: JobReport) -> str:
    L = [
        f"# ckprof job report: {R.md_cell(rep.job.path)}",
        "",
        "Units are in each header; [m] measured, [d] derived, [e] estimated. Times across nodes are on the "
        "wall clock (each host's anchor).",
        "",
        "## Job summary",
        "",
    ]
    L += R.md_table(["what", "value", "provenance"], summary_rows(rep))
    L += ["", "## Checkpoints across nodes", ""]
    if rep.job.checkpoints:
        L += R.md_table(CHECKPOINT_HEADERS, checkpoint_rows(rep))
        headers, rows, cut = node_table(rep)
        L += ["", "## Per node", ""] + R.md_table(headers, rows) + (["", f"({cut})"] if cut else [])
        net_headers, net_rows, reasons = network_table(rep)
        L += ["", "## Network per node", ""] + R.md_table(net_headers, net_rows)
        L += [""] + [f"- {R.md_cell(line)}" for line in stacking_lines(rep)]
        L += [f"- unknown: {R.md_cell(why)}" for why in reasons]
        if (req := requests_table(rep)) is not None:
            L += ["", "## NFS, S3 and FUSE requests per node", ""] + R.md_table(req[0], req[1])
            L += [""] + [f"- unknown: {R.md_cell(why)}" for why in req[2]]
    else:
        L.append("No checkpoint windows on any node.")
    L += ["", "## Job notes", ""] + ([f"- {R.md_cell(n.text)}" for n in rep.notes] or ["- none"])
    for h, hrep in rep.hosts.items():
        L += ["", f"## Host {R.md_cell(h)}", ""] + _demote(R.to_markdown(hrep))[1:]
    return "\n".join(L) + "\n"


def to_html(rep: JobReport, plots: dict[str, bytes], host_plots: dict[str, dict[str, bytes]]) -> str:
    h = R.html_text
    parts = R.html_head(rep.job.path, {"ckprof_version": rep.ckprof_version, "schema_version": rep.schema_version})
    parts += [
        "<p class='small'>A job of several nodes: times across nodes are on the wall clock (each host's "
        "anchor); each host's own report follows the job's sections.</p>",
        "<h2>Job summary</h2>",
        R.html_table(["what", "value", "provenance"], summary_rows(rep)),
        "<h2>Checkpoints across nodes</h2>",
    ]
    if rep.job.checkpoints:
        parts.append(R.html_table(CHECKPOINT_HEADERS, checkpoint_rows(rep)))
        headers, rows, cut = node_table(rep)
        parts += ["<h2>Per node</h2>", R.html_table(headers, rows)]
        if cut:
            parts.append(f"<p class='small'>{h(cut)}</p>")
        net_headers, net_rows, reasons = network_table(rep)
        parts += ["<h2>Network per node</h2>", R.html_table(net_headers, net_rows)]
        items = [h(line) for line in stacking_lines(rep)] + [f"unknown: {h(why)}" for why in reasons]
        parts.append("<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>" if items else "")
        if (req := requests_table(rep)) is not None:
            parts += ["<h2>NFS, S3 and FUSE requests per node</h2>", R.html_table(req[0], req[1])]
            parts.append("<ul>" + "".join(f"<li>unknown: {h(why)}</li>" for why in req[2]) + "</ul>" if req[2] else "")
        if "nodes" in plots:
            parts.append(
                R.img_tag(
                    "nodes", plots["nodes"], "each node's time per checkpoint, the job's stall and the slowest node"
                )
            )
    else:
        parts.append("<p>No checkpoint windows on any node.</p>")
    if "throughput" in plots:
        parts += [
            "<h2>The job's device throughput</h2>",
            R.img_tag(
                "throughput", plots["throughput"], "every node's device writes and reads, summed on the wall clock"
            ),
        ]
    parts.append(
        "<h2>Job notes: hosts left out, clocks, checkpoints not seen everywhere</h2><ul>"
        + ("".join(f"<li>{h(n.text)}</li>" for n in rep.notes) or "<li>none</li>")
        + "</ul>"
    )
    for name, hrep in rep.hosts.items():
        parts += [
            f"<details id='host-{h(name)}'><summary><b>Host {h(name)}</b></summary>",
            *R.html_body(hrep, host_plots.get(name, {})),
            "</details>",
        ]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _json(ja, opts) -> str:
    return to_json(ja.report)


def _markdown(ja, opts) -> str:
    return to_markdown(ja.report)


def _html(ja, opts) -> str:
    """The job's plots, then the first MAX_HOST_PLOTS hosts' own (their whole analyses were kept)."""
    host_plots = {h: plots.all_plots(an) for h, an in ja.hosts.items()}
    pngs = {"nodes": job_plots.node_durations(ja.report), "throughput": job_plots.job_throughput(ja.report)}
    return to_html(ja.report, {k: v for k, v in pngs.items() if v}, host_plots)


# the job's renderers, one shape with the host's (report/formats.py): (JobAnalysis, RenderOptions) -> str
RENDERERS = {"json": _json, "md": _markdown, "html": _html}
