// torus-worker --job FILE: one rank of a TrainingJob (the rank environment says which; alone without peers), on the
// backend its device names (the CPU engine, or the GPU with NCCL gradients).
#include "common/util/main_guard.h"
#include "worker/app/worker_main.h"

int main(int argc, char** argv) {
  return torus::run_main("torus-worker", [&] {
    namespace app = torus::worker::app;
    return app::run_worker(app::parse_worker_args(argc, argv), app::production_backends());
  });
}
