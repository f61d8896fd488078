#!/bin/bash
# The worker pool of `vkfuse amber`: a worker that crashes on a file costs
# that file an ERROR (VKFUSE_TEST_AMBER_CRASH makes the worker abort on a
# file whose path contains the text), is replaced, and the files after it
# still run, in order, with one worker (-j 1) and with two.
# usage: pool_test.sh VKFUSE DIR
set -u
bin=$1 dir=$2
files=("$dir/cmd_copy.amber" "$dir/type_int32.amber" "$dir/cmd_fill_series.amber" "$dir/compute_basic.amber")
bad=0
for j in 1 2; do
    out=$(VKFUSE_TEST_AMBER_CRASH=type_int32 "$bin" amber -j $j "${files[@]}" 2>&1)
    rc=$?
    want="PASS $dir/cmd_copy.amber
ERROR $dir/type_int32.amber: the runner crashed (signal 6: Aborted)
PASS $dir/cmd_fill_series.amber
PASS $dir/compute_basic.amber
3 passed, 0 failed, 0 skipped, 1 errors"
    if [ "$out" != "$want" ] || [ $rc != 1 ]; then
        echo "MISMATCH with -j $j (exit $rc):"
        echo "$out"
        bad=1
    fi
done
[ $bad = 0 ] && echo "pool OK"
exit $bad
