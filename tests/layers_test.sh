#!/bin/bash
# Layers look down only (docs/ARCHITECTURE.md, "Layers"): every #include "..."
# of a file under src/ names a header of its own folder or of a folder the
# table below allows; and the library reads the environment in one place
# (src/api/context.c, when a context is created).
# Usage: layers_test.sh SOURCE_DIR
set -u
src=$1/src
fail=0
bad() { echo "layers_test: FAIL: $*" >&2; fail=1; }

# folder -> what it may include besides itself (prefixes; vkfuse.h, the
# public header, everywhere; the saved stage implements vkfuse_saved.h too). util < graph < plan < the API stages (api <
# kernels < function < autodiff < saved; tests/layers_symbols.sh checks the
# same order on calls); the backends
# see util, the op table (graph/op.h), the user-kernel contract
# (graph/ukernel.h), the user-elementwise-op contract (graph/uelem.h) and
# the backend contract only.
declare -A allow=(
    [util]="vkfuse.h"
    [graph]="vkfuse.h util/"
    [plan]="vkfuse.h util/ graph/ backend.h"
    [api]="vkfuse.h util/ graph/ plan/ backend.h"
    [kernels]="vkfuse.h util/ graph/ plan/ backend.h api/"
    [function]="vkfuse.h util/ graph/ plan/ backend.h api/ kernels/"
    [autodiff]="vkfuse.h util/ graph/ plan/ backend.h api/ kernels/ function/"
    [saved]="vkfuse.h vkfuse_saved.h util/ graph/ plan/ backend.h api/ kernels/ function/ autodiff/"
    [dist]="vkfuse.h vkfuse_dist.h"
    [cpu]="vkfuse.h util/ graph/op.h graph/ukernel.h graph/uelem.h backend.h"
    [vulkan]="vkfuse.h util/ graph/op.h graph/ukernel.h graph/uelem.h backend.h"
)
# src/dist/ is the separate vkfuse_dist library: the public API only.
# backend.h, the contract, sits with the backends.
allow_backend_h="vkfuse.h util/ graph/op.h graph/ukernel.h"

# Known violations, each with the change that removes it (none today).
exceptions=()

allowed() { # file folder header
    local p
    for p in ${allow[$2]:-} "$2/"; do
        [[ "$3" == "$p" || ( "$p" == */ && "$3" == "$p"* ) ]] && return 0
    done
    local e
    for e in "${exceptions[@]}"; do [[ "$e" == "$1 $3" ]] && return 0; done
    return 1
}

checked=0
while IFS= read -r -d '' f; do
    rel=${f#"$1"/}
    dir=${rel#src/}
    dir=${dir%%/*}
    [[ -n "${allow[$dir]+x}" ]] || { bad "$rel: src/$dir is not in the layer table of $0"; continue; }
    while IFS= read -r h; do
        allowed "$rel" "$dir" "$h" || bad "$rel includes \"$h\": src/$dir may include only ${allow[$dir]} and its own folder"
    done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/p' "$f")
    checked=$((checked + 1))
done < <(find "$src" -mindepth 2 \( -name '*.c' -o -name '*.h' -o -name '*.inc' \) -print0)

while IFS= read -r h; do
    ok=0
    for p in $allow_backend_h; do [[ "$h" == "$p" || ( "$p" == */ && "$h" == "$p"* ) ]] && ok=1; done
    [ $ok = 1 ] || bad "src/backend.h includes \"$h\": the contract may include only $allow_backend_h"
done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/p' "$src/backend.h")

# The environment: read when a context is created, in context.c alone.
# Two exceptions, other libraries' own variables that must be read before
# those libraries are loaded, long before any context exists: OpenBLAS's
# OPENBLAS_CORETYPE (src/cpu/blas.c) and OpenMP's OMP_WAIT_POLICY, which
# oneDNN's OpenMP runtime reads (src/cpu/dnnl_conv.c).
while IFS= read -r hit; do
    bad "${hit#"$1"/}: getenv outside src/api/context.c (read the environment there, into vf_options or vf_vk_options)"
done < <(grep -rnoE '\b(secure_)?getenv[[:space:]]*\("?[A-Za-z_]*' "$src" --include='*.c' --include='*.h' |
         grep -v "^$src/api/context.c:" | grep -vE "^$src/cpu/blas\.c:[0-9]+:getenv\(\"OPENBLAS_CORETYPE\$" |
         grep -vE "^$src/cpu/dnnl_conv\.c:[0-9]+:getenv\(\"OMP_WAIT_POLICY\$")

[ $fail = 0 ] || exit 1
echo "layers_test: ok ($checked files)"
