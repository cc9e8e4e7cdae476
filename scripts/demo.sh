#!/usr/bin/env bash
# Installs what Torus needs, builds it into build/, and runs the main job: Fashion-MNIST, data-parallel, 2 local workers.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
torus_install_packages
torus_build
exec "$TORUS_BUILD/bin/torus" run "$TORUS_ROOT/examples/fashion-mnist.yaml" --workers 2 "$@"
