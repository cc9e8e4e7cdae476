// torus-worker-pretend-device: torus-worker's own main (worker/app, run_worker) with one dependency replaced, the
// backend factory. A `gang.device: gpu` rank gets the pretend device (tests/worker/pretend_device_backend.h: device
// memory, batch staging) over the recording backend (half activations and the GPU's loss-scaling state machine, no
// arithmetic), so that a machine without a GPU runs a device job end to end: `torus run` (TORUS_WORKER_BINARY),
// validation, rendezvous, the trainer's precision plan, telemetry. A `cpu` rank gets the real CPU engine, as in
// torus-worker. The pretend device's memory is host memory underneath, so its gradients are averaged by the host
// reducer where a GPU's go through NCCL.
#include <memory>

#include "common/util/main_guard.h"
#include "tests/worker/pretend_device_backend.h"
#include "tests/worker/recording_backend.h"
#include "worker/app/worker_main.h"

int main(int argc, char** argv) {
  namespace app = torus::worker::app;
  using torus::worker::Backend;
  using torus::worker::testing::PretendDeviceBackend;
  using torus::worker::testing::RecordingBackend;
  return torus::run_main("torus-worker-pretend-device", [&] {
    app::BackendFactory backends;
    backends.make_backend = [](const app::RunOptions& run) -> std::unique_ptr<Backend> {
      if (run.engine.device == torus::api::Device::kCpu) return app::make_backend(run);
      return std::make_unique<PretendDeviceBackend>(torus::worker::TrainingOffers{.staging = true},
                                                    std::make_unique<RecordingBackend>());
    };
    backends.device_gradients = [](torus::comm::World& world, Backend&, const app::RunOptions& run, const auto&) {
      return app::host_gradient_path(world, run);
    };
    return app::run_worker(app::parse_worker_args(argc, argv), backends);
  });
}
