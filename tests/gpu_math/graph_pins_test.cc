// worker/backend/cuda/graph_pins.h on the CPU, with host memory: a buffer a captured graph uses survives its
// replacement (until the pins go), one no graph uses is freed at once.
#include "worker/backend/cuda/graph_pins.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace torus::worker::cuda {
namespace {

int g_freed = 0;
void counting_free(void* p) noexcept {
  ++g_freed;
  std::free(p);
}

Buffer host_buffer(size_t bytes) { return Buffer(std::malloc(bytes), bytes, &counting_free); }

TEST(GraphPins, AnUnpinnedBufferIsFreedWhenReplaced) {
  g_freed = 0;
  GraphPins pins;
  Buffer slot = host_buffer(64);
  pins.replace(slot, host_buffer(128));
  EXPECT_EQ(g_freed, 1);
  EXPECT_EQ(slot.bytes(), 128u);
  EXPECT_EQ(pins.retained_bytes(), 0u);
}

TEST(GraphPins, APinnedBufferOutlivesItsReplacementUntilThePinsGo) {
  g_freed = 0;
  Buffer slot = host_buffer(64);
  {
    GraphPins pins;
    pins.pin(slot.data());
    const void* captured = slot.data();
    pins.replace(slot, host_buffer(128));
    EXPECT_EQ(g_freed, 0) << "the graph's buffer went back while the graph may replay";
    EXPECT_NE(slot.data(), captured);
    EXPECT_EQ(pins.retained_bytes(), 64u);
    // The replacement was not captured: growing it again frees it.
    pins.replace(slot, host_buffer(256));
    EXPECT_EQ(g_freed, 1);
    EXPECT_EQ(pins.retained_bytes(), 64u);
  }
  EXPECT_EQ(g_freed, 2);  // the retained buffer, with the pins
}

TEST(GraphPins, PinningNothingOrAnEmptySlotIsHarmless) {
  g_freed = 0;
  GraphPins pins;
  pins.pin(nullptr);
  Buffer empty;
  pins.replace(empty, host_buffer(32));
  EXPECT_EQ(pins.retained_bytes(), 0u);
  EXPECT_EQ(g_freed, 0);
}

}  // namespace
}  // namespace torus::worker::cuda
