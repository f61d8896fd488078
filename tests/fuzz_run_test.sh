#!/bin/bash
# fuzz/run_one.sh's verdicts, which decide whether the fuzz ctest entries
# (amber_fuzz, saved_fuzz, api_fuzz) fail: a stand-in fuzzer that leaves a
# crash-, leak-, timeout- or oom- file or exits non-zero must fail the run;
# a clean one must pass, also after a failed run. Then, when clang can link
# libFuzzer, a real fuzzer that leaks on one input must fail it too.
# usage: fuzz_run_test.sh SRCDIR
set -u
src=$1
. "$src/fuzz/run_one.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
fail() { echo "FAIL: $*"; bad=1; }

# The stand-in: writes FAKE_FIND-0123 into its -artifact_prefix when FAKE_FIND
# is set, prints more than tail keeps, and exits FAKE_RC.
fake="$tmp/fake_fuzzer"
cat >"$fake" <<'FAKE'
#!/bin/bash
prefix=
for a; do case $a in -artifact_prefix=*) prefix=${a#*=};; esac; done
for i in $(seq 100); do echo "fake fuzzer line $i in $PWD"; done
[ -z "${FAKE_FIND:-}" ] || echo finding >"${prefix}${FAKE_FIND}-0123"
exit "${FAKE_RC:-0}"
FAKE
chmod +x "$fake"
work="$tmp/work"
mkdir -p "$work"

# run EXPECT(0|1) WHAT [VAR=VALUE...]: one fuzz_run of the stand-in
run() {
    local want=$1 what=$2
    shift 2
    local out rc=0
    out=$(fuzz_run fake "$work" env "$@" "$fake" -max_total_time=1 corpus) || rc=$?
    [ "$rc" = "$want" ] || fail "$what: fuzz_run returned $rc, expected $want; its output:"$'\n'"$out"
    grep -q "fake fuzzer line 100 in $work" <<<"$out" || fail "$what: the fuzzer's last lines (run in $work) not shown"
    ! grep -q "fake fuzzer line 50 " <<<"$out" || fail "$what: more than the last 25 lines shown"
    if [ "$want" = 1 ]; then
        grep -q '^FINDING\|^FAILED' <<<"$out" || fail "$what: the failure is not named"
    fi
    last_out=$out
}

run 0 "a clean run" FAKE_RC=0
for kind in crash leak timeout oom; do
    run 1 "a $kind file with exit status 0" FAKE_FIND=$kind
    grep -qF "FINDING of fuzz_fake: $work/findings_fake/$kind-0123" <<<"$last_out" || fail "$kind: finding not named"
done
run 1 "exit status 1 with no file" FAKE_RC=1
grep -q 'exited with status 1' <<<"$last_out" || fail "exit status not named"
run 1 "exit status 70 (libFuzzer's timeout) with its file" FAKE_RC=70 FAKE_FIND=timeout
# a finding belongs to the run that made it: the next clean run passes
run 1 "a leak" FAKE_FIND=leak
run 0 "a clean run after a failed one" FAKE_RC=0
# other libFuzzer artifacts (slow units) are not findings
run 0 "a slow unit" FAKE_FIND=slow-unit

# A real libFuzzer binary whose one seed leaks: the run must fail with a leak file.
cc=$(command -v clang || command -v clang-14 || true)
if [ -n "$cc" ] && printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' |
    "$cc" -fsanitize=fuzzer -x c - -o "$tmp/probe" 2>/dev/null; then
    cat >"$tmp/leaky.c" <<'C'
#include <stdlib.h>
#include <string.h>
static void *kept;
int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)
{
    if (n >= 4 && !memcmp(d, "LEAK", 4)) { kept = malloc(64); kept = NULL; }
    return 0;
}
C
    "$cc" -g -O0 -fsanitize=fuzzer,address -o "$tmp/leaky" "$tmp/leaky.c" || fail "cannot build the leaking fuzzer"
    mkdir -p "$tmp/corpus"
    printf 'LEAK' >"$tmp/corpus/seed"
    rc=0
    out=$(fuzz_run leaky "$work" "$tmp/leaky" -runs=10 "$tmp/corpus") || rc=$?
    [ $rc = 1 ] || fail "a real fuzzer's leak: fuzz_run returned $rc, expected 1; its output:"$'\n'"$out"
    compgen -G "$work/findings_leaky/leak-*" >/dev/null || fail "a real fuzzer's leak: no leak file in $work/findings_leaky"
    printf 'fine' >"$tmp/corpus/seed"
    rc=0
    out=$(fuzz_run leaky "$work" "$tmp/leaky" -runs=10 "$tmp/corpus") || rc=$?
    [ $rc = 0 ] || fail "a real fuzzer without a leak: fuzz_run returned $rc, expected 0; its output:"$'\n'"$out"
else
    echo "clang cannot link libFuzzer here: the real-fuzzer case skipped (the stand-in cases ran)"
fi

[ $bad = 0 ] && echo "fuzz_run: every verdict as expected"
exit $bad
