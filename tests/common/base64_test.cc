// RFC 4648 base64 (common/util/base64.h): the test vectors of RFC 4648 section 10, and what is not base64.
#include "common/util/base64.h"

#include <gtest/gtest.h>

#include <utility>

namespace torus {
namespace {

TEST(Base64, Rfc4648VectorsRoundTrip) {
  for (const auto& [plain, encoded] :
       std::initializer_list<std::pair<const char*, const char*>>{{"", ""},
                                                                  {"f", "Zg=="},
                                                                  {"fo", "Zm8="},
                                                                  {"foo", "Zm9v"},
                                                                  {"foob", "Zm9vYg=="},
                                                                  {"fooba", "Zm9vYmE="},
                                                                  {"foobar", "Zm9vYmFy"}}) {
    EXPECT_EQ(base64_encode(plain), encoded);
    EXPECT_EQ(base64_decode(encoded), std::optional<std::string>(plain)) << encoded;
  }
  const std::string binary("\0\xff\x10", 3);
  EXPECT_EQ(base64_decode(base64_encode(binary)), binary);
}

TEST(Base64, RefusesWhatIsNotBase64) {
  for (const char* text : {"Zm9", "Zg=a", "Z===", "Zm9v@@@@", "Zm=v"}) EXPECT_FALSE(base64_decode(text)) << text;
}

}  // namespace
}  // namespace torus
