#!/usr/bin/env bash
# Installs what the demo needs, builds torus and torus-worker into build-demo/ (torus_build_demo in lib.sh), and runs
# the main job: Fashion-MNIST, data-parallel, 2 local workers.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
torus_install_packages
torus_build_demo
# A fresh run each time: checkpoints go under build-demo/, cleared first (a second `torus run` of the same file would
# otherwise resume the finished run from its last checkpoint).
CHECKPOINTS="$TORUS_BUILD/demo-checkpoints"
rm -rf "$CHECKPOINTS"
exec "$TORUS_BUILD/bin/torus" run "$TORUS_ROOT/examples/fashion-mnist.yaml" --workers 2 \
  --set "spec.training.checkpoint.dir=$CHECKPOINTS" "$@"
