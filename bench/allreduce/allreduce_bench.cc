// All-reduce bus bandwidth of Torus' algorithms on this machine: forks `--world` ranks (rank 0 serves the store, as
// in production), each builds its World with simulated nodes of `--per-node` ranks, and rank 0 prints one line per
// (algorithm, size):  allreduce algo=<a> world=<n> nodes=<k> bytes=<b> time_us=<t> algbw_gbps=<x> busbw_gbps=<y>
// cpu_us=<c>, where c is rank 0's CPU time (user + sys, all its threads) per all-reduce: on a machine shared with
// other work the wall time mostly measures the scheduler, the CPU time what the algorithm itself costs.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/log/log.h"
#include "common/util/error.h"
#include "common/util/main_guard.h"
#include "worker/comm/socket.h"
#include "worker/comm/world.h"

namespace {

using namespace torus::comm;

struct Args {
  int world = 2;
  int per_node = 2;
  std::vector<std::string> algorithms = {"auto", "ring", "hierarchical", "torus2d"};
  size_t min_bytes = 4096;
  size_t max_bytes = 256u << 20;
  int size_step = 4;  // multiply the size by this between rows
  double seconds_per_point = 0.5;
};

AllReduceAlgorithm parse_algorithm(const std::string& name) {
  if (auto a = torus::api::parse_enum<AllReduceAlgorithm>(name)) return *a;
  throw torus::InvalidArgument("--algorithms: expected one of " + torus::api::enum_choices<AllReduceAlgorithm>() +
                               "; got '" + name + "'");
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--world")
      a.world = std::stoi(v);
    else if (k == "--per-node")
      a.per_node = std::stoi(v);
    else if (k == "--algorithms")
      a.algorithms = split_commas(v);
    else if (k == "--min-bytes")
      a.min_bytes = std::stoull(v);
    else if (k == "--max-bytes")
      a.max_bytes = std::stoull(v);
    else if (k == "--size-step")
      a.size_step = std::stoi(v);
    else if (k == "--seconds-per-point")
      a.seconds_per_point = std::stod(v);
    else
      throw torus::InvalidArgument("unknown flag " + k);
  }
  if (a.world < 1 || a.per_node < 1 || a.world % a.per_node != 0)
    throw torus::InvalidArgument("--per-node must divide --world");
  return a;
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

struct Point {
  double seconds = 0;      // wall, the slowest rank
  double cpu_seconds = 0;  // this rank's CPU time
};

Point run_point(World& w, AllReduceAlgorithm a, std::vector<float>& buf, double budget_s) {
  auto once = [&] { w.comm().all_reduce_with(a, view_of(std::span<float>(buf)), ReduceOp::kSum); };
  once();  // warm-up: creates the sub-communicators and touches the buffers
  // Every rank must run the same number of iterations: rank 0 decides from the warm-up time and broadcasts.
  std::vector<double> iters = {0};
  w.comm().barrier_now();
  auto t0 = std::chrono::steady_clock::now();
  once();
  const double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  iters[0] = std::max(2.0, std::min(200.0, budget_s / std::max(one, 1e-6)));
  w.comm().broadcast_now(view_of(std::span<double>(iters)), 0);
  w.comm().barrier_now();
  const double cpu0 = cpu_seconds();
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < static_cast<int>(iters[0]); ++i) once();
  std::vector<double> elapsed = {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  const double cpu = cpu_seconds() - cpu0;
  w.comm().all_reduce_now(view_of(std::span<double>(elapsed)), ReduceOp::kMax);  // the slowest rank's time
  return {elapsed[0] / static_cast<int>(iters[0]), cpu / static_cast<int>(iters[0])};
}

int run_rank(const Args& args, int rank, int port) {
  RankEnv env;
  env.master_port = port;
  env.world_size = args.world;
  env.rank = rank;
  env.local_world_size = args.per_node;
  env.local_rank = rank % args.per_node;
  env.node_rank = rank / args.per_node;
  // Simulated nodes share this host; only ranks of one simulated node share memory.
  env.node_name = "bench-node" + std::to_string(env.node_rank);
  env.job_name = "allreduce-bench";
  env.secret = "bench";
  WorldOptions options = WorldOptions::from_tunables();
  // A developer's timeout for the bench (the worker takes it from the job's spec.allReduce.timeoutSeconds).
  if (auto ms = torus::tunables::process_snapshot().integer("TORUS_COMM_TIMEOUT_MS")) options.timeout = milliseconds(*ms);
  auto world = make_world(env, options);
  for (const std::string& name : args.algorithms) {
    const AllReduceAlgorithm a = parse_algorithm(name);
    if (a != AllReduceAlgorithm::kAuto && !world->comm().planner().applicable(a)) continue;
    for (size_t bytes = args.min_bytes; bytes <= args.max_bytes; bytes *= static_cast<size_t>(args.size_step)) {
      std::vector<float> data(bytes / sizeof(float), 1.0f);
      const Point p = run_point(*world, a, data, args.seconds_per_point);
      const double t = p.seconds;
      if (rank == 0) {
        const std::string shown = a == AllReduceAlgorithm::kAuto ? "auto:" + world->comm().algorithm_for(bytes) : name;
        std::printf(
            "allreduce algo=%s world=%d nodes=%d bytes=%zu time_us=%.1f algbw_gbps=%.3f busbw_gbps=%.3f "
            "cpu_us=%.1f\n",
            shown.c_str(), args.world, args.world / args.per_node, bytes, t * 1e6, bytes / t / 1e9,
            bus_bandwidth(bytes, t, args.world) / 1e9, p.cpu_seconds * 1e6);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return torus::run_main("torus_allreduce_bench", [&] {
    const Args args = parse(argc, argv);
    int port = 0;
    {
      torus::comm::Fd probe = torus::comm::listen_tcp("127.0.0.1", 0);
      port = torus::comm::bound_port(probe);
    }
    std::vector<pid_t> children;
    for (int r = 0; r < args.world; ++r) {
      pid_t pid = ::fork();  // before any thread exists in this process
      if (pid < 0) torus::throw_errno("fork");
      if (pid == 0) {
        torus::log::set_tag("rank " + std::to_string(r));
        std::_Exit(torus::run_main("torus_allreduce_bench", [&] { return run_rank(args, r, port); }));
      }
      children.push_back(pid);
    }
    int failures = 0;
    for (pid_t pid : children) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
    }
    if (failures > 0) throw torus::Error(std::to_string(failures) + " bench ranks failed");
    return 0;
  });
}
