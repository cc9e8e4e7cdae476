#include "tests/apiserver/table.h"

#include <ctime>

namespace torus::standin {

namespace {

struct Column {
  std::string name;
  std::string type;
  std::string format;
  std::string description;
  int priority = 0;
};

std::vector<Column> columns_of(const ResourceType& type) {
  std::vector<Column> columns = {{"Name", "string", "name", "Name must be unique within a namespace.", 0}};
  if (type.origin == Origin::kCustom && type.printer_columns.is_array() && !type.printer_columns.empty()) {
    for (const json& c : type.printer_columns) {
      columns.push_back({c.value("name", ""), c.value("type", "string"), c.value("format", ""),
                         c.value("description", ""), c.value("priority", 0)});
    }
    return columns;
  }
  if (type.group.empty() && type.plural == "pods") {
    columns.push_back({"Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0});
    columns.push_back({"Status", "string", "", "The aggregate status of the containers in this pod.", 0});
    columns.push_back(
        {"Restarts", "string", "", "The number of times the containers in this pod have been restarted.", 0});
    columns.push_back({"Age", "string", "", "CreationTimestamp", 0});
    columns.push_back({"IP", "string", "", "The IP address assigned to the pod", 1});
    columns.push_back({"Node", "string", "", "The name of the node the pod is assigned to", 1});
    return columns;
  }
  columns.push_back({"Age", "date", "", "CreationTimestamp", 0});
  return columns;
}

std::string pod_status(const json& pod) {
  if (pod["metadata"].contains("deletionTimestamp")) return "Terminating";
  const json& status = pod.value("status", json::object());
  std::string reason = status.value("phase", "Pending");
  for (const json& c : status.value("containerStatuses", json::array())) {
    const json& state = c.value("state", json::object());
    if (state.contains("terminated")) reason = state["terminated"].value("reason", "Error");
    if (state.contains("waiting")) reason = state["waiting"].value("reason", reason);
  }
  for (const json& c : status.value("conditions", json::array())) {
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") reason = "Pending";
  }
  return reason;
}

json pod_cells(const json& pod) {
  const json& status = pod.value("status", json::object());
  const json containers = pod.value("spec", json::object()).value("containers", json::array());
  int ready = 0;
  int64_t restarts = 0;
  for (const json& c : status.value("containerStatuses", json::array())) {
    if (c.value("ready", false)) ++ready;
    restarts += c.value("restartCount", 0);
  }
  std::string ip = status.value("podIP", "<none>");
  std::string node = pod.value("spec", json::object()).value("nodeName", "<none>");
  return json::array({std::to_string(ready) + "/" + std::to_string(containers.size()), pod_status(pod),
                      std::to_string(restarts), human_age(pod["metadata"].value("creationTimestamp", "")), ip, node});
}

json cell_value(const json& value, const std::string& type) {
  if (value.is_null()) return nullptr;
  if (type == "date" && value.is_string()) return human_age(value.get<std::string>());
  if (type == "integer" && value.is_number()) return value;
  if (type == "number" && value.is_number()) return value;
  if (type == "boolean" && value.is_boolean()) return value;
  if (value.is_string()) return value;
  return value.dump();
}

json row_object(const json& object, TableObjects include) {
  switch (include) {
    case TableObjects::kNone:
      return nullptr;
    case TableObjects::kFull:
      return object;
    case TableObjects::kMetadata:
      break;
  }
  return {{"kind", "PartialObjectMetadata"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", object["metadata"]}};
}

// Splits ".a.b[0].c[?(@.type==\"X\")].d" into steps.
std::vector<std::string> path_steps(const std::string& path) {
  std::vector<std::string> steps;
  std::string current;
  for (size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    if (c == '.') {
      if (!current.empty()) steps.push_back(current);
      current.clear();
    } else if (c == '[') {
      if (!current.empty()) steps.push_back(current);
      size_t close = path.find(']', i);
      if (close == std::string::npos) return {};
      steps.push_back(path.substr(i, close - i + 1));
      current.clear();
      i = close;
    } else {
      current += c;
    }
  }
  if (!current.empty()) steps.push_back(current);
  return steps;
}

const json* apply_step(const json* at, const std::string& step) {
  if (step.front() != '[') return at->is_object() && at->contains(step) ? &(*at)[step] : nullptr;
  if (!at->is_array()) return nullptr;
  std::string inner = step.substr(1, step.size() - 2);
  if (inner.rfind("?(@.", 0) == 0) {  // [?(@.key=="value")]
    size_t eq = inner.find("==");
    if (eq == std::string::npos) return nullptr;
    std::string key = inner.substr(4, eq - 4);
    std::string value = inner.substr(eq + 2);
    value = value.substr(0, value.rfind(')'));
    if (!value.empty() && (value.front() == '"' || value.front() == '\'')) value = value.substr(1, value.size() - 2);
    for (const json& item : *at) {
      if (item.is_object() && item.contains(key) && item[key].is_string() && item[key].get<std::string>() == value) {
        return &item;
      }
    }
    return nullptr;
  }
  if (inner.empty() || inner.find_first_not_of("0123456789") != std::string::npos) return nullptr;
  size_t index = std::stoul(inner);
  return index < at->size() ? &(*at)[index] : nullptr;
}

}  // namespace

json evaluate_json_path(const json& object, const std::string& path) {
  std::string p = path;
  if (!p.empty() && p.front() == '{' && p.back() == '}') p = p.substr(1, p.size() - 2);
  const json* at = &object;
  for (const std::string& step : path_steps(p)) {
    at = apply_step(at, step);
    if (at == nullptr) return nullptr;
  }
  return *at;
}

std::string human_age(const std::string& rfc3339_timestamp) {
  std::tm tm{};
  if (strptime(rfc3339_timestamp.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm) == nullptr) return "<unknown>";
  long long seconds = static_cast<long long>(std::difftime(std::time(nullptr), timegm(&tm)));
  if (seconds < 0) seconds = 0;
  if (seconds < 120) return std::to_string(seconds) + "s";
  long long minutes = seconds / 60;
  if (minutes < 10) return std::to_string(minutes) + "m" + (seconds % 60 ? std::to_string(seconds % 60) + "s" : "");
  if (minutes < 180) return std::to_string(minutes) + "m";
  long long hours = minutes / 60;
  if (hours < 48) return std::to_string(hours) + "h";
  return std::to_string(hours / 24) + "d";
}

json to_table(const ResourceType& type, const std::vector<ObjectPtr>& objects, TableObjects include) {
  std::vector<Column> columns = columns_of(type);
  json definitions = json::array();
  for (const Column& c : columns) {
    definitions.push_back({{"name", c.name},
                           {"type", c.type},
                           {"format", c.format},
                           {"description", c.description},
                           {"priority", c.priority}});
  }
  bool pods = type.group.empty() && type.plural == "pods";
  bool custom = type.origin == Origin::kCustom && type.printer_columns.is_array() && !type.printer_columns.empty();
  json rows = json::array();
  for (const ObjectPtr& object : objects) {
    json cells = json::array({name_of(*object)});
    if (pods) {
      for (const json& cell : pod_cells(*object)) cells.push_back(cell);
    } else if (custom) {
      for (const json& c : type.printer_columns) {
        cells.push_back(cell_value(evaluate_json_path(*object, c.value("jsonPath", "")), c.value("type", "string")));
      }
    } else {
      cells.push_back(human_age((*object)["metadata"].value("creationTimestamp", "")));
    }
    json row = {{"cells", cells}};
    json embedded = row_object(*object, include);
    if (!embedded.is_null()) row["object"] = embedded;
    rows.push_back(row);
  }
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", json::object()},
          {"columnDefinitions", definitions},
          {"rows", rows}};
}

}  // namespace torus::standin
