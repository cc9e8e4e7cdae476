// RFC 3339 times as Kubernetes and Go write them: the forms the controller's conditions and the exec plugins'
// expirationTimestamp arrive in.
#include "common/util/rfc3339.h"

#include <gtest/gtest.h>

namespace torus {
namespace {

using std::chrono::system_clock;

TEST(Rfc3339, ParsesEveryFormGoWrites) {
  const auto t0 = system_clock::from_time_t(1795327200);  // 2026-11-22T06:00:00Z
  struct Case {
    const char* text;
    system_clock::time_point want;
  };
  for (const Case& c : {Case{"2026-11-22T06:00:00Z", t0}, Case{"2026-11-22T06:00:00z", t0},
                        Case{"2026-11-22T06:00:00.123456789Z", t0}, Case{"2026-11-22T08:00:00+02:00", t0},
                        Case{"2026-11-22T01:30:00-04:30", t0}, Case{"2026-11-22T06:00:00.5+00:00", t0}}) {
    const auto parsed = parse_rfc3339(c.text);
    ASSERT_TRUE(parsed) << c.text;
    EXPECT_EQ(*parsed, c.want) << c.text;
  }
  EXPECT_EQ(format_rfc3339(t0), "2026-11-22T06:00:00Z");
}

TEST(Rfc3339, RefusesWhatIsNotOne) {
  for (const char* text : {"", "tomorrow", "2026-11-22", "2026-11-22T06:00:00", "2026-11-22 06:00:00Z",
                           "2026-11-22T06:00:00+0200", "2026-11-22T06:00:00Q"}) {
    EXPECT_FALSE(parse_rfc3339(text)) << text;
  }
}

TEST(Rfc3339, FormatThenParseIsTheSameSecond) {
  const auto now = std::chrono::time_point_cast<std::chrono::seconds>(system_clock::now());
  EXPECT_EQ(parse_rfc3339(format_rfc3339(now)), now);
}

}  // namespace
}  // namespace torus
