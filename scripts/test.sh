#!/usr/bin/env bash
# Installs what Torus needs, builds it into build/, and runs the whole test suite in lanes (exit non-zero when any
# lane failed). Every lane runs even after one failed; the last lines say what ran and what did not: each lane with
# its counts and time, every skipped test with its reason, the tests a lane leaves out, the lanes switched off, and
# what the configure step left out. Arguments go to the suite's ctest (e.g. -R Planner).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
torus_results_start
trap torus_summary EXIT
torus_install_packages "${TORUS_PACKAGES[@]}" "${TORUS_TEST_PACKAGES[@]}"
torus_install_pip_packages
torus_install_kube_tools
torus_build
# The suite: build/, every registered test (about 40 minutes on 2 cores).
torus_run_lane suite build/ torus_suite_lane "$@"
# The CPU code's and the operator's unit tests under AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/,
# about 20 minutes). TORUS_SANITIZER_LANE=0 switches it off (a quick local run).
if [ "${TORUS_SANITIZER_LANE:-1}" != 0 ]; then
  torus_run_lane asan build-asan/ torus_sanitizer_lane
else
  torus_lane_off asan TORUS_SANITIZER_LANE=0
fi
# The threaded code of the operator and the worker under ThreadSanitizer (build-tsan/, about 8 minutes).
# TORUS_TSAN_LANE=0 switches it off.
if [ "${TORUS_TSAN_LANE:-1}" != 0 ]; then
  torus_run_lane tsan build-tsan/ torus_tsan_lane
else
  torus_lane_off tsan TORUS_TSAN_LANE=0
fi
# Last, the demo's own build (build-demo/, scripts/demo.sh): a unity build that the suite's build/ does not exercise.
# TORUS_DEMO_LANE=0 switches it off.
if [ "${TORUS_DEMO_LANE:-1}" != 0 ]; then
  torus_run_lane demo build-demo/ torus_demo_lane
else
  torus_lane_off demo TORUS_DEMO_LANE=0
fi
torus_lanes_passed
