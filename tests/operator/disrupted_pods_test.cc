// What the controller keeps of pods gone with a DisruptionTarget condition (disrupted_pods.h).
#include "operator/controller/disrupted_pods.h"

#include <gtest/gtest.h>

#include "tests/operator/planner_fixtures.h"

namespace torus::controller {
namespace {

using namespace torus::controller::testing;

std::vector<std::string> names(const Objects& pods) {
  std::vector<std::string> out;
  for (const json& p : pods)
    out.push_back(p["metadata"]["name"].get<std::string>() + "@" +
                  p["metadata"]["labels"][std::string(kLabelAttempt)].get<std::string>());
  return out;
}

TEST(DisruptedPods, KeepsOnlyDisruptedPodsOfTheJobAndOfTheAttemptOrLater) {
  DisruptedPods kept;
  kept.gone("team/mnist", PodBuilder("mnist", 0, 0).owned_by("mnist").running().build());  // no condition
  kept.gone("team/mnist", PodBuilder("mnist", 1, 0).owned_by("mnist").running().disrupted(3).build());
  kept.gone("team/mnist", PodBuilder("mnist", 1, 1).owned_by("mnist").running().disrupted(9).build());
  kept.gone("team/mnist", PodBuilder("mnist", 0, 1).owned_by("other").running().disrupted(9).build());
  EXPECT_EQ(kept.size("team/mnist"), 3u);
  EXPECT_EQ(names(kept.of("team/mnist", "uid-mnist", 0)),
            (std::vector<std::string>{"mnist-worker-1@0", "mnist-worker-1@1"}));
  // Attempt 1's pass forgets attempt 0's pod, and the pod another job of the same name owned.
  EXPECT_EQ(names(kept.of("team/mnist", "uid-mnist", 1)), (std::vector<std::string>{"mnist-worker-1@1"}));
  EXPECT_EQ(kept.size("team/mnist"), 1u);
  EXPECT_TRUE(kept.of("team/other", "uid-other", 0).empty());
  kept.forget("team/mnist");
  EXPECT_EQ(kept.size("team/mnist"), 0u);
}

TEST(DisruptedPods, KeepsTheNewestWithinItsBound) {
  DisruptedPods kept;
  for (size_t i = 0; i < DisruptedPods::kMaxPerJob + 5; ++i) {
    kept.gone("team/mnist", PodBuilder("mnist", static_cast<int>(i), 0).owned_by("mnist").disrupted(1).build());
  }
  const Objects pods = kept.of("team/mnist", "uid-mnist", 0);
  ASSERT_EQ(pods.size(), DisruptedPods::kMaxPerJob);
  EXPECT_EQ((*pods.front())["metadata"]["name"], "mnist-worker-5");
}

}  // namespace
}  // namespace torus::controller
