// Built-in kinds checked against the Kubernetes Python client's models (builtin_schema.h): unknown fields named by
// their path and dropped, mistyped values named as the apiserver's decoder names them, other kinds left alone.
#include "tests/apiserver/builtin_schema.h"

#include <gtest/gtest.h>

namespace torus::standin {
namespace {

using json = nlohmann::json;

struct Case {
  const char* what;
  const char* api_version;
  const char* kind;
  const char* object;
  std::vector<std::string> unknown;
  const char* mistyped;
};

class BuiltinFields : public ::testing::TestWithParam<Case> {};

TEST_P(BuiltinFields, AreCheckedAgainstTheClientModels) {
  const Case& c = GetParam();
  json object = json::parse(c.object);
  const FieldProblems problems = check_builtin_fields(c.api_version, c.kind, object);
  EXPECT_EQ(problems.unknown, c.unknown) << c.what;
  EXPECT_EQ(problems.mistyped, c.mistyped) << c.what;
  for (const std::string& path : problems.unknown) {
    EXPECT_EQ(object.dump().find("\"" + path.substr(path.find_last_of('.') + 1) + "\""), std::string::npos)
        << c.what << ": " << path << " was not dropped from " << object.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, BuiltinFields,
    ::testing::Values(
        Case{"a valid deployment",
             "apps/v1",
             "Deployment",
             R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","labels":{"a":"b"}},
                 "spec":{"replicas":2,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},
                 "spec":{"containers":[{"name":"c","image":"i","ports":[{"containerPort":80}],
                 "resources":{"limits":{"cpu":1,"memory":"1Gi"}}}]}}}})",
             {},
             ""},
        Case{"typos at two depths, in the decoder's order",
             "apps/v1",
             "Deployment",
             R"({"spec":{"replicass":2,"template":{"spec":{"containers":[{"name":"c","imagee":"i"}]}}}})",
             {"spec.replicass", "spec.template.spec.containers[0].imagee"},
             ""},
        Case{"a string where an integer belongs",
             "apps/v1",
             "Deployment",
             R"({"spec":{"replicas":"3"}})",
             {},
             "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int"},
        Case{"a scalar where a list belongs",
             "v1",
             "Pod",
             R"({"spec":{"containers":{"name":"c"}}})",
             {},
             "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []Container"},
        Case{"IntOrString either way",
             "v1",
             "Service",
             R"({"spec":{"ports":[{"port":80,"targetPort":"http"},{"port":81,"targetPort":8081}]}})",
             {},
             ""},
        Case{"an RBAC subject",
             "rbac.authorization.k8s.io/v1",
             "RoleBinding",
             R"({"subjects":[{"kind":"ServiceAccount","name":"a","namespacee":"x"}]})",
             {"subjects[0].namespacee"},
             ""},
        Case{"a metadata typo",
             "v1",
             "ConfigMap",
             R"({"metadata":{"name":"c","label":{"a":"b"}},"data":{"k":"v"}})",
             {"metadata.label"},
             ""},
        Case{"a kind outside the schema is left alone", "v1", "Event", R"({"anything":1})", {}, ""}));

TEST(BuiltinSchema, ApplyPathsNameListElementsByTheirName) {
  json object = json::parse(R"({"spec":{"containers":[{"name":"w","imagee":"i"},{"imagee":"j"}],"x":1}})");
  const FieldProblems problems = check_builtin_fields("v1", "Pod", object, PathStyle::kApply);
  EXPECT_EQ(problems.unknown,
            (std::vector<std::string>{".spec.containers[name=\"w\"].imagee", ".spec.containers[1].imagee", ".spec.x"}));
}

TEST(BuiltinSchema, ComesFromTheKubernetesPythonClient) {
  EXPECT_NE(builtin_schema_source().find("PyPI kubernetes 37.0.2"), std::string::npos) << builtin_schema_source();
}

}  // namespace
}  // namespace torus::standin
