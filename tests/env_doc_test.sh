#!/bin/bash
# Every VKFUSE_* environment variable the library and the CLI read is in
# `vkfuse --help` and in the README's environment table, and
# `vkfuse --version` prints the project's version.
# Usage: env_doc_test.sh VKFUSE_BINARY SOURCE_DIR VERSION
set -u
cli=$1
src=$2
version=$3
fail() { echo "env_doc_test: FAIL: $*" >&2; exit 1; }

out=$("$cli" --version) || fail "vkfuse --version exited $?"
[ "$out" = "vkfuse $version" ] || fail "vkfuse --version printed '$out', not 'vkfuse $version'"

help=$("$cli" --help) || fail "vkfuse --help exited $?"
# the names as string literals in the sources: what getenv and its wrappers read
names=$(grep -rhoE '"VKFUSE_[A-Z0-9_]+' "$src/src" "$src/tools" --include='*.c' | tr -d '"' | sort -u)
[ -n "$names" ] || fail "found no VKFUSE_* names in the sources"
for n in $names; do
    grep -qE "(^| )$n(=| |$)" <<<"$help" || fail "vkfuse --help does not list $n"
    grep -qE "^\| \`$n(=|\`)" "$src/README.md" || fail "the README's environment table has no row for $n"
done
echo "env_doc_test: ok ($(wc -w <<<"$names") variables)"
