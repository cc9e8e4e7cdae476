// The loopback-only destination policy every test runs under (TORUS_LOOPBACK_ONLY=1, set by torus_gtest).
#include "common/util/destination.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace torus::net {
namespace {

using ::testing::HasSubstr;

sockaddr_storage address(const std::string& ip) {
  sockaddr_storage ss{};
  if (ip.find(':') != std::string::npos) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    EXPECT_EQ(::inet_pton(AF_INET6, ip.c_str(), &a->sin6_addr), 1) << ip;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    EXPECT_EQ(::inet_pton(AF_INET, ip.c_str(), &a->sin_addr), 1) << ip;
  }
  return ss;
}

bool loopback(const std::string& ip) {
  sockaddr_storage ss = address(ip);
  return is_loopback(reinterpret_cast<const sockaddr*>(&ss));
}

TEST(Destination, TheTestSuiteRunsLoopbackOnly) {
  EXPECT_EQ(destination_policy(), DestinationPolicy::kLoopbackOnly)
      << "torus_gtest must run every test with TORUS_LOOPBACK_ONLY=1";
}

TEST(Destination, LoopbackIsAllOf127AndIpv6Loopback) {
  for (const char* ip : {"127.0.0.1", "127.2.0.9", "127.255.255.254", "::1", "::ffff:127.0.0.1"})
    EXPECT_TRUE(loopback(ip)) << ip;
  for (const char* ip : {"10.244.0.5", "192.168.0.10", "172.16.0.1", "8.8.8.8", "128.0.0.1", "::", "fe80::1",
                         "::ffff:10.0.0.1", "0.0.0.0"})
    EXPECT_FALSE(loopback(ip)) << ip;
}

TEST(Destination, LoopbackOnlyRefusesOtherAddressesAndNamesTheTarget) {
  sockaddr_storage pod = address("10.244.3.7");
  try {
    check_destination(reinterpret_cast<const sockaddr*>(&pod), "scrape rank 0", DestinationPolicy::kLoopbackOnly);
    FAIL() << "10.244.3.7 was allowed";
  } catch (const DestinationRefused& e) {
    EXPECT_THAT(e.what(), HasSubstr("scrape rank 0: refusing to connect to 10.244.3.7"));
    EXPECT_THAT(e.what(), HasSubstr("TORUS_LOOPBACK_ONLY"));
  }
  EXPECT_NO_THROW(check_destination(reinterpret_cast<const sockaddr*>(&pod), "x", DestinationPolicy::kAny));
  sockaddr_storage local = address("127.3.0.2");
  EXPECT_NO_THROW(
      check_destination(reinterpret_cast<const sockaddr*>(&local), "x", DestinationPolicy::kLoopbackOnly));
}

TEST(Destination, HostNamesAreResolvedAndEveryAddressChecked) {
  EXPECT_NO_THROW(check_destination("localhost", "x", DestinationPolicy::kLoopbackOnly));
  EXPECT_NO_THROW(check_destination("127.9.8.7", "x", DestinationPolicy::kLoopbackOnly));
  EXPECT_NO_THROW(check_destination("[::1]", "x", DestinationPolicy::kLoopbackOnly));
  EXPECT_THROW(check_destination("192.168.0.10", "x", DestinationPolicy::kLoopbackOnly), DestinationRefused);
  // A name that does not resolve is refused too: nothing proves it is local.
  EXPECT_THROW(check_destination("no-such-host.invalid", "x", DestinationPolicy::kLoopbackOnly), DestinationRefused);
}

}  // namespace
}  // namespace torus::net
