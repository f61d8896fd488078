#!/bin/bash
# Every file the README and docs/*.md name exists, so that a file moved or
# renamed cannot leave its old name behind in the docs.
#  - Repository paths (`src/plan/plan.c`, `tests/amber/`, `tools/amber/*.c`,
#    `src/util/sb.{c,h}`: braces and globs expanded) must exist; a glob must
#    match a file.
#  - Bare file names (`partition.c`, `ops_*.c`, `memplan.{h,c}`) must exist
#    under a folder that the same line names (`src/plan/`: a table row of
#    docs/ARCHITECTURE.md), or, on a line that names no folder, anywhere
#    in the tree. Inside ``` blocks bare names are not checked: there they are the
#    reader's own files and command output (`cc app.c`, `FAIL t.amber`).
# Not checked: names right after `/` (URLs, `build/dev/tests/test_ops`),
# `$` or `<` (shell variables, `#include <vkfuse.h>`), and names holding a
# `<placeholder>`.
# Usage: doc_paths_test.sh SOURCE_DIR [FILE...]   (files relative to
# SOURCE_DIR; default README.md docs/*.md)
set -u
src=${1:?usage: doc_paths_test.sh SOURCE_DIR [FILE...]}
shift
cd "$src" || exit 1
if [ $# -gt 0 ]; then docs=("$@"); else docs=(README.md docs/*.md); fi
set -f # from here on, * in a name is matched against the tree, never expanded by the shell

# A name starts after a character that cannot be part of one (the first
# group); the match is retried on the rest of the line from the name's last
# character on, so that two names next to each other are both found.
before='(^|[^A-Za-z0-9_./$<*{-])'
pathre="${before}((src|tests|tools|bench|docs|scripts|examples|shaders|include|fuzz|cmake|\\.ci)/[A-Za-z0-9_./{},*<>-]*)"
barere="${before}([A-Za-z0-9_*-]+\\.(c|h|sh|glsl|amber|vkscript|supp|md|\\{[a-z,]+\\}))([^A-Za-z0-9_{]|\$)"

# The tree's files (not the top-level build*, .git and .cache), by path and by base name.
declare -A have base
while IFS= read -r f; do
    f=${f#./}
    have[$f]=1
    base[${f##*/}]+="$f"$'\n'
done < <(find . \( -path ./.git -o -path './build*' -o -path ./.cache \) -prune -o -type f -print)

# Whether a file of the tree matches the glob $1 (a path from the root).
glob_in_tree() {
    local f
    for f in "${!have[@]}"; do
        # shellcheck disable=SC2053 # $1 is a glob on purpose
        [[ $f == $1 ]] && return 0
    done
    return 1
}

# Whether a file named $1 (a glob when it holds *) is in folder $2 or below
# it; anywhere when $2 is empty.
name_in() {
    local name=$1 dir=$2 f
    if [[ $name == *'*'* ]]; then
        if [ -z "$dir" ]; then glob_in_tree "$name" || glob_in_tree "*/$name"; else
            glob_in_tree "$dir/$name" || glob_in_tree "$dir/*/$name"; fi
        return
    fi
    [ -n "${base[$name]+x}" ] || return 1
    [ -z "$dir" ] && return 0
    while IFS= read -r f; do [[ $f == "$dir/"* ]] && return 0; done <<<"${base[$name]}"
    return 1
}

bad=0 n=0
names=()
report() { echo "doc_paths_test: $1: '$2' $3" >&2; bad=$((bad + 1)); }

for doc in "${docs[@]}"; do
    [ -f "$doc" ] || { report "$doc" "$doc" "(the document itself) does not exist"; continue; }
    lineno=0 fence=0
    while IFS= read -r line || [ -n "$line" ]; do
        lineno=$((lineno + 1))
        if [[ $line =~ ^[[:space:]]*\`\`\` ]]; then fence=$((1 - fence)); continue; fi
        [[ $line == *.* || $line == */* ]] || continue
        dirs=()
        rest=$line
        while [[ $rest =~ $pathre ]]; do
            tok=${BASH_REMATCH[2]}
            rest=${rest#*"${BASH_REMATCH[0]}"}
            rest=${tok: -1}$rest
            while [[ $tok == *[.,:\;] ]]; do tok=${tok%?}; done
            [[ $tok == *[\<\>]* ]] && continue
            eval "names=( $tok )" # brace expansion only: tok holds letters, digits and _ . / { } , * -
            for p in "${names[@]}"; do
                n=$((n + 1))
                if [[ $p == */ ]]; then
                    [ -d "$p" ] || report "$doc:$lineno" "$p" "is not a folder of the repository"
                    dirs+=("${p%/}")
                elif [[ $p == *'*'* ]]; then
                    glob_in_tree "$p" || report "$doc:$lineno" "$p" "matches no file of the repository"
                elif [ -d "$p" ]; then
                    dirs+=("$p")
                else
                    [ -n "${have[$p]+x}" ] || report "$doc:$lineno" "$p" "does not exist"
                fi
            done
        done
        [ $fence = 1 ] && continue
        rest=$line
        while [[ $rest =~ $barere ]]; do
            tok=${BASH_REMATCH[2]}
            rest=${rest#*"${BASH_REMATCH[1]}${BASH_REMATCH[2]}"}
            rest=${tok: -1}$rest
            eval "names=( $tok )"
            for b in "${names[@]}"; do
                n=$((n + 1))
                if [ ${#dirs[@]} -eq 0 ]; then
                    name_in "$b" "" || report "$doc:$lineno" "$b" "is no file of the repository"
                else
                    found=0
                    for d in "${dirs[@]}"; do name_in "$b" "$d" && { found=1; break; }; done
                    [ $found = 1 ] || report "$doc:$lineno" "$b" "is in none of the line's folders (${dirs[*]})"
                fi
            done
        done
    done <"$doc"
done
if [ $bad -gt 0 ]; then
    echo "doc_paths_test: FAIL: $bad of the $n file names in ${docs[*]} name no file of the repository (moved or renamed? fix the docs)" >&2
    exit 1
fi
echo "doc_paths_test: ok ($n file names in ${#docs[@]} documents)"
