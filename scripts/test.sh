#!/usr/bin/env bash
# Builds and runs every test twice: a -Werror build with the Khronos
# validation layer on (any validation message fails the test; the Python
# package's pytest suite runs here, on the CPU backend and on lavapipe, as
# ctest's python_* entries: python3 cannot load the sanitized library), then an
# AddressSanitizer + UndefinedBehaviorSanitizer build; the thread tests
# under ThreadSanitizer; then checks that the
# optimised build (the README's first command) compiles warning-free and
# runs the demo. Installs missing packages first. Exit status 0 only if all pass.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
jobs=$(nproc)

echo "== dev build (-Wall -Wextra -Werror), tests with VK_LAYER_KHRONOS_validation"
cmake --preset dev >/dev/null
cmake --build --preset dev -j "$jobs"
ctest --preset dev -j "$jobs"

echo "== asan build (AddressSanitizer + UBSan), tests again"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --preset asan -j "$jobs"

echo "== tsan build (ThreadSanitizer): one context shared by several threads, shaders compiled ahead on threads, the CPU backend's workers"
# Only the thread tests' targets: the stage adds well under a minute.
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs" --target test_threads test_misuse_threads test_vulkan_cache test_cpu_runtime test_plan_tier
ctest --preset tsan -R '^(test_threads|test_misuse_threads|test_vulkan_cache|test_cpu_runtime|test_plan_tier)$'

echo "== release build (-O3 -Werror) and the README's demo command"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
./build/release/tools/vkfuse demo
