#!/bin/bash
# Layers look down only, checked on what the objects call (docs/ARCHITECTURE.md,
# "Layers"): tests/layers_test.sh reads the #includes, but a call reached
# through vkfuse.h (which every folder may include) or an extern written by
# hand is invisible there. Here every undefined symbol of every object of the
# library that another object of the library defines must be defined in the
# object's own folder or in a folder of a lower rank; folders of one rank
# (plan, cpu, vulkan) are independent and may not call each other.
#
# Usage: layers_symbols.sh OBJECT_DIR...   (the library's object folders,
#                                           CMakeFiles/vkfuse_base_obj.dir and
#                                           CMakeFiles/vkfuse_obj.dir)
#        layers_symbols.sh --self-test CC  (the checker on a tiny fake tree:
#                                           it must pass a downward call and
#                                           fail an upward or sideways one)
set -u

# The order, written once, lowest first; one line a rank, folders of a rank
# separated by spaces. "contract" is the backend contract, src/backend*.c;
# "generated" the embedded shader sources (data only). Tools and tests sit
# above everything and link the library; they are not objects of it.
ORDER=(
    "generated util"
    "graph"
    "contract"
    "plan cpu vulkan"
    "frontend"
)

declare -A rank=()
for i in "${!ORDER[@]}"; do
    for f in ${ORDER[$i]}; do rank[$f]=$i; done
done

# The layer of an object, from its path under the object folder.
folder_of() {
    local p=$1
    case "$p" in
    */src/backend*.o) echo contract ;;
    */src/*/*) p=${p##*/src/}; echo "${p%%/*}" ;;
    */generated/*) echo generated ;;
    *) echo "?" ;;
    esac
}

# An object's name in messages: from its src/ on.
short() { case "$1" in */src/*) echo "src/${1##*/src/}" ;; *) echo "${1##*/}" ;; esac; }

check() { # OBJECT_DIR...
    local fail=0 objs=() o
    while IFS= read -r -d '' o; do objs+=("$o"); done < <(find "$@" -name '*.o' -print0 | sort -z)
    [ ${#objs[@]} -gt 0 ] || { echo "layers_symbols: FAIL: no objects under $* (build first)" >&2; return 1; }
    declare -A def=() layer=()
    for o in "${objs[@]}"; do
        layer[$o]=$(folder_of "$o")
        [[ -n "${rank[${layer[$o]}]+x}" ]] || {
            echo "layers_symbols: FAIL: $(short "$o"): folder '${layer[$o]}' is not in the order of $0" >&2
            fail=1
        }
    done
    [ $fail = 0 ] || return 1
    # Global definitions (upper-case types other than U), per symbol its object.
    local sym typ
    for o in "${objs[@]}"; do
        while read -r sym typ _; do
            case "$typ" in U | w | v) ;; [A-Z]) def[$sym]=$o ;; esac
        done < <(nm -P "$o" 2>/dev/null)
    done
    local n=0 from to
    for o in "${objs[@]}"; do
        from=${layer[$o]}
        while read -r sym typ _; do
            [ "$typ" = U ] || continue
            [[ -n "${def[$sym]+x}" ]] || continue # libc, Vulkan, shaderc, ...
            to=${layer[${def[$sym]}]}
            n=$((n + 1))
            [ "$to" = "$from" ] && continue
            [ "${rank[$to]}" -lt "${rank[$from]}" ] && continue
            echo "layers_symbols: FAIL: $(short "$o") ($from) calls $sym of $(short "${def[$sym]}") ($to):" \
                 "$from may call only its own folder and folders below it (${ORDER[*]})" >&2
            fail=1
        done < <(nm -P "$o" 2>/dev/null)
    done
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
[ $# -ge 1 ] || { echo "usage: $0 OBJECT_DIR... | --self-test CC" >&2; exit 2; }
check "$@"
