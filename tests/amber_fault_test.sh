#!/bin/bash
# The Amber files of issue 15's sweeps: `vkfuse amber FILE` with each fault
# site's calls failing in turn (VKFUSE_FAULT=SITE:N, N over the counts
# VKFUSE_FAULT_COUNT prints): the runner's Vulkan calls (its images,
# views, samplers and buffer views too) and its host allocations (malloc).
# Every run must end with PASS or an ERROR/FAIL verdict that names the site
# and exit status 0 or 1 (never a crash, which the runner reports as "the
# runner crashed", or a hang). By default each site's first call, then
# each one's last, within a 10 s budget shared by the files;
# VKFUSE_FAULT_SWEEP=full runs every N (docs/TESTING.md).
# FILE=SITE,...: those sites must be among the file's counted ones (so a
# site that stops being one fails the test, not just goes unswept).
# usage: amber_fault_test.sh VKFUSE FILE[=SITE,...]...
set -u
bin=$1
shift
fail() { echo "amber_fault_test: FAIL: $*" >&2; exit 1; }
full=0
[ "${VKFUSE_FAULT_SWEEP:-}" = full ] && full=1
total_budget=${VKFUSE_FAULT_BUDGET:-10}
budget=$((total_budget / $#))
for arg in "$@"; do
file=${arg%%=*}
counts=$(VKFUSE_FAULT_COUNT=1 "$bin" amber "$file" 2>&1 >/dev/null | grep '^vkfuse: fault count: ' | tac) ||
    fail "$file: no fault counts from a clean run"
[ -n "$counts" ] || fail "$file: no fault counts from a clean run"
if [ "$arg" != "$file" ]; then
    sites=${arg#*=}
    for want in ${sites//,/ }; do
        grep -q " $want [0-9]*$" <<<"$counts" || fail "$file: $want is not a fault site of its run (counts: $counts)"
    done
fi
runs=0
start=$SECONDS
# round 1: each site's first call, the sites of running first (reverse of the
# counts' order, which is creation first); round 2: its last; full: every call
sweep_one() {
    local site=$1 i=$2 out rc
    out=$(VKFUSE_FAULT="$site:$i" timeout 120 "$bin" amber "$file" 2>&1)
    rc=$?
    runs=$((runs + 1))
    grep -q 'crashed' <<<"$out" && fail "$file, VKFUSE_FAULT=$site:$i: $out"
    [ $rc -le 1 ] || fail "$file, VKFUSE_FAULT=$site:$i: exit status $rc: $out"
    if [ $rc -ne 0 ] && ! grep -qE "$site|out of host memory|malloc" <<<"$out"; then
        fail "$file, VKFUSE_FAULT=$site:$i: the failure does not name the site: $out"
    fi
}
for round in 1 2; do
    while read -r _ _ _ site n; do
        if [ $full = 1 ]; then
            [ $round = 1 ] && for i in $(seq 1 "$n"); do sweep_one "$site" "$i"; done
            continue
        fi
        [ $((SECONDS - start)) -ge "$budget" ] && break 2
        if [ $round = 1 ]; then sweep_one "$site" 1; elif [ "$n" -gt 1 ]; then sweep_one "$site" "$n"; fi
    done <<<"$counts"
done
echo "amber_fault_test: $(basename "$file"): ok ($runs runs in $((SECONDS - start)) s; sites: $(awk '{printf "%s ", $4}' <<<"$counts"))"
done
