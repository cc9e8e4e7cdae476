// Field ownership and server-side apply (tests/apiserver/field_manager.h): the rules of the apiserver's
// structured-merge-diff that kubectl apply --server-side and Helm 4 rely on.
#include "tests/apiserver/field_manager.h"

#include <gtest/gtest.h>

namespace torus::standin {
namespace {

const std::string kNow = "2026-11-27T12:00:00Z";

json config_map(const json& data) {
  return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "c"}}}, {"data", data}};
}

ApplyOutcome apply(const json* live, const json& applied, const std::string& manager, Force force = Force::kNo) {
  return server_side_apply(live, applied, manager, "", ListSemantics::kBuiltin, FieldScope::kAll, force, kNow);
}

std::set<std::string> managers_of(const json& object) {
  std::set<std::string> out;
  for (const ManagedEntry& e : managed_entries(object)) {
    out.insert(e.manager + (e.operation == ManagerOperation::kApply ? "/Apply" : "/Update"));
  }
  return out;
}

TEST(FieldManager, KeyedListItemsAreFieldsOfTheirOwn) {
  const json pod = {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"metadata", {{"name", "p"}, {"uid", "u"}, {"labels", {{"app", "a"}}}}},
                    {"spec", {{"containers", {{{"name", "web"}, {"image", "i"}, {"args", {"a", "b"}}}}}}}};
  const FieldSet fields = fields_of(pod, ListSemantics::kBuiltin, FieldScope::kAll);
  const std::string web = R"(k:{"name":"web"})";
  EXPECT_TRUE(fields.count({"f:spec", "f:containers", web, "f:image"}));
  EXPECT_TRUE(fields.count({"f:spec", "f:containers", web, "f:args"}));  // args: atomic
  EXPECT_FALSE(fields.count({"f:spec", "f:containers", web, "f:args", R"(v:"a")"}));
  EXPECT_TRUE(fields.count({"f:metadata", "f:labels", "f:app"}));
  EXPECT_FALSE(fields.count({"f:metadata", "f:uid"}));  // server-owned
  EXPECT_FALSE(fields.count({"f:apiVersion"}));
  EXPECT_EQ(from_fields_v1(to_fields_v1(fields)), fields);
  EXPECT_EQ(value_at(pod, {"f:spec", "f:containers", web, "f:image"}), json("i"));
  EXPECT_EQ(describe_path({"f:spec", "f:containers", web, "f:image"}), R"(.spec.containers[name="web"].image)");
  // A custom resource's lists are atomic: the list is the field.
  const FieldSet atomic = fields_of(pod, ListSemantics::kAtomic, FieldScope::kAll);
  EXPECT_TRUE(atomic.count({"f:spec", "f:containers"}));
  EXPECT_FALSE(atomic.count({"f:spec", "f:containers", web}));
}

TEST(FieldManager, ScopesSplitStatusFromTheRest) {
  const json object = {{"spec", {{"a", 1}}}, {"status", {{"b", 2}}}};
  EXPECT_EQ(fields_of(object, ListSemantics::kBuiltin, FieldScope::kAllButStatus),
            (FieldSet{{"f:spec"}, {"f:spec", "f:a"}}));
  EXPECT_EQ(fields_of(object, ListSemantics::kBuiltin, FieldScope::kStatusOnly),
            (FieldSet{{"f:status"}, {"f:status", "f:b"}}));
}

TEST(FieldManager, ApplyCreatesAndOwnsWhatItApplied) {
  const ApplyOutcome created = apply(nullptr, config_map({{"a", "1"}}), "helm");
  ASSERT_TRUE(created.conflicts.empty());
  EXPECT_EQ(created.object["data"], json({{"a", "1"}}));
  EXPECT_EQ(managers_of(created.object), (std::set<std::string>{"helm/Apply"}));
  const auto entries = managed_entries(created.object);
  EXPECT_EQ(entries[0].api_version, "v1");
  EXPECT_EQ(entries[0].time, kNow);
  EXPECT_TRUE(entries[0].fields.count({"f:data", "f:a"}));
}

