#!/usr/bin/env bash
# Installs what Torus needs, builds it into build/, and runs the whole test suite (exit non-zero on any failure).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
torus_install_packages
torus_install_pip_packages
torus_build
cd "$TORUS_BUILD"
ctest --output-on-failure --no-tests=error -j "$(nproc)" --timeout 900 "$@"
