// The Priority admission plugin and scheduling.k8s.io/v1 PriorityClasses (priority.h), through the real kubectl and
// plain HTTP, with kube-apiserver's words.
#include "tests/apiserver/priority.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/apiserver_test/standin_fixture.h"

namespace torus::standin::testing {
namespace {

using ::testing::HasSubstr;
namespace http = boost::beast::http;

class PriorityTest : public StandinTest {
 protected:
  std::string pod_yaml(const std::string& name, const std::string& spec_extra) const {
    return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n" + spec_extra +
           "  containers: [{name: w, image: registry.example/torus-worker:1}]\n";
  }
  CommandResult create_pod(const std::string& name, const std::string& spec_extra) {
    return kubectl({"create", "-f", write_file(name + ".yaml", pod_yaml(name, spec_extra))});
  }
  json pod(const std::string& name) const { return get_json({"get", "pod", name, "-o", "json"}); }
  // `kubectl create priorityclass` sends protobuf, which the stand-in reads for a few kinds only: a manifest.
  CommandResult create_class(const std::string& name, const std::string& fields) {
    return kubectl({"create", "-f",
                    write_file(name + "-class.yaml",
                               "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
                               "metadata: {name: " +
                                   name + "}\n" + fields)});
  }
};

TEST_F(PriorityTest, TheSystemClassesExistAndAPodGetsItsClasssPriority) {
  EXPECT_EQ(ok({"get", "priorityclasses", "-o", "name"}),
            "priorityclass.scheduling.k8s.io/system-cluster-critical\n"
            "priorityclass.scheduling.k8s.io/system-node-critical\n");
  const json critical = get_json({"get", "pc", "system-node-critical", "-o", "json"});
  EXPECT_EQ(critical["value"], 2000001000);
  EXPECT_EQ(critical["preemptionPolicy"], "PreemptLowerPriority");

  ASSERT_EQ(create_pod("node-agent", "  priorityClassName: system-node-critical\n").exit_code, 0);
  EXPECT_EQ(pod("node-agent")["spec"]["priority"], 2000001000);
  ASSERT_EQ(create_pod("plain", "").exit_code, 0);
  EXPECT_EQ(pod("plain")["spec"]["priority"], 0) << "no class and no default class";
  EXPECT_EQ(pod("plain")["spec"]["preemptionPolicy"], "PreemptLowerPriority");

  ASSERT_EQ(create_class("gold", "value: 1000\npreemptionPolicy: Never\n").exit_code, 0);
  ASSERT_EQ(create_pod("golden", "  priorityClassName: gold\n").exit_code, 0);
  EXPECT_EQ(pod("golden")["spec"]["priority"], 1000);
  EXPECT_EQ(pod("golden")["spec"]["preemptionPolicy"], "Never");
}

TEST_F(PriorityTest, APodNamingAMissingClassIsRefusedAsThePluginRefusesIt) {
  CommandResult refused = create_pod("x", "  priorityClassName: gold\n");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr(R"(Error from server (Forbidden): error when creating ")" + dir_ +
                                     R"(/x.yaml": pods "x" is forbidden: no PriorityClass with name gold was found)"));
  // A generated name is not known yet in the mutating phase: the refusal names the prefix, as the apiserver's does.
  const HttpReply reply = http_request(server_->port(), http::verb::post, "/api/v1/namespaces/default/pods",
                                       R"({"metadata":{"generateName":"gen-"},"spec":{"priorityClassName":"gold",)"
                                       R"("containers":[{"name":"w","image":"w"}]}})");
  EXPECT_EQ(reply.status, 403);
  EXPECT_EQ(reply.body_json()["message"], R"(pods "gen-" is forbidden: no PriorityClass with name gold was found)");
  // The ServiceAccount plugin runs first.
  CommandResult both = create_pod("why", "  priorityClassName: gold\n  serviceAccountName: ghost\n");
  EXPECT_THAT(both.err, HasSubstr("error looking up service account default/ghost"));
}

TEST_F(PriorityTest, AGivenPriorityMustMatchTheClassAndUpdatesKeepIt) {
  CommandResult refused = create_pod("x", "  priority: 7\n");
  EXPECT_THAT(refused.err, HasSubstr(R"(pods "x" is forbidden: the integer value of priority (7) must not be provided )"
                                     R"(in pod spec; priority admission controller computed 0 from the given )"
                                     R"(PriorityClass name)"));
  ASSERT_EQ(create_pod("p", "  priorityClassName: system-cluster-critical\n").exit_code, 0);
  json stored = pod("p");
  stored["spec"].erase("priority");
  const HttpReply put =
      http_request(server_->port(), http::verb::put, "/api/v1/namespaces/default/pods/p", stored.dump());
  EXPECT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(pod("p")["spec"]["priority"], 2000000000);
}

TEST_F(PriorityTest, ClassesAreValidatedAndOnlyOneIsTheDefault) {
  ASSERT_EQ(create_class("base", "value: 10\nglobalDefault: true\n").exit_code, 0);
  ASSERT_EQ(create_pod("d", "").exit_code, 0);
  EXPECT_EQ(pod("d")["spec"]["priorityClassName"], "base");
  EXPECT_EQ(pod("d")["spec"]["priority"], 10);

  CommandResult second = create_class("other", "value: 20\nglobalDefault: true\n");
  EXPECT_THAT(second.err, HasSubstr(R"(priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass base is )"
                                    R"(already marked as default. Only one default can exist)"));
  CommandResult huge = create_class("huge", "value: 1000000001\n");
  EXPECT_THAT(huge.err, HasSubstr(R"(The PriorityClass "huge" is invalid: value: Forbidden: maximum )"
                                  R"(allowed value of a user defined priority is 1000000000)"));
  CommandResult reserved = create_class("system-mine", "value: 5\n");
  EXPECT_THAT(reserved.err, HasSubstr(R"(metadata.name: Forbidden: priority class names with 'system-' prefix are )"
                                      R"(reserved for system use only. error: system-mine is not a known system )"
                                      R"(priority class)"));
  CommandResult changed = kubectl({"patch", "pc", "base", "--type=merge", "-p", R"({"value":11})"});
  EXPECT_THAT(changed.err, HasSubstr(R"(The PriorityClass "base" is invalid: value: Forbidden: may not )"
                                     R"(be changed in an update.)"));
}

}  // namespace
}  // namespace torus::standin::testing
