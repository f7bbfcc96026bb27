#!/usr/bin/env bash
# Installs dependencies, builds, and runs kiln's main job on the bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
bash ci/build.sh build
build/kiln demo
