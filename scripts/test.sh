#!/usr/bin/env bash
# Installs what Torus needs, builds it into build/, and runs the whole test suite (exit non-zero on any failure).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
torus_install_packages "${TORUS_PACKAGES[@]}" "${TORUS_TEST_PACKAGES[@]}"
torus_install_pip_packages
torus_install_kube_tools
torus_build
cd "$TORUS_BUILD"
# One test at a time: several tests train or time collectives on every core, and timing-sensitive tests
# (deadlines, watchdogs) must not be starved by a neighbour. The suite takes ~15 minutes on 2 cores.
# OMP_WAIT_POLICY=passive: oneDNN's OpenMP threads must not spin while co-located ranks wait for each other.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
ctest --output-on-failure --no-tests=error --timeout 1800 "$@"
# Then the CPU code's unit tests once more under AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/).
# TORUS_SANITIZER_LANE=0 skips it (a quick local run).
if [ "${TORUS_SANITIZER_LANE:-1}" != 0 ]; then
  torus_sanitizer_lane
fi
# Last, the demo's own build (build-demo/, scripts/demo.sh): a unity build that the suite's build/ does not exercise.
# TORUS_DEMO_LANE=0 skips it.
if [ "${TORUS_DEMO_LANE:-1}" != 0 ]; then
  torus_demo_lane
fi
