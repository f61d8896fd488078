#!/bin/bash
# The DEVICE_FEATURE table of `vkfuse amber` is generated from vulkan_core.h
# (cmake/amber_features.cmake). This checks it independently: every
# VkPhysicalDevice*Features* struct of the header with an sType and VkBool32
# members, each member as Struct.member (struct name without
# VkPhysicalDevice), must be listed by `vkfuse amber --list-features`,
# and nothing else.
# usage: feature_table_test.sh VKFUSE VULKAN_CORE_H
set -u
bin=$1 header=$2
want=$(mktemp) got=$(mktemp)
trap 'rm -f "$want" "$got"' EXIT
awk '
  /^typedef struct VkPhysicalDevice[A-Za-z0-9]*Features[A-Za-z0-9]* \{/ {
      name = $3; sub(/^VkPhysicalDevice/, "", name); inside = 1; stype = 0; n = 0; next }
  inside && /VkStructureType +sType/ { stype = 1 }
  inside && /^ +VkBool32 +[A-Za-z0-9_]+;/ { m = $2; sub(/;/, "", m); mem[n++] = m }
  inside && /^}/ { if (stype) for (i = 0; i < n; i++) print name "." mem[i]; inside = 0 }
' "$header" | sort > "$want"
"$bin" amber --list-features | sort > "$got"
nw=$(wc -l < "$want")
[ "$nw" -gt 100 ] || { echo "FAIL: only $nw feature members found in $header"; exit 1; }
if ! diff -u "$want" "$got"; then
    echo "FAIL: the feature table differs from $header (- header, + table)"
    exit 1
fi
echo "OK: $nw feature members, every feature struct of $header"
