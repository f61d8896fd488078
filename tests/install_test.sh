#!/usr/bin/env bash
# Installs the build into a temporary prefix, then compiles the README's
# example against it twice — with pkg-config and with find_package — and
# runs both. Usage: install_test.sh BUILD_DIR SOURCE_DIR [EXTRA_CFLAGS]
set -euo pipefail
build=$1 src=$2 extra=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(find "$tmp/prefix" -name vkfuse.pc -printf '%h\n' | head -1)
export PKG_CONFIG_PATH="$libdir"
cc $extra -std=c17 -Wall -Wextra -Werror "$src/examples/readme.c" $(pkg-config --cflags --libs vkfuse) \
   -Wl,-rpath,"$(dirname "$libdir")" -o "$tmp/app_pc"
VKFUSE_BACKEND=cpu "$tmp/app_pc"
"$tmp/app_pc"
# static linking through pkg-config --static
cc $extra -std=c17 "$src/examples/readme.c" $(pkg-config --cflags vkfuse) "$(dirname "$libdir")/libvkfuse.a" \
   $(pkg-config --libs-only-l --libs-only-other --static vkfuse | sed 's/-lvkfuse//') -o "$tmp/app_static"
VKFUSE_BACKEND=cpu "$tmp/app_static"
# vkfuse_dist (when built): its pkg-config file compiles and links examples/mlp_dist.c
if [ -f "$libdir/vkfuse_dist.pc" ]; then
    cc $extra -std=c17 -Wall -Wextra -Werror "$src/examples/mlp_dist.c" $(pkg-config --cflags --libs vkfuse_dist) -lm \
       -Wl,-rpath,"$(dirname "$libdir")" -o "$tmp/app_dist"
    inc=$(pkg-config --cflags-only-I vkfuse_dist | tr ' ' '\n' | sed -n 's/^-I//p' | head -1)
    [ -f "$inc/vkfuse_dist.h" ] ||
        { echo "install test: vkfuse_dist.pc's first include dir has no vkfuse_dist.h: $(pkg-config --cflags vkfuse_dist)"; exit 1; }
fi
mkdir "$tmp/proj"
cat > "$tmp/proj/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(app C)
find_package(vkfuse REQUIRED)
add_executable(app $src/examples/readme.c)
target_link_libraries(app PRIVATE vkfuse::vkfuse)
CM
cmake -S "$tmp/proj" -B "$tmp/proj/build" -G Ninja -DCMAKE_C_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/proj/build" >/dev/null
VKFUSE_BACKEND=cpu "$tmp/proj/build/app"
echo "install test: pkg-config (shared, static) and find_package builds ran"
