#!/usr/bin/env bash
# The labgrid integration's tests: SMPDriver's unit tests (URI mapping, error reporting), then the
# end-to-end test (Integrations/labgrid/tests/e2e_labgrid.py): smp-sim boards exported through ser2net by
# labgrid-exporter, a labgrid-coordinator, places acquired with labgrid-client, upgrades through the driver.
# Needs Scripts/setup.sh (ser2net, the labgrid venv) and smp + smp-sim built (default .build/debug).
#   labgrid-e2e.sh [--bin DIR] [--keep]     (arguments go to e2e_labgrid.py)
# Every wait is bounded: the end-to-end test gives up after 170 s, the whole script after 240 s.
# Exit code: 0 when both passed, else 1.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${SMP_LABGRID_VENV:-$repo/.venv-labgrid}"
python="$venv/bin/python"
if [[ ! -x "$python" ]]; then
    echo "labgrid-e2e: no labgrid venv at $venv: run Scripts/setup.sh (or set SMP_LABGRID_VENV)" >&2
    exit 1
fi

echo "labgrid-e2e: unit tests (Integrations/labgrid/tests/test_smp_labgrid.py)"
timeout -k 5 60 "$python" -m pytest -q -p no:cacheprovider "$repo/Integrations/labgrid/tests/test_smp_labgrid.py"
unit_status=$?
((unit_status == 124)) && echo "labgrid-e2e: the unit tests did not finish within 60 s"

echo "labgrid-e2e: end-to-end test"
# The script bounds itself (170 s) and stops what it started; the outer timeout is the last resort.
timeout -k 10 240 "$python" "$repo/Integrations/labgrid/tests/e2e_labgrid.py" "$@"
e2e_status=$?
((e2e_status == 124)) && echo "labgrid-e2e: the end-to-end test did not finish within 240 s"

if ((unit_status == 0 && e2e_status == 0)); then
    echo "labgrid-e2e: PASSED"
    exit 0
fi
echo "labgrid-e2e: FAILED (unit tests exit $unit_status, end-to-end exit $e2e_status)"
exit 1
