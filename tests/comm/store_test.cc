// worker/comm/store.h: the rendezvous store (TCP server and client, prefixes, waits, secrets, late and absent
// servers).
#include "worker/comm/store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/util/error.h"
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

TEST(Store, LateServerIsWaitedFor) {
  int port = 0;
  {
    Fd probe = listen_tcp("127.0.0.1", 0);  // reserve a free port number, then release it for the late server
    port = bound_port(probe);
  }
  std::unique_ptr<TcpStoreServer> server;
  std::thread late([&] {
    std::this_thread::sleep_for(milliseconds(300));  // the point of the test: rank 0 comes up late
    server = std::make_unique<TcpStoreServer>("127.0.0.1", port, "k");
  });
  TcpStoreOptions o;
  o.port = port;
  o.secret = "k";
  o.connect_timeout = milliseconds(10000);
  TcpStore client(o);
  client.set("x", to_bytes("1"));
  late.join();
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

}  // namespace
}  // namespace torus::comm