TEST(FieldManager, ChangingAnotherManagersFieldConflictsUnlessForced) {
  const json live = apply(nullptr, config_map({{"a", "1"}, {"b", "2"}}), "helm").object;
  const ApplyOutcome refused = apply(&live, config_map({{"a", "9"}}), "ops");
  ASSERT_EQ(refused.conflicts.size(), 1u);
  EXPECT_EQ(refused.conflicts[0].manager, "helm");
  EXPECT_EQ(describe_path(refused.conflicts[0].path), ".data.a");
  // The same value is no conflict: both own it.
  const ApplyOutcome shared = apply(&live, config_map({{"b", "2"}}), "ops");
  EXPECT_TRUE(shared.conflicts.empty());
  EXPECT_EQ(managers_of(shared.object), (std::set<std::string>{"helm/Apply", "ops/Apply"}));
  // Forced, ops takes .data.a over; helm keeps .data.b.
  const ApplyOutcome forced = apply(&live, config_map({{"a", "9"}}), "ops", Force::kYes);
  ASSERT_TRUE(forced.conflicts.empty());
  EXPECT_EQ(forced.object["data"], json({{"a", "9"}, {"b", "2"}}));
  for (const ManagedEntry& e : managed_entries(forced.object)) {
    EXPECT_EQ(e.fields.count({"f:data", "f:a"}), e.manager == "ops" ? 1u : 0u) << e.manager;
  }
}

TEST(FieldManager, WhatAManagerStopsApplyingIsRemovedUnlessSomeoneElseOwnsIt) {
  json live = apply(nullptr, config_map({{"a", "1"}, {"b", "2"}}), "helm").object;
  live = apply(&live, config_map({{"b", "2"}}), "ops").object;  // ops co-owns b
  const json after = apply(&live, config_map(json::object()), "helm").object;
  EXPECT_EQ(after["data"], json({{"b", "2"}}));  // a went with helm; b stays, ops still applies it
}

TEST(FieldManager, KeyedListsMergeItemsByKey) {
  const json base = {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"metadata", {{"name", "d"}}}};
  json a = base;
  a["spec"]["template"]["spec"]["containers"] = {{{"name", "main"}, {"image", "v1"}}};
  json b = base;
  b["spec"]["template"]["spec"]["containers"] = {{{"name", "sidecar"}, {"image", "s"}}};
  json live = apply(nullptr, a, "helm").object;
  const ApplyOutcome beside = apply(&live, b, "mesh");
  ASSERT_TRUE(beside.conflicts.empty()) << describe_path(beside.conflicts[0].path);
  live = beside.object;
  const json& containers = live["spec"]["template"]["spec"]["containers"];
  ASSERT_EQ(containers.size(), 2u);
  EXPECT_EQ(containers[0]["name"], "main");
  EXPECT_EQ(containers[1]["name"], "sidecar");
}

// kubectl edit / scale after an apply: the update takes the fields it changed, so the next apply of the old value
// conflicts with it (the classic "kubectl scale then helm upgrade" case).
TEST(FieldManager, AnUpdateTakesTheFieldsItChanged) {
  const json live = apply(nullptr, config_map({{"a", "1"}, {"b", "2"}}), "helm").object;
  json edited = live;
  edited["data"]["a"] = "5";
  edited["metadata"]["managedFields"] =
      track_update(&live, edited, "kubectl-edit", "", ListSemantics::kBuiltin, FieldScope::kAll, kNow);
  EXPECT_EQ(managers_of(edited), (std::set<std::string>{"helm/Apply", "kubectl-edit/Update"}));
  const ApplyOutcome again = apply(&edited, config_map({{"a", "1"}, {"b", "2"}}), "helm");
  ASSERT_EQ(again.conflicts.size(), 1u);
  EXPECT_EQ(again.conflicts[0].manager, "kubectl-edit");
  // A write that changes nothing takes nothing.
  const json unchanged = track_update(&edited, edited, "other", "", ListSemantics::kBuiltin, FieldScope::kAll, kNow);
  EXPECT_EQ(unchanged, edited["metadata"]["managedFields"]);
}

}  // namespace
}  // namespace torus::standin
