#!/bin/bash
# Builds the parser fuzzers with clang (libFuzzer + ASan + UBSan) and runs
# each for SECONDS (default 30) on a corpus seeded from tests/amber.
# Exit 77 (ctest: skipped) when clang cannot build fuzzers here.
# usage: fuzz/run.sh [SECONDS] [WORKDIR]
set -u
secs=${1:-30}
src=$(cd "$(dirname "$0")/.." && pwd)
work=${2:-$(mktemp -d)}
mkdir -p "$work"
cc=$(command -v clang || command -v clang-14 || true)
[ -n "$cc" ] || { echo "clang not found: fuzzing skipped"; exit 77; }
parsers="lex types script parse_amber parse_vkscript parse_util feature_table check"
srcs=""
for p in $parsers; do srcs="$srcs $src/tools/amber/$p.c"; done
flags="-g -O1 -std=c17 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -iquote $src/tools/amber"
status=0
for kind in amber vkscript; do
    def=""; [ $kind = vkscript ] && def="-DFUZZ_VKSCRIPT"
    if ! $cc $flags $def -o "$work/fuzz_$kind" "$src/fuzz/fuzz_parsers.c" $srcs -lm 2>"$work/build_$kind.log"; then
        if grep -q "fuzzer" "$work/build_$kind.log" && ! $cc -fsanitize=fuzzer -x c /dev/null -o /dev/null 2>/dev/null; then
            echo "clang cannot link libFuzzer here: fuzzing skipped"; exit 77
        fi
        cat "$work/build_$kind.log"; exit 1
    fi
    corpus="$work/corpus_$kind"
    mkdir -p "$corpus"
    if [ $kind = amber ]; then
        find "$src/tests/amber" -name '*.amber' -exec cp {} "$corpus/" \;
    else
        find "$src/tests/amber" -name '*.vkscript' -exec cp {} "$corpus/" \;
    fi
    echo "== fuzz_$kind for ${secs}s"
    # -rss_limit_mb / -malloc_limit_mb: an unbounded allocation is a finding.
    (cd "$work" && "./fuzz_$kind" -max_total_time="$secs" -rss_limit_mb=1024 -malloc_limit_mb=256 \
        -timeout=10 -max_len=65536 -print_final_stats=1 "$corpus" 2>&1 | tail -n 25) || status=1
    ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null && status=1
done
exit $status
