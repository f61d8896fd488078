#!/bin/bash
# Runs the .amber / .vkscript files under DIR through `vkfuse amber` and
# checks every verdict against the file's expectation:
#   # vkfuse-expect: PASS | FAIL | SKIP | ERROR [LINE:COL] [| TEXT]
#   # vkfuse-expect-text: TEXT          (the verdict line must contain TEXT)
# A file without one must PASS. Also checks the summary line and the exit
# status. With --expect-validation the runner's stderr must contain
# validation messages and is not passed on (ctest fails on them otherwise).
# usage: run_suite.sh [--expect-validation] VKFUSE DIR [JOBS]
set -u
expect_validation=0
if [ "${1:-}" = --expect-validation ]; then expect_validation=1; shift; fi
bin=$1 dir=$2 jobs=${3:-2}
mapfile -t files < <(find "$dir" -maxdepth 1 -type f \( -name '*.amber' -o -name '*.vkscript' \) | sort)
[ ${#files[@]} -gt 0 ] || { echo "no test files in $dir"; exit 1; }
errf=$(mktemp)
trap 'rm -f "$errf"' EXIT
out=$("$bin" amber --validation -j "$jobs" "${files[@]}" 2>"$errf")
rc=$?
echo "$out"
if [ $expect_validation = 1 ]; then
    grep -q 'VKFUSE-VALIDATION' "$errf" || { echo "MISMATCH: no validation message on stderr"; exit 1; }
else
    cat "$errf" >&2
fi
bad=0 want_fail=0 np=0 nf=0 ns=0 ne=0
for f in "${files[@]}"; do
    line=$(grep -E '^(PASS|FAIL|SKIP|ERROR) ' <<<"$out" | grep -F -- " $f" | head -1)
    exp=$(grep -m1 '^# vkfuse-expect:' "$f" | sed 's/^# vkfuse-expect: *//')
    [ -n "$exp" ] || exp=PASS
    status=${exp%% *}
    rest=${exp#"$status"}
    texts=()
    pos=$(sed -E 's/^ *([0-9]+:[0-9]+)?.*/\1/' <<<"$rest")
    [[ $rest == *"|"* ]] && texts+=("$(sed -E 's/^[^|]*\| *//' <<<"$rest")")
    while IFS= read -r t; do texts+=("$t"); done < <(grep '^# vkfuse-expect-text:' "$f" | sed 's/^# vkfuse-expect-text: *//')
    case $status in PASS) np=$((np+1));; FAIL) nf=$((nf+1)); want_fail=1;; SKIP) ns=$((ns+1));; ERROR) ne=$((ne+1)); want_fail=1;; esac
    ok=1
    [[ $line == "$status $f"* ]] || ok=0
    [ -z "$pos" ] || [[ $line == "$status $f:$pos:"* ]] || ok=0
    for t in "${texts[@]}"; do [[ $line == *"$t"* ]] || ok=0; done
    if [ $ok = 0 ]; then
        echo "MISMATCH $f: expected $exp ${texts[*]:+(with: ${texts[*]})}"
        echo "      got: ${line:-no verdict line}"
        bad=1
    fi
done
summary="$np passed, $nf failed, $ns skipped, $ne errors"
last=$(tail -n 1 <<<"$out")
[ "$last" = "$summary" ] || { echo "MISMATCH summary: expected '$summary', got '$last'"; bad=1; }
if [ $want_fail = 1 ]; then [ $rc = 1 ] || { echo "MISMATCH exit status $rc, expected 1"; bad=1; }
else [ $rc = 0 ] || { echo "MISMATCH exit status $rc, expected 0"; bad=1; }; fi
[ $bad = 0 ] && echo "suite OK: all ${#files[@]} verdicts as expected"
exit $bad
