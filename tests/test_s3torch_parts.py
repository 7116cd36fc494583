"""s3torchconnector's multipart parts are unknown, never 0 (issue 24): its CRT client (native code,
mountpoint-s3-client over aws-c-s3) sends an upload's CreateMultipartUpload, UploadParts and
CompleteMultipartUpload itself; Python sees the writer's writes and its close, so ckprof records
one PutObject per upload (tests/test_s3torchconnector.py). A window holding such an upload has
`multipart_parts` null with the reason, where it said 0 while the server took several parts.

Real: a 9 MiB writer with 5 MiB parts under `ckprof record` against moto's server (its request
log shows the parts). Also on events alone: botocore's parts in the same window do not make a
number that leaves the connector's out.
"""

from __future__ import annotations

import pandas as pd
import pytest

from ckprof.analysis.object_store import ObjectStoreRequests, object_store_window

MiB = 2**20


def _event(t_s: float, op: str, layer: str, nbytes: float | None = None) -> dict:
    return {"t_ns": int(t_s * 1e9), "event": "s3_request", "op": op, "layer": layer, "latency_s": 0.01,
            "bytes": nbytes, "retries": None if layer == "s3torchconnector" else 0, "pid": 7}  # fmt: skip


def test_a_window_with_a_connector_upload_has_its_parts_unknown():
    reqs = ObjectStoreRequests.of_frames(
        pd.DataFrame(
            [
                _event(1.0, "PutObject", "s3torchconnector", 9 * MiB),
                _event(1.5, "UploadPart", "botocore", 5 * MiB),
                _event(1.6, "CompleteMultipartUpload", "botocore"),
            ]
        ),
        pd.DataFrame(),
    )
    w = object_store_window(reqs, 0, 2e9)
    assert w["multipart_parts"] is None
    assert "s3torchconnector" in w["unknown"]["multipart_parts"] and "1 upload" in w["unknown"]["multipart_parts"]
    # a window of botocore's requests alone still counts its parts
    only_boto = object_store_window(reqs, 1.2e9, 2e9)
    assert only_boto["multipart_parts"] == 1 and "multipart_parts" not in only_boto["unknown"]


def test_a_connector_upload_recorded_against_moto_has_its_parts_unknown(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0 (.ci/run does)")
    pytest.importorskip("s3torchconnector.dcp", reason="s3torchconnector is not installed: pip install -e '.[s3torch]'")
    moto = pytest.importorskip("moto", reason="moto is not installed: pip install -e '.[dev]'")
    if tuple(int(x) for x in moto.__version__.split(".")[:3]) < (5, 2, 2):
        pytest.skip(f"moto {moto.__version__} < 5.2.2 (getmoto/moto#10055): pip install -e '.[dev]'")
    from support.moto_server import moto_server
    from test_object_store import BUCKET
    from test_s3torchconnector import run

    with moto_server(tmp_path, BUCKET) as server:
        _, rep, _, _, timed = run(tmp_path, server, "raw", 1)
        log = server.log.read_text(errors="replace")
    parts = [ln for ln in log.splitlines() if '"PUT /' in ln and "/raw/blob.bin?" in ln and "partNumber=" in ln]
    assert len(parts) >= 2, log[-3000:]  # the server took the upload in parts (9 MiB, 5 MiB parts)
    (save,) = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    assert save["path"] == timed["saves"][0]["url"]
    o = save["remote"]["object_store"]
    assert o["requests_by_op"] == {"PutObject": 1}  # what Python sees: one upload
    assert o["multipart_parts"] is None, o  # was 0 while the server took len(parts)
    assert "CRT client sends their parts itself" in o["unknown"]["multipart_parts"]
