#!/usr/bin/env bash
# Every public function (VF_API in include/vkfuse.h, vkfuse_function.h, vkfuse_kernel.h, vkfuse_profile.h and vkfuse_saved.h) that touches a
# context, its tensors, functions or tapes must take the context's lock
# (VF_LOCKED, src/api/lock.h) as it starts: one context may be used
# from several threads. This lists each VF_API function whose definition in
# src/ has no VF_LOCKED, unless it is below with the reason it needs none.
# Usage: api_lock_test.sh <source dir>
set -euo pipefail
src=${1:-$(dirname "$0")/..}

# name: why it needs no lock
declare -A exempt=(
  [vf_context_create]="locks by hand: no other thread can know the context yet"
  [vf_context_destroy]="locks by hand: the context is freed before it returns"
  [vf_status_name]="no context"
  [vf_last_status]="no context: the calling thread's own record"
  [vf_last_error]="no context: the calling thread's own record"
  [vf_free]="no context"
  [vf_version]="no context"
  [vf_dtype_name]="no context"
  [vf_dtype_size]="no context"
  [vf_devices]="no context: its own Vulkan instance"
  [vf_auto_backend]="no context: vf_devices' own Vulkan instance"
  [vf_device_name]="reads a field fixed at creation"
  [vf_backend_get]="reads a field fixed at creation"
  [vf_context_profiling]="reads a field fixed at creation"
  [vf_tensor_context]="reads the slab header (written once, before any of its handles exists)"
  [vf_tensor_copy_to]="takes the source's and then the destination's lock through the calls it makes, never both at once (no lock-order deadlock)"
  [vf_trace_file_create]="no context: a vf_trace_file is the caller's"
  [vf_trace_file_add]="no context: a vf_trace_file is the caller's"
  [vf_trace_file_json]="no context: a vf_trace_file is the caller's"
  [vf_trace_file_write]="no context: a vf_trace_file is the caller's"
  [vf_trace_file_error]="no context: a vf_trace_file is the caller's"
  [vf_trace_file_destroy]="no context: a vf_trace_file is the caller's"
  [vf_saved_file_version]="no context: reads a file's header"
)

api=$(cat "$src/include/vkfuse.h" "$src/include/vkfuse_function.h" "$src/include/vkfuse_kernel.h" "$src/include/vkfuse_profile.h" "$src/include/vkfuse_saved.h" | grep -oE '^VF_API[^(]*\bvf_[a-z0-9_]+\(' | grep -oE 'vf_[a-z0-9_]+\($' | tr -d '(' | sort -u)
[ -n "$api" ] || { echo "api_lock_test: no VF_API functions found in $src/include/vkfuse.h"; exit 1; }

# "<name> locked|unlocked" for every function defined in src/, including
# those a macro defines (BINARY(vf_add, ...)): then the macro's body counts.
defs=$(find "$src/src" -name '*.c' -print0 | xargs -0 awk '
  in_macro { if ($0 ~ /VF_LOCKED\(/) mlock = 1
             if ($0 !~ /\\$/) { macro_locked[macro] = mlock; in_macro = 0 }
             next }
  /^#define [A-Z_]+\(/ { macro = $2; sub(/\(.*/, "", macro); mlock = ($0 ~ /VF_LOCKED\(/)
                         if ($0 ~ /\\$/) in_macro = 1; else macro_locked[macro] = mlock
                         next }
  in_fn { if ($0 ~ /VF_LOCKED\(/) lock = 1
          if ($0 ~ /^}/) { print name, (lock ? "locked" : "unlocked"); in_fn = 0 }
          next }
  /^[A-Z_]+\(vf_[a-z0-9_]+,/ { m = $0; sub(/\(.*/, "", m); f = $0; sub(/^[A-Z_]+\(/, "", f); sub(/,.*/, "", f)
                               print f, (macro_locked[m] ? "locked" : "unlocked"); next }
  /^(static|typedef|extern|#)/ { next }
  /^[A-Za-z_][A-Za-z0-9_ *]*[ *]vf_[a-z0-9_]+\(/ && $0 !~ /;[ \t]*$/ {
      match($0, /[ *]vf_[a-z0-9_]+\(/); name = substr($0, RSTART + 1, RLENGTH - 2)
      lock = ($0 ~ /VF_LOCKED\(/)
      if ($0 ~ /\{.*\}[ \t]*$/) print name, (lock ? "locked" : "unlocked")
      else in_fn = 1
  }')

declare -A state_of=()
while read -r name state; do
  [ -z "${state_of[$name]:-}" ] && state_of[$name]=$state
done <<<"$defs"

bad=0
for f in $api; do
  state=${state_of[$f]:-}
  if [ -n "${exempt[$f]:-}" ]; then
    if [ "$f" = vf_context_create ] || [ "$f" = vf_context_destroy ]; then
      grep -q 'vf_ctx_lock(ctx)' "$src/src/api/context.c" || { echo "$f: no vf_ctx_lock in context.c"; bad=1; }
    fi
    continue
  fi
  case "$state" in
    locked) ;;
    unlocked) echo "$f: no VF_LOCKED(...) in its definition: add it as the first statement (src/api/lock.h)"; bad=1 ;;
    *) echo "$f: declared VF_API but no definition found in $src/src"; bad=1 ;;
  esac
done
n=$(wc -w <<<"$api")
[ "$bad" = 0 ] && echo "api_lock_test: all $n VF_API functions take the context lock or need none"
exit "$bad"
