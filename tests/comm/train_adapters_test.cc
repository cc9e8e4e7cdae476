// The training loop's hooks over a World (train_adapters.h), two ranks as threads: metrics, broadcasts and barriers
// through Collectives, gradients averaged through GradientSync.
#include "worker/app/train_adapters.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/comm/comm_test_util.h"
#include "worker/comm/store.h"

namespace torus::comm {
namespace {

TEST(TrainAdapters, CollectivesAndGradientSyncServeTheTrainingLoop) {
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  testing::run_ranks(2, [&](int rank) {
    auto world = make_world(testing::sim_env(rank, 1, 2, server.port(), testing::test_name()), testing::test_options());
    worker::app::CommCollectives coll(world->comm());
    worker::train::Collectives& c = coll;
    EXPECT_EQ(c.world_size(), 2);
    std::vector<double> metrics = {1.5 * (rank + 1), 10.0};
    c.all_reduce_sum(metrics);
    EXPECT_EQ(metrics, (std::vector<double>{4.5, 20.0}));
    std::vector<float> weights(5, rank == 0 ? 3.0f : -1.0f);
    c.broadcast(weights, 0);
    EXPECT_EQ(weights, std::vector<float>(5, 3.0f));
    c.barrier();

    std::vector<float> arena(10, static_cast<float>(rank * 2));  // ranks hold 0 and 2: the mean is 1
    worker::app::CommGradientSync sync(world->comm(), arena, {{0, 4}, {4, 6}}, ReducerOptions{});
    worker::train::GradientSync& g = sync;
    g.begin_step();
    g.grad_ready(1);
    g.grad_ready(0);
    g.finish_step();
    EXPECT_EQ(arena, std::vector<float>(10, 1.0f));
  });
}

}  // namespace
}  // namespace torus::comm
