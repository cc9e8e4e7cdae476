#!/usr/bin/env bash
# Installs what Torus needs, builds it into build/, and runs the main job: Fashion-MNIST, data-parallel, 2 local workers.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
torus_install_packages
torus_build torus torus-worker
# A fresh run each time: checkpoints go under build/, cleared first (a second `torus run` of the same file would
# otherwise resume the finished run from its last checkpoint).
CHECKPOINTS="$TORUS_BUILD/demo-checkpoints"
rm -rf "$CHECKPOINTS"
exec "$TORUS_BUILD/bin/torus" run "$TORUS_ROOT/examples/fashion-mnist.yaml" --workers 2 \
  --set "spec.training.checkpoint.dir=$CHECKPOINTS" "$@"
