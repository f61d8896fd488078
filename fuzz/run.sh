#!/bin/bash
# Builds the fuzzers with clang (libFuzzer + ASan + UBSan) and runs each for
# SECONDS (default 30): the amber parsers on a corpus seeded from
# tests/amber and fuzz/seeds_amber, the CLI's .npy reader (fuzz_npy.c) on fuzz/seeds_npy, and the saved-function loader (fuzz_saved.c, the whole
# library built instrumented in WORKDIR/saved-build) on seeds it writes
# itself; the public-API fuzzer (fuzz_api.c, same instrumented build) on
# the CPU backend and then on the default Vulkan device (lavapipe), each
# for SECONDS. WHICH: parsers, saved, api or all (default).
# fuzz_api's API-misuse actions (released and out-of-scope handles, double
# release, escaped symbolic tensors) run with VKFUSE_FUZZ_MISUSE=1, the
# default below (use-after-release is an error); VKFUSE_FUZZ_MISUSE=0
# fuzzes valid use only.
# Exit 77 (ctest: skipped) when clang cannot build fuzzers here; else 1 when
# any fuzzer exits non-zero or leaves a crash-, leak-, timeout- or oom- file
# (in WORKDIR/findings_NAME/, emptied at the start of NAME's run: run_one.sh).
# usage: fuzz/run.sh [SECONDS] [WORKDIR] [WHICH]   (parsers: amber, vkscript and npy)
set -u
secs=${1:-30}
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/fuzz/run_one.sh"
work=${2:-$(mktemp -d)}
which=${3:-all}
mkdir -p "$work"
cc=$(command -v clang || command -v clang-14 || true)
[ -n "$cc" ] || { echo "clang not found: fuzzing skipped"; exit 77; }
parsers="lex types script parse_amber parse_amber_pipeline parse_amber_cmds parse_amber_image parse_vkscript parse_util feature_table check check_probe"
srcs=""
for p in $parsers; do srcs="$srcs $src/tools/amber/$p.c"; done
# the parsers allocate through the library's fault sites (util/fault.h)
srcs="$srcs $src/src/util/fault.c $src/src/util/err.c"
mkdir -p "$work"
# feature_table.c includes the feature table generated from the Vulkan headers.
cmake -DHEADER=/usr/include/vulkan/vulkan_core.h -DOUT="$work/amber_features.inc" \
      -P "$src/cmake/amber_features.cmake" || exit 1
flags="-g -O1 -std=c17 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -iquote $src/tools/amber -iquote $work -iquote $src/src -I $src/include"
status=0
kinds="amber vkscript npy"
[ "$which" = saved ] || [ "$which" = api ] && kinds=""
for kind in $kinds; do
    def=""; [ $kind = vkscript ] && def="-DFUZZ_VKSCRIPT"
    target="$src/fuzz/fuzz_parsers.c $srcs"
    # the CLI's .npy reader (tools/npy.c) needs nothing of the library
    [ $kind = npy ] && target="$src/fuzz/fuzz_npy.c $src/tools/npy.c" && def="-iquote $src/tools"
    if ! $cc $flags $def -o "$work/fuzz_$kind" $target -lm -lpthread 2>"$work/build_$kind.log"; then
        if grep -q "fuzzer" "$work/build_$kind.log" && ! $cc -fsanitize=fuzzer -x c /dev/null -o /dev/null 2>/dev/null; then
            echo "clang cannot link libFuzzer here: fuzzing skipped"; exit 77
        fi
        cat "$work/build_$kind.log"; exit 1
    fi
    corpus="$work/corpus_$kind"
    mkdir -p "$corpus"
    if [ $kind = amber ]; then
        find "$src/tests/amber" -name '*.amber' -exec cp {} "$corpus/" \;
        cp "$src"/fuzz/seeds_amber/* "$corpus/" # regressions: each a finding
    elif [ $kind = npy ]; then
        cp "$src"/fuzz/seeds_npy/* "$corpus/"
    else
        find "$src/tests/amber" -name '*.vkscript' -exec cp {} "$corpus/" \;
    fi
    echo "== fuzz_$kind for ${secs}s"
    # -rss_limit_mb / -malloc_limit_mb: an unbounded allocation is a finding.
    fuzz_run $kind "$work" "./fuzz_$kind" -max_total_time="$secs" -rss_limit_mb=1024 -malloc_limit_mb=256 \
        -timeout=10 -max_len=65536 -print_final_stats=1 "$corpus" || status=1
done
if [ "$which" != parsers ]; then
    bdir="$work/saved-build"
    targets="fuzz_saved fuzz_api"
    [ "$which" = saved ] && targets=fuzz_saved
    [ "$which" = api ] && targets=fuzz_api
    san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
    if ! { cmake -S "$src" -B "$bdir" -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
             -DCMAKE_C_FLAGS="$san" -DVKFUSE_WERROR=OFF -DVKFUSE_BUILD_BENCH=OFF -DVKFUSE_BUILD_EXAMPLES=OFF \
             -DVKFUSE_FUZZ_SAVED=ON >"$work/build_saved.log" 2>&1 &&
           cmake --build "$bdir" --target $targets >>"$work/build_saved.log" 2>&1; }; then
        tail -n 40 "$work/build_saved.log"; exit 1
    fi
fi
if [ "$which" = saved ] || [ "$which" = all ]; then
    corpus="$work/corpus_saved"
    mkdir -p "$corpus"
    echo "== fuzz_saved for ${secs}s"
    fuzz_run saved "$work" env VKFUSE_FUZZ_SEEDS="$corpus" "$bdir/fuzz/fuzz_saved" -max_total_time="$secs" \
        -rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=10 -max_len=65536 -print_final_stats=1 "$corpus" || status=1
    compgen -G "$corpus/seed*.vkf" >/dev/null || { echo "fuzz_saved wrote no seeds"; status=1; }
fi
if [ "$which" = api ] || [ "$which" = all ]; then
    # -close_fd_mask=1: vf_print's output is not the fuzzer's.
    for backend in cpu vulkan; do
        corpus="$work/corpus_api_$backend"
        mkdir -p "$corpus"
        cp "$src"/fuzz/seeds_api/* "$corpus/" 2>/dev/null
        echo "== fuzz_api ($backend) for ${secs}s"
        fuzz_run api_$backend "$work" env VKFUSE_FUZZ_BACKEND=$backend VKFUSE_FUZZ_MISUSE=${VKFUSE_FUZZ_MISUSE:-1} \
            LSAN_OPTIONS="suppressions=$src/tests/lsan.supp:print_suppressions=0" \
            "$bdir/fuzz/fuzz_api" -max_total_time="$secs" -rss_limit_mb=4096 -malloc_limit_mb=512 -timeout=20 \
            -max_len=4096 -close_fd_mask=1 -print_final_stats=1 "$corpus" || status=1
    done
fi
exit $status
