#include "common/util/env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "common/util/error.h"

namespace torus {
namespace {

TEST(Env, ReadsIntegersAndFallsBack) {
  ::setenv("TORUS_TEST_INT", "42", 1);
  EXPECT_EQ(env::get_int_or("TORUS_TEST_INT", 7), 42);
  ::unsetenv("TORUS_TEST_INT");
  EXPECT_EQ(env::get_int_or("TORUS_TEST_INT", 7), 7);
}

TEST(Env, RejectsGarbageNamingTheVariable) {
  ::setenv("TORUS_TEST_INT", "12abc", 1);
  try {
    env::get_int_or("TORUS_TEST_INT", 0);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("TORUS_TEST_INT"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("12abc"), std::string::npos);
  }
  ::unsetenv("TORUS_TEST_INT");
}

TEST(Env, AvailableCpusIsPositiveAndBounded) {
  const int n = env::available_cpus();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, 4096);
}

}  // namespace
}  // namespace torus
