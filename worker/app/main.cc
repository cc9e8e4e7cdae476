// torus-worker --job FILE: one rank of a TrainingJob (the rank environment says which; alone without peers).
#include "common/util/main_guard.h"
#include "worker/app/worker_main.h"

int main(int argc, char** argv) {
  return torus::run_main("torus-worker", [&] {
    return torus::worker::app::run_worker(torus::worker::app::parse_worker_args(argc, argv));
  });
}
