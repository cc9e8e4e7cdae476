// `torus`: the command-line front end (validate, run, operator).
#include <cstdio>
#include <string>

#include "common/util/main_guard.h"

int main(int argc, char** argv) {
  return torus::run_main("torus", [&]() -> int {
    if (argc < 2) {
      std::fprintf(stderr, "usage: torus <validate|run|operator> ...\n");
      return 2;
    }
    std::fprintf(stderr, "torus: unknown command '%s'\n", argv[1]);
    return 2;
  });
}
