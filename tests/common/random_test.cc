// common/util/random.h: OpenSSL's random bytes as hex.
#include "common/util/random.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace torus {
namespace {

bool lower_hex(const std::string& s) { return s.find_first_not_of("0123456789abcdef") == std::string::npos; }

TEST(Random, HexHasTwoDigitsPerByte) {
  for (size_t bytes : {0u, 1u, 8u, 33u}) {
    const std::string s = random_hex(bytes);
    EXPECT_EQ(s.size(), 2 * bytes);
    EXPECT_TRUE(lower_hex(s)) << s;
  }
}

TEST(Random, SecretsAre64HexDigitsAndDoNotRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string s = random_secret();
    ASSERT_EQ(s.size(), 64u);
    ASSERT_TRUE(lower_hex(s)) << s;
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(Random, EveryHexDigitAppears) {
  const std::string s = random_hex(4096);  // a missing digit in 8192 draws has probability about 16 * (15/16)^8192
  for (char c : std::string("0123456789abcdef")) EXPECT_NE(s.find(c), std::string::npos) << c;
}

}  // namespace
}  // namespace torus
