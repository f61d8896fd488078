# Sourced by fuzz/run.sh (and tests/fuzz_run_test.sh): runs one libFuzzer
# binary and says whether it found anything.
#
# fuzz_run NAME WORKDIR COMMAND [ARGS...]
#   Runs COMMAND ARGS (a libFuzzer binary and its flags and corpus; prefix
#   `env VAR=...` for its environment) in WORKDIR with its findings written
#   to WORKDIR/findings_NAME/ (-artifact_prefix), which is emptied first: a
#   finding fails the run that made it, and is kept there until the next
#   run of NAME. Prints the last 25 lines of the fuzzer's output. Returns 1
#   when the fuzzer exits non-zero or left a crash-*, leak-*, timeout-* or
#   oom-* file (each named on stdout), else 0.
# Both checks are needed: libFuzzer exits non-zero on a finding, but a
# finding file is the one thing a caller can read back, and a status lost in
# a pipe (the `| tail` below without pipefail) used to pass every finding.
fuzz_run() {
    local name=$1 work=$2
    shift 2
    local art="$work/findings_$name"
    rm -rf "$art"
    mkdir -p "$art" || return 1
    local rc=0
    (set -o pipefail; cd "$work" && "$@" -artifact_prefix="$art/" 2>&1 | tail -n 25) || rc=$?
    local bad=0 pat f
    for pat in crash-* leak-* timeout-* oom-*; do
        # compgen -G: the files a pattern names, nothing (status 1) if none
        while IFS= read -r f; do
            echo "FINDING of fuzz_$name: $f"
            bad=1
        done < <(compgen -G "$art/$pat")
    done
    if [ $rc != 0 ]; then
        echo "FAILED: fuzz_$name exited with status $rc"
        bad=1
    fi
    [ $bad = 0 ] || echo "fuzz_$name: findings stay in $art until its next run; reproduce one by running the fuzzer with the file as its only input"
    return $bad
}
