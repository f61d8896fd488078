#!/bin/bash
# docs/LIMITS.md's table and tests/test_limits_table.c's rows list the same
# limits: every key of the table is a row of the test (walked there) or in
# its not_walked list, and the other way round; a walked row's lavapipe
# number is the table's (the test checks the number against the code), a
# "none" in the table being 0 in the test. So a limit cannot be added,
# removed or renumbered in one of them alone.
# Usage: limits_doc_test.sh SOURCE_DIR
set -u
src=${1:?usage: limits_doc_test.sh SOURCE_DIR}
doc=$src/docs/LIMITS.md
test=$src/tests/test_limits_table.c
fail=0

# table rows: | `key` | op | what | lavapipe | ...: "key number" (none -> 0,
# text -> text)
doc_rows=$(grep -E '^\| `[a-z0-9_]+` \|' "$doc" | awk -F'|' '{
    key = $2; gsub(/[ `]/, "", key)
    n = $5; gsub(/^ +| +$/, "", n)
    if (n ~ /^[0-9]/) { sub(/ .*/, "", n); gsub(/,/, "", n) }
    else if (n == "none") n = 0
    else n = "-"
    print key, n }')
# walked rows: {"key", number, ...; not walked: the not_walked list
test_rows=$(sed -n '/^static const limit_row rows\[\] = {/,/^};/p' "$test" |
    sed -nE 's/^ *\{"([a-z0-9_]+)", ([0-9]+),.*/\1 \2/p')
not_walked=$(grep -E '^static const char \*const not_walked\[\]' "$test" | grep -oE '"[a-z0-9_]+"' | tr -d '"')

if [ -z "$doc_rows" ] || [ -z "$test_rows" ]; then
    echo "FAIL: no rows found (doc: $(echo "$doc_rows" | wc -l), test: $(echo "$test_rows" | wc -l))"
    exit 1
fi
while read -r key n; do
    t=$(echo "$test_rows" | awk -v k="$key" '$1 == k { print $2 }')
    if [ -n "$t" ]; then
        if [ "$t" != "$n" ]; then
            echo "FAIL: $key: docs/LIMITS.md says $n on lavapipe, tests/test_limits_table.c $t"
            fail=1
        fi
    elif ! echo "$not_walked" | grep -qx "$key"; then
        echo "FAIL: $key is in docs/LIMITS.md but neither walked nor listed as not walked in tests/test_limits_table.c"
        fail=1
    fi
done <<< "$doc_rows"
for key in $(echo "$test_rows" | awk '{ print $1 }') $not_walked; do
    if ! echo "$doc_rows" | awk '{ print $1 }' | grep -qx "$key"; then
        echo "FAIL: $key is in tests/test_limits_table.c but not in docs/LIMITS.md's table"
        fail=1
    fi
done
# the same order, so that the two read side by side
d=$(echo "$doc_rows" | awk '{ print $1 }' | grep -vxF "$not_walked" | tr '\n' ' ')
t=$(echo "$test_rows" | awk '{ print $1 }' | tr '\n' ' ')
if [ "$fail" = 0 ] && [ "$d" != "$t" ]; then
    echo "FAIL: the walked rows are in another order: docs/LIMITS.md: $d; tests/test_limits_table.c: $t"
    fail=1
fi
[ "$fail" = 0 ] && echo "ok: $(echo "$test_rows" | wc -l) walked rows and $(echo "$not_walked" | wc -w) others agree"
exit $fail
