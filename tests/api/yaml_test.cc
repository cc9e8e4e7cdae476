// common/api/yaml.h: the YAML 1.2 core schema's scalar resolution (a table) and YAML <-> JSON.
#include "common/api/yaml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace torus::api {
namespace {

using nlohmann::json;

std::string dump(const FieldErrors& errors) {
  std::string out;
  for (const auto& e : errors) out += e.to_string() + "\n";
  return out;
}

struct Case {
  const char* text;
  json want;
};

TEST(Yaml, PlainScalarsResolveByTheCoreSchema) {
  const double inf = std::numeric_limits<double>::infinity();
  const Case cases[] = {
      // null
      {"", nullptr},
      {"~", nullptr},
      {"null", nullptr},
      {"Null", nullptr},
      {"NULL", nullptr},
      {"nULL", "nULL"},
      // booleans; YAML 1.1's yes/no/on/off are strings
      {"true", true},
      {"True", true},
      {"TRUE", true},
      {"false", false},
      {"False", false},
      {"FALSE", false},
      {"yes", "yes"},
      {"off", "off"},
      {"tRUE", "tRUE"},
      // integers: decimal with a sign, 0o octal, 0x hexadecimal
      {"0", 0},
      {"42", 42},
      {"+42", 42},
      {"-17", -17},
      {"007", 7},
      {"0o17", 15},
      {"0x1F", 31},
      {"0xff", 255},
      {"0o8", "0o8"},
      {"0xG", "0xG"},
      {"-0x1F", "-0x1F"},
      {"1_000", "1_000"},
      // the int64 bounds stay integers
      {"9223372036854775807", std::numeric_limits<int64_t>::max()},
      {"-9223372036854775808", std::numeric_limits<int64_t>::min()},
      {"0x7fffffffffffffff", std::numeric_limits<int64_t>::max()},
      // beyond int64: the nearest double (as Go's YAML decoder does)
      {"9223372036854775808", 9223372036854775808.0},
      {"-9223372036854775809", -9223372036854775809.0},
      {"99999999999999999999", 1e20},
      {"0x10000000000000000", 18446744073709551616.0},
      {"0o1000000000000000000000", 9223372036854775808.0},
      // floats
      {"1.0", 1.0},
      {"-2.5", -2.5},
      {".5", 0.5},
      {"1.", 1.0},
      {"1e-3", 1e-3},
      {"+6.02E23", 6.02e23},
      {".inf", inf},
      {".Inf", inf},
      {".INF", inf},
      {"+.inf", inf},
      {"-.inf", -inf},
      {"-.INF", -inf},
      {"inf", "inf"},
      // strings
      {"hello world", "hello world"},
      {"1.2.3", "1.2.3"},
      {"1:20", "1:20"},
      {"0x", "0x"},
  };
  for (const Case& c : cases) {
    const json got = resolve_plain_scalar(c.text);
    EXPECT_EQ(got.type(), c.want.type()) << "'" << c.text << "' -> " << got.dump();
    EXPECT_EQ(got, c.want) << "'" << c.text << "' -> " << got.dump();
  }
  for (const char* nan : {".nan", ".NaN", ".NAN"}) {
    const json got = resolve_plain_scalar(nan);
    ASSERT_TRUE(got.is_number_float()) << nan;
    EXPECT_TRUE(std::isnan(got.get<double>())) << nan;
  }
}

TEST(Yaml, QuotedAndBlockScalarsAndTheStrTagStayStrings) {
  FieldErrors errors;
  const json j = parse_yaml_document("a: '1'\nb: \"true\"\nc: !!str 0x1F\nd: |\n  ~\ne: ''\nf:\n", errors);
  ASSERT_TRUE(errors.empty()) << dump(errors);
  EXPECT_EQ(j, (json{{"a", "1"}, {"b", "true"}, {"c", "0x1F"}, {"d", "~\n"}, {"e", ""}, {"f", nullptr}}));
}

TEST(Yaml, DuplicateAndNonScalarKeysAreErrorsAtTheirPosition) {
  FieldErrors errors;
  parse_yaml_document("a:\n  b: 1\n  b: 2\n? [x]\n: 3\n", errors);
  ASSERT_EQ(errors.size(), 2u) << dump(errors);
  EXPECT_EQ(errors[0].to_string("m.yaml"), "m.yaml:3:3: a.b: duplicate field (first given on line 2)");
  EXPECT_EQ(errors[1].path, "");
  EXPECT_EQ(errors[1].message, "map keys must be strings");
}

TEST(Yaml, OneDocumentOnly) {
  FieldErrors errors;
  EXPECT_TRUE(parse_yaml_document("a: 1\n---\nb: 2\n", errors).is_null());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message, "expected exactly one YAML document, found 2");
}

TEST(Yaml, ParsedDocumentsResolveScalarsAndReadBackWhatTheyWrite) {
  FieldErrors errors;
  const json j = parse_yaml_document(R"(
a: "1"
b: 1
c: 1.0
d: true
e: 'true'
f: ~
g: 0x1F
h: 1e-3
i: hello world
j: ""
k: 99999999999999999999
)",
                                     errors);
  ASSERT_TRUE(errors.empty()) << dump(errors);
  EXPECT_TRUE(j["a"].is_string());
  EXPECT_TRUE(j["b"].is_number_integer());
  EXPECT_TRUE(j["c"].is_number_float());
  EXPECT_EQ(j["d"], true);
  EXPECT_EQ(j["e"], "true");
  EXPECT_TRUE(j["f"].is_null());
  EXPECT_EQ(j["g"], 31);
  EXPECT_DOUBLE_EQ(j["h"].get<double>(), 1e-3);
  EXPECT_EQ(j["i"], "hello world");
  EXPECT_EQ(j["j"], "");
  EXPECT_TRUE(j["k"].is_number_float());
  // And back: strings that would read as something else (in YAML 1.2, or in kubectl's YAML 1.1) are quoted.
  const std::string yaml11 = json_to_yaml(json{{"a", "yes"}, {"b", "off"}, {"c", "1:20"}, {"d", "1_000"}, {"e", "x"}});
  EXPECT_EQ(yaml11, "a: \"yes\"\nb: \"off\"\nc: \"1:20\"\nd: \"1_000\"\ne: x\n");
  const json again = parse_yaml_document(json_to_yaml(j), errors);
  ASSERT_TRUE(errors.empty()) << dump(errors) << json_to_yaml(j);
  EXPECT_EQ(again, j) << json_to_yaml(j);
}

}  // namespace
}  // namespace torus::api
