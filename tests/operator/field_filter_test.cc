// The informer's field filter (operator/kube/field_filter.h): what a watch event keeps once parsed, and that a list's
// items filtered after parsing look the same.
#include "operator/kube/field_filter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace torus::kube {
namespace {

FieldFilter pod_fields() {
  FieldFilter f;
  f.drop("metadata.managedFields").keep_only("spec", {"nodeName"});
  return f;
}

// A pod as a server sends it, with every JSON kind: nested arrays of objects, numbers of each sort, escapes.
json pod() {
  return json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "j-worker-0", "namespace": "ns", "resourceVersion": "42",
                 "labels": {"torus.dev/job-name": "j"}, "annotations": {"a": "x\"y\\u00e9"},
                 "ownerReferences": [{"uid": "u1", "controller": true}],
                 "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
    "spec": {"nodeName": "node-3", "hostname": "j-worker-0",
             "containers": [{"name": "worker", "env": [{"name": "RANK", "value": "0"}],
                             "resources": {"limits": {"cpu": 2.5}}, "args": [["nested"], []]}],
             "volumes": [{"name": "v", "secret": {"secretName": "s"}}], "priority": -7},
    "status": {"phase": "Running", "podIP": "127.0.0.9", "startTime": null,
               "conditions": [{"type": "Ready", "status": "True"}],
               "containerStatuses": [{"name": "worker", "restartCount": 18446744073709551615, "ready": false,
                                      "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}
  })");
}

json event(const std::string& type, const json& object) { return {{"type", type}, {"object", object}}; }

TEST(FieldFilter, AWatchEventKeepsOnlyWhatTheFilterAllows) {
  const json doc = pod_fields().parse_event(event("MODIFIED", pod()).dump());
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["type"], "MODIFIED");
  const json& object = doc["object"];
  EXPECT_EQ(object["spec"], (json{{"nodeName", "node-3"}})) << "containers, volumes, hostname, priority left out";
  EXPECT_FALSE(object["metadata"].contains("managedFields"));
  json metadata = pod()["metadata"];
  metadata.erase("managedFields");
  EXPECT_EQ(object["metadata"], metadata) << "labels, annotations (escapes), owner references whole";
  EXPECT_EQ(object["status"], pod()["status"]) << "null, bool, unsigned and signed numbers, nested objects";
  EXPECT_EQ(object["apiVersion"], "v1");
}

TEST(FieldFilter, AListItemFilteredAfterParsingLooksLikeAWatchedOne) {
  const FieldFilter f = pod_fields();
  json listed = pod();
  f.apply(listed);
  EXPECT_EQ(f.parse_event(event("ADDED", pod()).dump())["object"], listed);
}

TEST(FieldFilter, AnEmptyFilterParsesAsTheLibraryDoes) {
  const FieldFilter none;
  EXPECT_TRUE(none.empty());
  const std::string line = event("ADDED", pod()).dump();
  EXPECT_EQ(none.parse_event(line), json::parse(line));
  json copy = pod();
  none.apply(copy);
  EXPECT_EQ(copy, pod());
}

TEST(FieldFilter, DroppedMembersAtAnyDepthAndOnlyThere) {
  FieldFilter f;
  f.drop("data").drop("metadata.annotations");
  const json secret = {{"metadata", {{"name", "s"}, {"annotations", {{"k", "v"}}}, {"labels", {{"data", "kept"}}}}},
                       {"data", {{"secret", "c2VjcmV0"}}},
                       {"type", "Opaque"}};
  const json doc = f.parse_event(event("ADDED", secret).dump());
  EXPECT_EQ(doc["object"], (json{{"metadata", {{"name", "s"}, {"labels", {{"data", "kept"}}}}}, {"type", "Opaque"}}));
  EXPECT_EQ(doc["type"], "ADDED") << "the event's own members are not the object's";
}

TEST(FieldFilter, ABrokenLineIsDiscardedAsTheLibraryDiscardsIt) {
  const FieldFilter f = pod_fields();
  const std::string line = event("ADDED", pod()).dump();
  EXPECT_TRUE(f.parse_event(line.substr(0, line.size() / 2)).is_discarded()) << "cut inside the dropped spec";
  EXPECT_TRUE(f.parse_event(line.substr(0, line.size() - 3)).is_discarded());
  EXPECT_TRUE(f.parse_event("{\"type\": \"ADDED\", \"object\": {\"spec\": {\"containers\": [}}}").is_discarded());
  EXPECT_TRUE(f.parse_event("").is_discarded());
}


// A random document of every JSON kind: nested containers, numbers at the types' edges, strings with escapes,
// control characters and characters outside the BMP (dump writes them as UTF-8 or \u escapes).
json random_value(std::mt19937& rng, int depth) {
  const int kind = static_cast<int>(rng() % (depth > 4 ? 6 : 8));
  switch (kind) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return -static_cast<int64_t>(rng() % 4 == 0 ? (uint64_t{1} << 63) - 1 : rng() % 100000);
    case 3:
      return rng() % 4 == 0 ? std::numeric_limits<uint64_t>::max() - rng() % 10 : uint64_t{rng() % 1000};
    case 4:
      return std::ldexp(static_cast<double>(rng() % 1000000) - 500000.0, static_cast<int>(rng() % 200) - 100);
    case 5: {
      static const char* const kChars[] = {"a", "\"", "\\", "/", "\n", "\t", "\x01", "\x1f", "é", "€", "😀", "z"};
      std::string text;
      for (size_t i = rng() % 12; i > 0; --i) text += kChars[rng() % std::size(kChars)];
      return text;
    }
    case 6: {
      json a = json::array();
      for (size_t i = rng() % 5; i > 0; --i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (size_t i = rng() % 5; i > 0; --i) o["k" + std::to_string(rng() % 8)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

TEST(FieldFilter, ReadsWhatTheLibraryReadsForAnyDocument) {
  const FieldFilter none;
  std::mt19937 rng(17);
  for (int i = 0; i < 2000; ++i) {
    const json doc = random_value(rng, 0);
    for (const std::string& text : {doc.dump(), doc.dump(2), doc.dump(-1, ' ', true)}) {
      const json ours = none.parse_event(text);
      ASSERT_FALSE(ours.is_discarded()) << text;
      ASSERT_EQ(ours, json::parse(text)) << text;
      ASSERT_EQ(ours.type(), json::parse(text).type()) << text;
    }
  }
}

TEST(FieldFilter, RefusesWhatTheLibraryRefuses) {
  const FieldFilter none;
  for (const std::string text :
       {"", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01", "1.", "-", "+1", ".5", "1e", "tru",
        "nul", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"a\x01\"", "\"\xff\"",
        "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xe2\x82\"", "\"unclosed", "[1] 2", "{\"a\":[1}", "[\"\\\"]",
        "\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\"", "1E+2", "-0", "18446744073709551616", "-9223372036854775809",
        "[[[[]]]]", "{\"\":{}}", "\"\\/\\b\\f\\n\\r\\t\""}) {
    const json library = json::parse(text, nullptr, false);
    const json ours = none.parse_event(text);
    EXPECT_EQ(ours.is_discarded(), library.is_discarded()) << text;
    if (!library.is_discarded()) {
      EXPECT_EQ(ours, library) << text;
    }
  }
}

}  // namespace
}  // namespace torus::kube
