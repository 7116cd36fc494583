#!/usr/bin/env bash
# The checks ckprof runs on a machine with a real NVIDIA GPU (when one is lent; CI has none).
# Usage, from the repository root (CKPROF_DEVICE_TESTS=0 skips step 1), with pyudev/bokeh/tornado/xyzservices wheels in .whl/ when the
# machine has no package index:  OUT=/some/dir bash benchmarks/gpu/device_checks.sh
# (and jsonschema's, for the one test that validates the report's schema: `pip download jsonschema
# --python-version 3.12 --only-binary=:all: --platform manylinux2014_x86_64 -d .whl`, the lent image's
# Python, less typing_extensions, which torch's image already has)
#  1. the real-NVML tests (tests/test_gpu.py::test_real_nvml, tests/test_gpu_idle_real.py);
#  2. examples/train_async_checkpoint.py on the GPU under `ckprof record`, in its three modes (dcp.save,
#     dcp.async_save, async_save with DCP's pinned-memory DefaultStager), each with the program's own
#     truth log, reported as JSON; every recording is kept (tar) for tests and the note;
#  3. the sync and async modes again with --no-patch, where only the file-activity source (issue 21:
#     fanotify, no code in the writer) can find the saves; then every recording against the program's
#     truth (benchmarks/gpu/truth_check.py): checkpoints = saves, windows, bytes, durable_at_return;
#  4. per async save, the staging phase's device-to-host bytes against the program's own count of its
#     CUDA state (benchmarks/gpu/d2h_check.py): d2h.txt, PASS within ±5 % (issue 25).
set -uo pipefail
OUT=${OUT:-/tmp/ckprof-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site . 2>&1 | tail -3
export PYTHONPATH=/tmp/site
CK="python3 -m ckprof"
{ nvidia-smi -L; uname -r; python3 -c 'import torch, ckprof.record as r, os; print("torch", torch.__version__, torch.cuda.get_device_name(0)); print("colsampler", any(f.startswith("_colsampler") for f in os.listdir(os.path.dirname(r.__file__))))'; } 2>&1 | tee "$OUT/machine.txt"
[ "${CKPROF_DEVICE_TESTS:-1}" = 1 ] && python3 -m pytest -q -p no:cacheprovider -rs tests/test_gpu.py::test_real_nvml tests/test_gpu_idle_real.py \
  tests/test_gpu_async_real.py tests/test_report_async_phases.py tests/test_train_steps.py \
  tests/test_async_d2h.py tests/test_async_gpu_idle.py 2>&1 | tail -15 | tee "$OUT/pytest.txt"
$CK doctor --path /tmp 2>&1 | tail -25 > "$OUT/doctor.txt"
for m in sync async async-staged files-sync files-async; do
  rm -rf /tmp/ckpt-$m /tmp/rec-$m /tmp/truth-$m.jsonl
  patch=; [ "${m#files-}" != "$m" ] && patch=--no-patch
  mkdir -p /tmp/ckpt-$m; timeout 150 $CK record --interval 0.1 $patch --path /tmp/ckpt-$m -o /tmp/rec-$m -- \
    python3 examples/train_async_checkpoint.py --dir /tmp/ckpt-$m --mode ${m#files-} --device cuda \
      --width 4096 --batch 4096 --steps 240 --every 60 --truth /tmp/truth-$m.jsonl \
    > "$OUT/record-$m.txt" 2>&1; echo "record $m rc=$?" | tee -a "$OUT/record-$m.txt"
  cp /tmp/truth-$m.jsonl /tmp/rec-$m/truth.jsonl 2>/dev/null
  $CK report /tmp/rec-$m --format json -o /tmp/report-$m.json >> "$OUT/record-$m.txt" 2>&1
  $CK report /tmp/rec-$m --format md 2>&1 | head -60 >> "$OUT/record-$m.txt"
  tail -5 "$OUT/record-$m.txt"
done
python3 benchmarks/gpu/d2h_check.py /tmp 2>&1 | tee "$OUT/d2h.txt"
python3 benchmarks/gpu/truth_check.py /tmp/rec-sync /tmp/rec-async /tmp/rec-async-staged /tmp/rec-files-sync \
  /tmp/rec-files-async 2>&1 | tee "$OUT/truth.txt"
tar -C /tmp -czf "$OUT/recordings.tgz" rec-sync rec-async rec-async-staged rec-files-sync rec-files-async \
  report-sync.json report-async.json report-async-staged.json report-files-sync.json report-files-async.json
# what comes back from a lent machine is at most 8 files: the texts go as one archive
(cd "$OUT" && tar -czf texts.tgz ./*.txt; ls -la; rm -f ./*.txt)
