#include "tests/apiserver/priority.h"

#include <optional>

#include "tests/apiserver/json_fields.h"

namespace torus::standin {

namespace {

using namespace json_fields;

constexpr const char* kPreemptLowerPriority = "PreemptLowerPriority";

std::string class_name(const json& priority_class) {
  return string_field(field_at(priority_class, "metadata"), "name");
}

int64_t class_value(const json& priority_class) {
  const json& value = field_at(priority_class, "value");
  return value.is_number_integer() ? value.get<int64_t>() : 0;
}

bool global_default(const json& priority_class) { return field_at(priority_class, "globalDefault") == true; }

// getDefaultPriorityClass: should a race leave two classes marked default, the one of the lowest value.
const json* default_class(const std::vector<const json*>& classes) {
  const json* found = nullptr;
  for (const json* pc : classes) {
    if (global_default(*pc) && (!found || class_value(*found) > class_value(*pc))) found = pc;
  }
  return found;
}

ApiError forbidden_pod(const std::string& name, const std::string& why) {
  return ApiError(403, "Forbidden", "pods \"" + name + "\" is forbidden: " + why,
                  StatusDetails{name, "", "pods", {}, 0});
}

// scheduling/v1 IsKnownSystemPriorityClass: the error, or nothing for a system class as the apiserver makes it.
std::optional<std::string> unknown_system_class(const std::string& name, int64_t value, bool is_default) {
  for (const json& system : system_priority_classes()) {
    if (class_name(system) != name) continue;
    if (class_value(system) != value) {
      return "value of " + name + " PriorityClass must be " + std::to_string(class_value(system));
    }
    if (is_default) return "globalDefault of " + name + " PriorityClass must be false";
    return std::nullopt;
  }
  return name + " is not a known system priority class";
}

void validate_preemption_policy(const json& priority_class, std::vector<Cause>& causes) {
  const json& policy = field_at(priority_class, "preemptionPolicy");
  if (policy.is_null()) return;
  const std::string value = policy.is_string() ? policy.get<std::string>() : "";
  if (value.empty()) {
    causes.push_back({"FieldValueRequired", "Required value", "preemptionPolicy"});
  } else if (value != kPreemptLowerPriority && value != "Never") {
    causes.push_back({"FieldValueNotSupported",
                      "Unsupported value: \"" + value + "\": supported values: \"PreemptLowerPriority\", \"Never\"",
                      "preemptionPolicy"});
  }
}

}  // namespace

std::vector<json> system_priority_classes() {
  auto system_class = [](const char* name, int64_t value, const char* description) {
    return json{{"apiVersion", "scheduling.k8s.io/v1"}, {"kind", "PriorityClass"},
                {"metadata", {{"name", name}}},         {"value", value},
                {"description", description},           {"preemptionPolicy", kPreemptLowerPriority}};
  };
  return {system_class("system-node-critical", 2000001000,
                       "Used for system critical pods that must not be moved from their current node."),
          system_class("system-cluster-critical", 2000000000,
                       "Used for system critical pods that must run in the cluster, but can be moved to another node "
                       "if necessary.")};
}

void admit_pod_priority(json& pod, const std::string& name, const std::vector<const json*>& classes) {
  json& spec = pod["spec"];
  const std::string wanted = string_field(spec, "priorityClassName");
  int64_t priority = 0;
  std::string preemption = kPreemptLowerPriority;
  if (wanted.empty()) {
    if (const json* fallback = default_class(classes)) {
      spec["priorityClassName"] = class_name(*fallback);
      priority = class_value(*fallback);
      preemption = string_field(*fallback, "preemptionPolicy");
    }
  } else {
    const json* found = nullptr;
    for (const json* pc : classes) {
      if (class_name(*pc) == wanted) found = pc;
    }
    if (!found) throw forbidden_pod(name, "no PriorityClass with name " + wanted + " was found");
    priority = class_value(*found);
    preemption = string_field(*found, "preemptionPolicy");
  }
  const json& given = field_at(spec, "priority");
  if (!given.is_null() && given != priority) {
    throw forbidden_pod(name, "the integer value of priority (" + given.dump() +
                                  ") must not be provided in pod spec; priority admission controller computed " +
                                  std::to_string(priority) + " from the given PriorityClass name");
  }
  spec["priority"] = priority;
  if (preemption.empty()) return;  // a default class without a policy leaves the pod's as it is
  const json& given_policy = field_at(spec, "preemptionPolicy");
  if (!given_policy.is_null() && given_policy != preemption) {
    throw forbidden_pod(name, "the string value of PreemptionPolicy (" + string_field(spec, "preemptionPolicy") +
                                  ") must not be provided in pod spec; priority admission controller computed " +
                                  preemption + " from the given PriorityClass name");
  }
  spec["preemptionPolicy"] = preemption;
}

void keep_pod_priority(const json& before, json& after) {
  const json& old_priority = field_at(field_at(before, "spec"), "priority");
  if (old_priority.is_null() || !after.contains("spec") || !after["spec"].is_object()) return;
  if (field_at(after["spec"], "priority").is_null()) after["spec"]["priority"] = old_priority;
}

void default_priority_class(json& priority_class) {
  if (field_at(priority_class, "preemptionPolicy").is_null())
    priority_class["preemptionPolicy"] = kPreemptLowerPriority;
}

std::vector<Cause> validate_priority_class(const json& priority_class, const json* before) {
  std::vector<Cause> causes;
  if (before) {
    if (class_value(priority_class) != class_value(*before)) {
      causes.push_back({"FieldValueForbidden", "Forbidden: may not be changed in an update.", "value"});
    }
    const json& policy = field_at(priority_class, "preemptionPolicy");
    if (policy != field_at(*before, "preemptionPolicy")) {
      const std::string shown = policy.is_string() ? "\"" + policy.get<std::string>() + "\"" : "null";
      causes.push_back({"FieldValueInvalid", "Invalid value: " + shown + ": field is immutable", "preemptionPolicy"});
    }
    return causes;
  }
  const std::string name = class_name(priority_class);
  if (name.rfind("system-", 0) == 0) {
    if (auto why = unknown_system_class(name, class_value(priority_class), global_default(priority_class))) {
      causes.push_back({"FieldValueForbidden",
                        "Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
                        "error: " +
                            *why,
                        "metadata.name"});
    }
  } else if (class_value(priority_class) > kHighestUserDefinablePriority) {
    causes.push_back({"FieldValueForbidden",
                      "Forbidden: maximum allowed value of a user defined priority is " +
                          std::to_string(kHighestUserDefinablePriority),
                      "value"});
  }
  validate_preemption_policy(priority_class, causes);
  return causes;
}

void admit_priority_class(const json& priority_class, const json* before, const std::vector<const json*>& classes) {
  if (!global_default(priority_class)) return;
  const json* current = default_class(classes);
  if (!current) return;
  const std::string name = class_name(priority_class);
  if (before && class_name(*current) == name) return;
  throw ApiError(403, "Forbidden",
                 "priorityclasses.scheduling.k8s.io \"" + name + "\" is forbidden: PriorityClass " +
                     class_name(*current) + " is already marked as default. Only one default can exist",
                 StatusDetails{name, "scheduling.k8s.io", "priorityclasses", {}, 0});
}

}  // namespace torus::standin
