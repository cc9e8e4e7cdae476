// worker/comm/store.h: the rendezvous store (TCP server and client, prefixes, waits, secrets, late and absent
// servers).
#include "worker/comm/store.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "common/util/error.h"
#include "tests/support/temp_dir.h"
#include "worker/comm/socket.h"

namespace torus::comm {
namespace {

using std::chrono::milliseconds;

TcpStoreOptions client_of(const TcpStoreServer& server, const std::string& secret) {
  TcpStoreOptions o;
  o.port = server.port();
  o.secret = secret;
  o.connect_timeout = milliseconds(5000);
  o.request_timeout = milliseconds(5000);
  return o;
}

TEST(Store, SetGetAddWaitCheckErase) {
  TcpStoreServer server("127.0.0.1", 0, "k");
  auto base = std::make_shared<TcpStore>(client_of(server, "k"));
  PrefixStore store("job/0", base);
  store.set("a", to_bytes("1"));
  EXPECT_EQ(to_string(store.get("a", milliseconds(100))), "1");
  EXPECT_EQ(to_string(base->get("job/0/a", milliseconds(100))), "1");
  EXPECT_EQ(store.add("n", 2), 2);
  EXPECT_EQ(store.add("n", 3), 5);
  EXPECT_EQ(store.check({"a", "b"}), (std::vector<bool>{true, false}));
  EXPECT_EQ(store.wait({"a", "b"}, milliseconds(50)), (std::vector<std::string>{"b"}));
  EXPECT_THROW(store.get("b", milliseconds(50)), Timeout);
  EXPECT_TRUE(store.erase("a"));
  EXPECT_FALSE(store.erase("a"));
  PrefixStore next_attempt("job/1", base);  // a restarted gang does not see the old keys
  EXPECT_EQ(next_attempt.check({"n"}), (std::vector<bool>{false}));
}

TEST(Store, WaitWakesWhenAnotherClientSets) {
  TcpStoreServer server("127.0.0.1", 0, "k");
  TcpStore a(client_of(server, "k"));
  TcpStore b(client_of(server, "k"));
  std::thread setter([&] { b.set("late", to_bytes("x")); });
  EXPECT_EQ(to_string(a.get("late", milliseconds(5000))), "x");
  setter.join();
}

TEST(Store, WrongSecretIsRefusedAndCounted) {
  TcpStoreServer server("127.0.0.1", 0, "right");
  try {
    TcpStore intruder(client_of(server, "wrong"));
    FAIL() << "a client with the wrong secret was admitted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
  }
  EXPECT_EQ(server.refused_clients(), 1);
  TcpStore friendly(client_of(server, "right"));
  friendly.set("ok", to_bytes("1"));
}

// Rank 0 comes up late: until it does, its port is held by a listener that is not a store yet (it accepts and hangs
// up, as a port whose server is still starting does); the client retries it, and rank 0 takes the port only after
// the client has been turned away twice. No clock decides "late": the client's own attempts do.
TEST(Store, LateServerIsWaitedFor) {
  Fd not_yet = listen_tcp("127.0.0.1", 0);
  const int port = bound_port(not_yet);
  TcpStoreOptions o;
  o.port = port;
  o.secret = "k";
  o.connect_timeout = milliseconds(60000);
  auto client = std::async(std::launch::async, [&] {
    TcpStore store(o);
    store.set("x", to_bytes("1"));
    return to_string(store.get("x", milliseconds(5000)));
  });
  for (int turned_away = 0; turned_away < 2;) {
    // A client that gave up ends the test (its exception is the failure), rather than an accept that never returns.
    if (client.wait_for(milliseconds(0)) == std::future_status::ready) break;
    pollfd p{not_yet.get(), POLLIN, 0};
    if (::poll(&p, 1, 100) == 1) {
      Fd conn(::accept4(not_yet.get(), nullptr, nullptr, SOCK_CLOEXEC));  // and hung up at once
      ASSERT_TRUE(conn.valid()) << std::strerror(errno);
      ++turned_away;
    }
  }
  not_yet = Fd();  // closed: the port is free for rank 0 (connections meanwhile are refused, and retried)
  TcpStoreServer server("127.0.0.1", port, "k");
  EXPECT_EQ(client.get(), "1");
}

TEST(Store, UnreachableServerTimesOutNamingTheAddress) {
  int port = 0;
  {
    Fd probe = listen_tcp("127.0.0.1", 0);
    port = bound_port(probe);
  }
  TcpStoreOptions o;
  o.port = port;
  o.connect_timeout = milliseconds(200);
  try {
    TcpStore client(o);
    FAIL();
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos) << e.what();
  }
}

// A rank that leaves after rank 0 (its goodbye needs a new connection when its pooled one was lost) gives up after
// reconnect_timeout, not after the minutes of connect_timeout meant for a rank 0 that is still starting.
TEST(Store, AConnectionAfterRankZeroLeftFailsWithinTheReconnectTimeout) {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0, "k");
  TcpStoreOptions o = client_of(*server, "k");
  o.connect_timeout = milliseconds(120000);
  o.reconnect_timeout = milliseconds(300);
  TcpStore client(o);
  client.set("before", to_bytes("1"));
  server.reset();
  EXPECT_THROW(client.set("lost", to_bytes("1")), Error) << "the pooled connection is closed";
  const auto start = std::chrono::steady_clock::now();
  try {
    client.set("after", to_bytes("1"));
    FAIL() << "a store whose server is gone answered";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("no longer reachable within 300 ms"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(60000)) << "it waited out connect_timeout";
}

// In the child of a fork: 0 when a second connection reaches the store after its host name stopped resolving, else
// a code naming what failed. The name lives in a private /etc/hosts (a mount namespace of the child's own), as a
// pod's Service record does in the stand-in's pods; the "record" is removed as a deleted job's Service is.
int second_connection_after_the_name_is_gone(const std::string& hosts) {
  if (::unshare(CLONE_NEWNS) != 0) return 10;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 11;
  if (::mount(hosts.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) != 0) return 12;
  try {
    TcpStoreServer server("127.0.0.1", 0, "k");
    TcpStoreOptions o = client_of(server, "k");
    o.host = "rank-zero.torus.test";
    o.reconnect_timeout = milliseconds(1000);
    TcpStore client(o);
    std::ofstream(hosts, std::ios::trunc) << "# the job's Service is gone\n";
    try {
      connect_tcp(o.host, server.port(), std::chrono::steady_clock::now() + milliseconds(1000));
      return 13;  // the name still resolves: the test would prove nothing
    } catch (const Error&) {
    }
    // While a wait holds the pooled connection, a set needs a second one. Which call takes the pooled connection is
    // up to the threads: a round where the set took it opened none, and the next round yields longer to the wait.
    for (int round = 1; server.admitted_clients() < 2; ++round) {
      if (round > 20) return 16;
      const std::string key = "x" + std::to_string(round);
      auto waiting = std::async(std::launch::async, [&] { return client.wait({key}, milliseconds(5000)); });
      std::this_thread::sleep_for(milliseconds(10 * round));
      client.set(key, to_bytes("1"));
      if (!waiting.get().empty()) return 14;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 15;
  }
}

TEST(Store, LaterConnectionsGoToTheAddressTheNameFirstResolvedTo) {
  test::TempDir dir("torus-store-hosts");
  const std::string hosts = (dir.path() / "hosts").string();
  std::ofstream(hosts) << "127.0.0.1 rank-zero.torus.test\n";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(60);  // a child stuck anywhere ends (SIGALRM) and fails the test instead of holding it
    ::_exit(second_connection_after_the_name_is_gone(hosts));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  if (WEXITSTATUS(status) >= 10 && WEXITSTATUS(status) <= 12)
    GTEST_SKIP() << "needs a mount namespace of its own (root): step " << WEXITSTATUS(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "13: the name still resolved; 14: the wait was not woken; 15: a store call "
                                       "failed (its message is above); 16: no second connection in 20 rounds";
}

}  // namespace
}  // namespace torus::comm
