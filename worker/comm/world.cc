#include "worker/comm/world.h"

#include <unistd.h>

#include <csignal>

#include "common/log/log.h"
#include "common/util/error.h"

namespace torus::comm {

namespace {

bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

std::string default_bind_host(const RankEnv& env) {
  if (!env.bind_address.empty()) return env.bind_address;
  return is_loopback(env.master_addr) ? "127.0.0.1" : env.node_name;
}

}  // namespace

WorldOptions WorldOptions::from_tunables(const tunables::Snapshot& env) {
  WorldOptions o;
  o.rendezvous_timeout =
      milliseconds(env.integer("TORUS_RENDEZVOUS_TIMEOUT_MS").value_or(o.rendezvous_timeout.count()));
  o.shared_memory = env.integer("TORUS_SHM").value_or(1) != 0;
  o.shm_slot_bytes =
      static_cast<size_t>(env.integer("TORUS_SHM_SLOT_BYTES").value_or(static_cast<int64_t>(o.shm_slot_bytes)));
  o.bind_host = env.text("TORUS_COMM_BIND_ADDR").value_or("");
  o.cost = CostModel::from_tunables(env);
  return o;
}

World::World(RankEnv env, WorldOptions options) : env_(std::move(env)), options_(std::move(options)) {
  if (options_.timeout.count() <= 0) throw InvalidArgument("world: the collective timeout must be positive");
  // A peer that dies mid-collective must become an error on this rank (reported by the watchdog), not a SIGPIPE
  // that kills it silently: Gloo writes to sockets without MSG_NOSIGNAL.
  ::signal(SIGPIPE, SIG_IGN);
  if (options_.bind_host.empty()) options_.bind_host = default_bind_host(env_);
  if (env_.secret.empty()) {
    TLOG(Warn) << "no TORUS_RENDEZVOUS_SECRET(_FILE): the rendezvous store admits any client of this job's port";
  }
  if (env_.rank == 0 && options_.store_serving == StoreServing::kRankZero)
    server_ = std::make_unique<TcpStoreServer>(env_.bind_address, env_.master_port, env_.secret);
  TcpStoreOptions store_options;
  store_options.host = env_.master_addr;
  store_options.port = env_.master_port;
  store_options.secret = env_.secret;
  store_options.connect_timeout = options_.rendezvous_timeout;
  store_options.request_timeout = options_.timeout;
  store_ = std::make_shared<PrefixStore>(env_.store_prefix(), std::make_shared<TcpStore>(store_options));
  join();
  Topology topology = gather_topology(*store_, env_, options_.rendezvous_timeout);
  Planner planner(std::move(topology), options_.cost, torus_grid(env_.world_size, options_.torus_x),
                  options_.shared_memory);
  if (env_.rank == 0) {
    TLOG(Info) << planner.describe();
  }
  GlooOptions gloo;
  gloo.bind_host = options_.bind_host;
  gloo.timeout = options_.timeout * 2;  // the watchdog (at one timeout) reports a hung peer first
  ShmOptions shm;
  shm.slot_bytes = options_.shm_slot_bytes;
  shm.timeout = options_.timeout * 2;
  comm_ = std::make_unique<TopologyCommunicator>(env_.rank, std::move(planner), store_, gloo, shm, options_.algorithm);
  watchdog_ = std::make_shared<Watchdog>(env_.rank, env_.world_size, store_, options_.on_timeout, options_.timeout);
  comm_->set_watchdog(watchdog_, "world");
}

World::~World() {
  // Leave together: a rank that closes its connections while others are still inside a collective or a split would
  // fail them with "connection closed". Bounded, never throws; rank 0 also keeps serving the store until then.
  try {
    store_->set("exit/" + std::to_string(env_.rank), to_bytes("1"));
    std::vector<std::string> keys;
    for (int r = 0; r < env_.world_size; ++r) keys.push_back("exit/" + std::to_string(r));
    std::vector<std::string> missing = store_->wait(keys, std::min(options_.timeout, milliseconds(10000)));
    if (!missing.empty()) {
      TLOG(Warn) << "world shutdown: " << missing.size() << " ranks did not say goodbye";
    }
  } catch (const std::exception& e) {
    TLOG(Warn) << "world shutdown: " << e.what();
  }
  comm_.reset();
  watchdog_.reset();
}

void World::join() {
  store_->set("join/" + std::to_string(env_.rank), to_bytes(env_.node_name));
  // The rank's host name (a pod's name in Kubernetes): the watchdog names where a rank that never arrived runs.
  store_->set("host/" + std::to_string(env_.rank), to_bytes(own_host_name()));
  std::vector<std::string> keys;
  for (int r = 0; r < env_.world_size; ++r) keys.push_back("join/" + std::to_string(r));
  std::vector<std::string> missing = store_->wait(keys, options_.rendezvous_timeout);
  if (missing.empty()) return;
  std::string ranks;
  for (const auto& k : missing) ranks += (ranks.empty() ? "" : ", ") + k.substr(k.find('/') + 1);
  throw Timeout("rendezvous: ranks " + ranks + " of " + std::to_string(env_.world_size) + " did not join job " +
                env_.job_name + " attempt " + std::to_string(env_.attempt) + " within " +
                std::to_string(options_.rendezvous_timeout.count()) + " ms");
}

std::string own_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

std::unique_ptr<World> make_world(const RankEnv& env, const WorldOptions& options) {
  return std::make_unique<World>(env, options);
}

}  // namespace torus::comm
