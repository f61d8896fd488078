#!/bin/bash
# Layers look down only, checked on what the objects call (docs/ARCHITECTURE.md,
# "Layers"): tests/layers_test.sh reads the #includes, but a call reached
# through vkfuse.h (which every folder may include) or an extern written by
# hand is invisible there. Here every undefined symbol of every object of the
# library that another object of the library defines must be defined in the
# object's own folder or in a folder of a lower rank; folders of one rank
# (plan, cpu, vulkan) are independent and may not call each other.
#
# Usage: layers_symbols.sh OBJECT...       (the library's objects, or folders
#                                           holding them; ctest passes the
#                                           objects of vkfuse_base_obj and
#                                           vkfuse_obj by name)
#        layers_symbols.sh --self-test CC  (the checker on a tiny fake tree:
#                                           it must pass a downward call and
#                                           fail an upward or sideways one)
set -u

# The order, written once, lowest first; one line a rank, folders of a rank
# separated by spaces. "contract" is the backend contract, src/backend*.c;
# "generated" the embedded shader sources (data only). Then the API stages:
# api (context, tensors, op entry points), kernels (user kernels and user
# elementwise ops), function (tracing, functions, control flow), autodiff
# (tapes and gradient rules), saved (the file format); an upper stage
# reaches down by calls, a lower one up only through what the upper one
# registered (src/api/hooks.h). Tools and tests sit above everything and
# link the library; they are not objects of it.
ORDER=(
    "generated util"
    "graph"
    "contract"
    "plan cpu vulkan"
    "api"
    "kernels"
    "function"
    "autodiff"
    "saved"
)

declare -A rank=()
ORDER_TEXT=$(printf '%s < ' "${ORDER[@]}")
ORDER_TEXT=${ORDER_TEXT% < }
for i in "${!ORDER[@]}"; do
    for f in ${ORDER[$i]}; do rank[$f]=$i; done
done

# The layer of an object, from its path, into FOLDER (no subshell: one
# call per object).
folder_of() {
    local p=$1
    case "$p" in
    */src/backend*.o) FOLDER=contract ;;
    */src/*/*) p=${p##*/src/}; FOLDER=${p%%/*} ;;
    */generated/*) FOLDER=generated ;;
    *) FOLDER="?" ;;
    esac
}

# An object's name in messages: from its src/ on.
short() { case "$1" in */src/*) echo "src/${1##*/src/}" ;; *) echo "${1##*/}" ;; esac; }

check() { # OBJECT...
    local fail=0 objs=() o
    while IFS= read -r -d '' o; do objs+=("$o"); done < <(find "$@" -name '*.o' -print0 | sort -z)
    [ ${#objs[@]} -gt 0 ] || { echo "layers_symbols: FAIL: no objects under $* (build first)" >&2; return 1; }
    declare -A def=() layer=()
    for o in "${objs[@]}"; do
        folder_of "$o"
        layer[$o]=$FOLDER
        [[ -n "${rank[${layer[$o]}]+x}" ]] || {
            echo "layers_symbols: FAIL: $(short "$o"): folder '${layer[$o]}' is not in the order of $0" >&2
            fail=1
        }
    done
    [ $fail = 0 ] || return 1
    # One nm over every object ("file: symbol type ..."), then in awk: the
    # global definitions (upper-case types other than U) by symbol, and each
    # undefined symbol that one of them defines checked against the order.
    local ranks="" f
    for o in "${objs[@]}"; do f=${layer[$o]}; ranks+="$o=$f=${rank[$f]}"$'\n'; done
    local out
    out=$(nm -A -P "${objs[@]}" 2>/dev/null | awk -v ranks="$ranks" -v order="$ORDER_TEXT" '
        BEGIN {
            n = split(ranks, r, "\n")
            for (i = 1; i <= n; i++) if (r[i] != "") { split(r[i], p, "="); fol[p[1]] = p[2]; rk[p[1]] = p[3] }
        }
        { file = $1; sub(/:$/, "", file); sym = $2; typ = $3 }
        typ == "U" { nu++; uf[nu] = file; us[nu] = sym; next }
        typ ~ /^[A-TV-Z]$/ { def[sym] = file }
        END {
            calls = 0; bad = 0
            for (i = 1; i <= nu; i++) {
                s = us[i]; if (!(s in def)) continue
                from = uf[i]; to = def[s]; calls++
                if (fol[from] == fol[to] || rk[to] + 0 < rk[from] + 0) continue
                printf "layers_symbols: FAIL: %s (%s) calls %s of %s (%s): %s may call only its own folder and folders below it (%s)\n", \
                       from, fol[from], s, to, fol[to], fol[from], order
                bad++
            }
            print "calls " calls
            exit bad > 0
        }') && fail=0 || fail=1
    local n=${out##*calls }
    out=${out%calls *}
    [ -z "$out" ] || printf '%s\n' "$out" | sed -E 's#[^ ]*/src/#src/#g' >&2
    [ $fail = 0 ] || return 1
    echo "layers_symbols: ok (${#objs[@]} objects, $n calls between objects)"
}

self_test() { # CC
    local cc=$1 t
    t=$(mktemp -d) || return 1
    trap 'rm -rf "$t"' RETURN
    mkdir -p "$t/src/util" "$t/src/graph" "$t/src/cpu" "$t/src/vulkan"
    echo 'int vf_low(void) { return 1; }' >"$t/src/util/low.c"
    echo 'int vf_low(void); int vf_mid(void) { return vf_low(); }' >"$t/src/graph/mid.c"
    echo 'int vf_side(void) { return 2; }' >"$t/src/vulkan/side.c"
    local f
    for f in util/low graph/mid vulkan/side; do "$cc" -c "$t/src/$f.c" -o "$t/src/$f.o" || return 1; done
    check "$t" >/dev/null 2>&1 || { echo "layers_symbols: self-test FAIL: a downward call was refused" >&2; return 1; }
    # upward: util calls graph
    echo 'int vf_mid(void); int vf_up(void) { return vf_mid(); }' >"$t/src/util/up.c"
    "$cc" -c "$t/src/util/up.c" -o "$t/src/util/up.o" || return 1
    check "$t" >/dev/null 2>&1 && { echo "layers_symbols: self-test FAIL: an upward call passed" >&2; return 1; }
    rm "$t/src/util/up.o"
    # sideways: cpu calls vulkan (one rank, independent)
    echo 'int vf_side(void); int vf_cpu(void) { return vf_side(); }' >"$t/src/cpu/x.c"
    "$cc" -c "$t/src/cpu/x.c" -o "$t/src/cpu/x.o" || return 1
    check "$t" >/dev/null 2>&1 && { echo "layers_symbols: self-test FAIL: a call between plan/cpu/vulkan passed" >&2; return 1; }
    rm "$t/src/cpu/x.o"
    # a folder the order does not name
    mkdir -p "$t/src/newfolder"
    "$cc" -c "$t/src/util/low.c" -o "$t/src/newfolder/n.o" -Dvf_low=vf_n || return 1
    check "$t" >/dev/null 2>&1 && { echo "layers_symbols: self-test FAIL: a folder outside the order passed" >&2; return 1; }
    echo "layers_symbols: self-test ok"
}

if [ "${1:-}" = --self-test ]; then self_test "${2:-cc}"; exit; fi
[ $# -ge 1 ] || { echo "usage: $0 OBJECT... | --self-test CC" >&2; exit 2; }
# ctest hands each target's objects as one ;-separated list
args=()
for a in "$@"; do IFS=';' read -ra part <<<"$a"; args+=("${part[@]}"); done
check "${args[@]}"
