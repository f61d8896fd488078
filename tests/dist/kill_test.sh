#!/usr/bin/env bash
# A rank killed (SIGKILL) in the middle of training, under mpirun: what
# really happens (docs/DISTRIBUTED.md, "When a rank fails").
#  1. mpirun's default: Open MPI notices the dead process and kills the
#     others; the job ends at once with a non-zero status (no hang).
#  2. with --mca orte_abort_on_non_zero_status 0 (the survivors are left
#     running): MPI itself never reports the dead peer, so vkfuse_dist's
#     timeout does: every survivor fails with VF_ERROR_DEVICE naming rank 1
#     within the timeout plus its roll call; mpirun still exits non-zero.
# Ranks: 2 for case 1, 2 and 3 for case 2 (a survivor answering the
# other's roll call).
# Usage: kill_test.sh MPIRUN_AND_FLAGS... -- PROGRAM
set -u
mpirun=()
while [ "$1" != "--" ]; do mpirun+=("$1"); shift; done
prog=$2
fail() { echo "kill_test: FAIL: $*" >&2; exit 1; }
for np in 2 3; do
    t0=$(date +%s)
    if [ $np = 2 ]; then # (the same with 3 ranks; left out for time)
    out=$(timeout 60 "${mpirun[@]}" "$np" "$prog" 1 2>&1); rc=$?
    t=$(( $(date +%s) - t0 ))
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "np $np default: mpirun exited $rc after $t s (want non-zero, no hang)"
    grep -q "exited on signal 9" <<<"$out" || fail "np $np default: no 'exited on signal 9' from mpirun: $out"
    echo "np $np, mpirun's default: the job ended in $t s with status $rc"
    fi

    t0=$(date +%s)
    out=$(timeout 60 "${mpirun[@]}" "$np" --mca orte_abort_on_non_zero_status 0 "$prog" 1 2>&1); rc=$?
    t=$(( $(date +%s) - t0 ))
    [ $rc -ne 124 ] || fail "np $np: hung"
    # mpirun's own status stays non-zero (the dead rank's) though the survivors return 0
    [ $rc -ne 0 ] || fail "np $np: mpirun exited 0 after a rank was killed"
    for r in 0 $([ $np = 3 ] && echo 2); do
        line=$(grep "^rank $r: " <<<"$out") || fail "np $np: rank $r reported nothing: $out"
        grep -q "VF_ERROR_DEVICE after" <<<"$line" || fail "np $np: rank $r: $line"
        grep -q "rank 1 did not answer" <<<"$line" || fail "np $np: rank $r does not name rank 1: $line"
        echo "np $np, survivors left running: $line"
    done
done
echo "kill_test: ok"
