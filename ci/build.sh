#!/usr/bin/env bash
# Configures and builds kiln into a build directory.
# Usage: bash ci/build.sh [DIR] [extra cmake flags...]   (DIR defaults to build)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
cmake --build "$dir"
