#!/usr/bin/env bash
# The checks that need a GPU, in one run on a CUDA machine (CI has none; see README "--device cuda").
#
#   bash benchmarks/gpu_check.sh [OUTDIR]
#
# 1. The whole mutant library graded with its layers on CUDA (VALIDATOR_TEST_DEVICE=cuda): every correct
#    variant gets full marks there, every broken one fails its declared checks (any check, for a file that
#    declares BREAKS_EVERY_CALL_ON_A_DEVICE), and the files under tests/implementations/*/device_broken/
#    (correct on the CPU) are caught. One seed per variant; GPU_CHECK_ALL=1 adds the many-seed and
#    officially-graded runs (three times as long: about 8 minutes on 14 of an H100 machine's 16 cores).
# 2. `submit-build --device cuda` on the reference itself: every code check passes.
# Each test's verdict is printed as it comes (-v); after GPU_CHECK_BUDGET_S seconds (default 300) pytest is
# interrupted and still reports the failures it has seen, so a leased machine's limit loses no findings.
# Needs this project's Python dependencies importable (an installed venv, or PYTHONPATH) and a CUDA torch.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-/tmp/gpu_check}}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 VALIDATOR_TEST_DEVICE=cuda VALIDATOR_TEST_SEEDS="${VALIDATOR_TEST_SEEDS:-1}"
python3 - <<'EOF' || exit 2
import torch
assert torch.cuda.is_available(), "no CUDA device: this script checks --device cuda"
print("torch", torch.__version__, "on", torch.cuda.get_device_name(0))
EOF
jobs="${GPU_CHECK_JOBS:-$(( $(nproc) > 2 ? $(nproc) - 2 : 1 ))}"
select=(-k "not on_every_seed and not officially_graded")
[ -n "${GPU_CHECK_ALL:-}" ] && select=()
timeout -s INT "${GPU_CHECK_BUDGET_S:-300}" python3 -m pytest -v -rfE --tb=short -p no:cacheprovider -n "$jobs" \
    --thorough "${select[@]}" --junitxml="$out/junit.xml" tests/test_mutants.py tests/test_device.py \
    > "$out/pytest.log" 2>&1
tests=$?
grep -E "FAILED|ERROR |passed|failed" "$out/pytest.log" | sort -u | tail -n 60
cp reference/layers.py "$out/reference_layers.py"
python3 -m validator submit-build --student "$out/reference_layers.py" --device cuda --no-input \
    --json "$out/reference_on_cuda.json" > "$out/submit_build.log" 2>&1
build=$?
tail -n 25 "$out/submit_build.log"
python3 - "$out/reference_on_cuda.json" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
lost = [(c["id"], k["id"], k["status"]) for c in report["challenges"] for k in c["checks"]
        if k["kind"] != "question" and k["status"] not in ("passed", "advisory")]
print(f"reference on cuda: {len(lost)} code checks lost", *lost, sep="\n  ")
sys.exit(1 if lost else 0)
EOF
ref=$?
echo "gpu_check: pytest exit $tests, submit-build exit $build (1 = questions unanswered), reference lost checks: $ref"
[ "$tests" -eq 0 ] && [ "$ref" -eq 0 ]
