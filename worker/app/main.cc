// torus-worker --job FILE: one rank of a TrainingJob (the rank environment says which; alone without peers).
#include "common/util/main_guard.h"
#include "worker/train/worker_main.h"

int main(int argc, char** argv) {
  return torus::run_main("torus-worker", [&] {
    return torus::worker::train::run_worker(torus::worker::train::parse_worker_args(argc, argv));
  });
}
