// merge_objects: lists of named items merge by name, the overlay wins. The objects children.cc builds are checked
// through the planner that asks for them (planner_test.cc).
#include "operator/controller/children.h"

#include <gtest/gtest.h>

namespace torus::controller {
namespace {

TEST(Children, MergeNamedLists) {
  json base = {{"env", {{{"name", "A"}, {"value", "1"}}, {{"name", "B"}, {"value", "2"}}}}};
  json over = {{"env", {{{"name", "B"}, {"value", "3"}}, {{"name", "C"}, {"value", "4"}}}}};
  json m = merge_objects(base, over);
  ASSERT_EQ(m["env"].size(), 3u);
  EXPECT_EQ(m["env"][1]["value"], "3");
  EXPECT_EQ(m["env"][2]["name"], "C");
}

}  // namespace
}  // namespace torus::controller
