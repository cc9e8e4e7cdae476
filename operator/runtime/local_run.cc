#include "operator/runtime/local_run.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/api/codec.h"
#include "common/api/defaults.h"
#include "common/api/field_scope.h"
#include "common/api/resolve.h"
#include "common/api/validation.h"
#include "common/api/yaml.h"
#include "common/launch/checkpoint_layout.h"
#include "common/launch/rank_env.h"
#include "common/process/interrupt_fd.h"
#include "common/process/worker_events.h"
#include "common/util/env.h"
#include "common/util/error.h"
#include "common/util/random.h"
#include "common/util/tunables.h"
#include "operator/runtime/run_console.h"
#include "operator/runtime/run_report.h"

namespace torus::runtime {
namespace fs = std::filesystem;
namespace {

// ---- --set ---------------------------------------------------------------------------------------------

struct PathToken {
  std::string key;  // object key, or empty for an index
  std::optional<size_t> index;
};

std::optional<std::vector<PathToken>> parse_path(const std::string& path) {
  std::vector<PathToken> out;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '[') {
      const size_t close = path.find(']', i);
      if (close == std::string::npos || close == i + 1) return std::nullopt;
      const std::string digits = path.substr(i + 1, close - i - 1);
      if (digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
      out.push_back({"", std::stoul(digits)});
      i = close + 1;
      if (i < path.size() && path[i] == '.') ++i;
      continue;
    }
    const size_t end = path.find_first_of(".[", i);
    const std::string key = path.substr(i, end == std::string::npos ? std::string::npos : end - i);
    if (key.empty()) return std::nullopt;
    out.push_back({key, std::nullopt});
    if (end == std::string::npos) break;
    i = path[end] == '.' ? end + 1 : end;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

// ---- ports, secrets, binaries --------------------------------------------------------------------------

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno("socket for a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw_errno("binding 127.0.0.1:0 for a free port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string worker_binary(const LocalRunOptions& options) {
  if (!options.worker_binary.empty()) return options.worker_binary;
  if (auto path = tunables::process_snapshot().text("TORUS_WORKER_BINARY")) return *path;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const fs::path sibling = self.parent_path() / "torus-worker";
  if (!ec && fs::exists(sibling)) return sibling.string();
  throw InvalidArgument("cannot find torus-worker next to " + self.string() + "; build it or set TORUS_WORKER_BINARY");
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

// ---- where the rank logs go ----------------------------------------------------------------------------------

// --log-dir, or a fresh directory per run under the temp directory, named for the job and the time it started (kept
// when the run ends: the logs are what a person reads after a failure).
std::string log_dir_for(const LocalRunOptions& options, const api::TrainingJob& job) {
  if (!options.log_dir.empty()) return options.log_dir;
  const fs::path root = fs::temp_directory_path() / "torus-logs";
  std::error_code ec;
  fs::create_directories(root, ec);
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &local);
  std::string dir = (root / (job.metadata.name + "-" + stamp + "-XXXXXX")).string();
  if (::mkdtemp(dir.data()) == nullptr) throw_errno("creating a log directory under " + root.string());
  return dir;
}

ConsoleOptions console_options(const LocalRunOptions& options) {
  ConsoleOptions c;
  c.all_ranks = options.verbosity == Verbosity::kAllRanks;
  c.terminal = ::isatty(STDERR_FILENO) == 1;
  winsize size{};
  if (c.terminal && ::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0) c.columns = size.ws_col;
  return c;
}

// A private directory holding the resolved job file the workers read (the local analogue of the operator's
// ConfigMap); removed when the run ends.
class RunDir {
 public:
  explicit RunDir(const api::TrainingJob& job) {
    std::string dir = (fs::temp_directory_path() / ("torus-run-" + job.metadata.name + "-XXXXXX")).string();
    if (::mkdtemp(dir.data()) == nullptr)
      throw_errno("creating a run directory under " + fs::temp_directory_path().string());
    dir_ = dir;
    job_file_ = (dir_ / "job.yaml").string();
    std::ofstream out(job_file_);
    out << api::to_yaml(job);
    if (!out) throw SystemError("cannot write " + job_file_);
  }
  ~RunDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  const std::string& job_file() const { return job_file_; }

 private:
  fs::path dir_;
  std::string job_file_;
};

// runPolicy.suspend: true: the job exists but must not run, as the operator keeps it without pods.
int say_suspended(const api::TrainingJob& job) {
  std::fprintf(stderr,
               "torus run: job %s is suspended (spec.runPolicy.suspend: true): nothing started; "
               "run it with --set spec.runPolicy.suspend=false\n",
               job.metadata.name.c_str());
  std::printf("RESULT phase=Suspended restarts=0\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace

std::string new_local_run_id() {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &local);
  return std::string(stamp) + "-" + random_hex(2);
}

launch::RankEnv torus_run_rank_env(const api::TrainingJob& job, int rank, int attempt, const LocalGang& gang) {
  launch::RankEnv e;
  e.job_name = job.metadata.name;
  e.ns = job.metadata.namespace_.empty() ? "local" : job.metadata.namespace_;
  e.attempt = attempt;
  e.world_size = api::world_size(job.spec);
  e.job_file = gang.job_file;
  e.run_id = gang.run_id;
  e.master_addr = "127.0.0.1";
  e.master_port = gang.master_port;
  e.secret = gang.secret;
  // One host: every rank is a local rank of node 0 (on a GPU machine, LOCAL_RANK picks the rank's device).
  e.rank = rank;
  e.local_rank = rank;
  e.local_world_size = e.world_size;
  e.node_rank = 0;
  e.node_name = gang.node_name;
  e.bind_address = "127.0.0.1";
  e.metrics_port = 0;  // any free port: the started event says which
  return e;
}

void apply_set(nlohmann::json& document, const std::string& assignment, api::FieldErrors& errors,
               api::SourceMap* sources) {
  const std::string where = "--set " + assignment;
  const auto eq = assignment.find('=');
  if (eq == std::string::npos) {
    errors.push_back({"", where + ": expected path=value, e.g. spec.training.epochs=3"});
    return;
  }
  const auto tokens = parse_path(assignment.substr(0, eq));
  if (!tokens) {
    errors.push_back({"", where + ": malformed path; expected dotted keys with [i] indices"});
    return;
  }
  api::FieldErrors value_errors;
  nlohmann::json value = api::parse_yaml_document(assignment.substr(eq + 1), value_errors);
  for (const auto& e : value_errors) errors.push_back({"", where + ": value: " + e.message});
  if (!value_errors.empty()) return;
  nlohmann::json* node = &document;
  for (const auto& t : *tokens) {
    if (t.index) {
      if (!node->is_array() || *t.index >= node->size()) {
        errors.push_back({"", where + ": no list element [" + std::to_string(*t.index) + "] there"});
        return;
      }
      node = &(*node)[*t.index];
    } else {
      if (node->is_null()) *node = nlohmann::json::object();
      if (!node->is_object()) {
        errors.push_back({"", where + ": '" + t.key + "' is inside a value that is not a map"});
        return;
      }
      node = &(*node)[t.key];
    }
  }
  *node = std::move(value);
  if (sources) {
    std::string path;
    for (const auto& t : *tokens)
      path += t.index ? "[" + std::to_string(*t.index) + "]" : (path.empty() ? "" : ".") + t.key;
    sources->override_with(path, "--set " + path);
  }
}

LoadedJob load_local_job(const LocalRunOptions& options) {
  LoadedJob out;
  std::ifstream in(options.job_file);
  if (!in) {
    out.errors.push_back({"", "cannot read " + options.job_file + ": " + std::strerror(errno)});
    return out;
  }
  std::stringstream text;
  text << in.rdbuf();
  api::SourceMap sources;
  nlohmann::json document = api::parse_yaml_document(text.str(), out.errors, &sources);
  sources.locate(out.errors);
  if (!out.errors.empty()) return out;
  for (const auto& s : options.sets) apply_set(document, s, out.errors, &sources);
  if (options.workers) {
    if (*options.workers < 1) {
      out.errors.push_back({"", "--workers: must be at least 1, got " + std::to_string(*options.workers)});
    } else {
      document["spec"]["gang"]["workers"] = *options.workers;
      sources.override_with("spec.gang.workers", "--workers");
    }
  }
  if (options.resume == Resume::kLatest) {
    document["spec"]["training"]["checkpoint"]["resumeFrom"] = std::string(launch::kResumeLatest);
    sources.override_with("spec.training.checkpoint.resumeFrom", "--resume");
  }
  api::Decoded decoded = api::decode_json(document);
  decoded.sources = std::move(sources);
  const api::FieldErrors found = api::check_decoded(decoded);
  out.errors.insert(out.errors.end(), found.begin(), found.end());
  // Another controller (e.g. Kueue's MultiKueue) runs a job it manages; running it here too would train it twice.
  const std::string& managed_by = decoded.job.spec.run_policy.managed_by;
  if (!managed_by.empty() && managed_by != api::kDefaultManagedBy) {
    out.errors.push_back({"spec.runPolicy.managedBy",
                          "names another controller (" + managed_by + "), which runs this job; torus run runs jobs " +
                              "managed by " + std::string(api::kDefaultManagedBy) + " (or unset): --set " +
                              "spec.runPolicy.managedBy=" + std::string(api::kDefaultManagedBy) + " to run it here"});
  }
  out.not_applied = api::operator_only_fields_set(document);
  if (out.errors.empty()) out.job = api::with_defaults(decoded.job);
  return out;
}

int run_local(const LocalRunOptions& options) {
  const LoadedJob loaded = load_local_job(options);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.to_string(options.job_file).c_str());
    return 1;
  }
  const api::TrainingJob& job = loaded.job;
  if (!loaded.not_applied.empty()) {
    std::string fields;
    for (const std::string& f : loaded.not_applied) fields += (fields.empty() ? "" : ", ") + f;
    std::fprintf(stderr, "torus run: not applied here (the operator applies them to pods): %s\n", fields.c_str());
  }
  if (job.spec.run_policy.suspend.value_or(false)) return say_suspended(job);
  const int world = api::world_size(job.spec);
  const RunDir run_dir(job);
  const std::string& job_path = run_dir.job_file();
  const std::string binary = worker_binary(options);
  const std::string secret = random_secret();
  const std::string node = host_name();
  const std::string run_id = new_local_run_id();
  std::map<int, int> master_port_of_attempt;

  GangLaunch launch;
  launch.world_size = world;
  launch.policy = controller::gang_policy_of(job.spec);
  launch.make_rank = [&](int rank, int attempt) {
    if (!master_port_of_attempt.count(attempt)) master_port_of_attempt[attempt] = free_local_port();
    process::ProcessSpec spec;
    spec.name = "rank " + std::to_string(rank);
    spec.argv = {binary};
    spec.env = launch::to_process_env(
        torus_run_rank_env(job, rank, attempt, {job_path, node, master_port_of_attempt[attempt], secret, run_id}));
    spec.env["TORUS_LOG_LEVEL"] = tunables::process_snapshot().text("TORUS_LOG_LEVEL").value_or("info");
    // Several ranks share this machine's cores: OpenMP threads that spin while waiting steal them.
    spec.env["OMP_WAIT_POLICY"] = env::get_or("OMP_WAIT_POLICY", "passive");
    return spec;
  };
  process::InterruptFd interrupt;
  launch.interrupt_fd = interrupt.fd();

  RankLogs logs(log_dir_for(options, job), world);
  Console console(console_options(options), logs);
  console.say("torus run: job " + job.metadata.name + ", run " + run_id + ", " + std::to_string(world) +
              " rank(s), worker " + binary);
  for (const std::string& line : log_path_lines(logs.dir(), world, options.verbosity == Verbosity::kAllRanks))
    console.say(line);
  const auto t0 = std::chrono::steady_clock::now();
  const GangOutcome outcome = run_local_gang(launch, console);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  console.finish();
  const auto lines = console.report().summary(outcome, wall);
  for (size_t i = 0; i + 1 < lines.size(); ++i) std::fprintf(stderr, "%s\n", lines[i].c_str());
  std::printf("%s\n", lines.back().c_str());
  std::fflush(stdout);
  if (outcome.phase == api::Phase::kSucceeded) return 0;
  if (outcome.phase == api::Phase::kSuspended) return 130;
  return 1;  // kFailed
}

}  // namespace torus::runtime
