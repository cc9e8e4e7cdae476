#include "tests/apiserver/field_manager.h"

#include <algorithm>

#include "tests/apiserver/patch.h"

namespace torus::standin {
namespace {

// Metadata the server owns (or that names the object): no manager owns it, and an apply never removes it.
bool server_owned_metadata(const std::string& key) {
  static const std::set<std::string> owned = {"name",          "namespace",         "uid",
                                              "resourceVersion", "creationTimestamp", "generation",
                                              "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds",
                                              "selfLink"};
  return owned.count(key) > 0;
}

ListRule rule_for(const std::string& field, const json& items, ListSemantics lists) {
  if (lists == ListSemantics::kAtomic) return {ListStrategy::kReplace, ""};
  return list_rule(field, items);
}

std::string item_step(const ListRule& rule, const json& item) {
  if (rule.strategy == ListStrategy::kMergePrimitives) return "v:" + item.dump();
  return "k:" + json{{rule.key, item.at(rule.key)}}.dump();
}

void collect_value(const json& value, const std::string& field, FieldPath& path, FieldSet& out, ListSemantics lists);

void collect_map(const json& map, FieldPath& path, FieldSet& out, ListSemantics lists) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    path.push_back("f:" + it.key());
    out.insert(path);
    collect_value(it.value(), it.key(), path, out, lists);
    path.pop_back();
  }
}

void collect_value(const json& value, const std::string& field, FieldPath& path, FieldSet& out, ListSemantics lists) {
  if (value.is_object()) {
    collect_map(value, path, out, lists);
    return;
  }
  if (!value.is_array()) return;
  const ListRule rule = rule_for(field, value, lists);
  if (rule.strategy == ListStrategy::kReplace) return;  // atomic: the list is one value
  for (const json& item : value) {
    if (rule.strategy == ListStrategy::kMergeByKey && !(item.is_object() && item.contains(rule.key))) continue;
    path.push_back(item_step(rule, item));
    out.insert(path);
    if (item.is_object()) collect_map(item, path, out, lists);
    path.pop_back();
  }
}

// Where `step` points in `container` (an object or an array), or nullptr.
const json* step_into(const json& container, const std::string& step) {
  const std::string kind = step.substr(0, 2);
  const std::string rest = step.substr(2);
  if (kind == "f:") {
    if (!container.is_object()) return nullptr;
    auto it = container.find(rest);
    return it == container.end() ? nullptr : &*it;
  }
  if (!container.is_array()) return nullptr;
  const json wanted = json::parse(rest);
  for (const json& item : container) {
    if (kind == "v:" && item == wanted) return &item;
    if (kind == "k:" && item.is_object()) {
      bool same = true;
      for (auto it = wanted.begin(); it != wanted.end() && same; ++it) same = item.value(it.key(), json()) == *it;
      if (same) return &item;
    }
  }
  return nullptr;
}

// Whether a field's value is compared as a whole: a scalar or an atomic list, or a map or merged list where there was
// none; a map over a map, or a merged list over a list, is compared member by member (each is a field of its own).
bool compared_whole(const json& now, const std::optional<json>& before, const FieldPath& path, ListSemantics lists) {
  if (now.is_object()) return !(before && before->is_object());
  if (!now.is_array() || path.empty() || path.back().rfind("f:", 0) != 0) return true;
  if (rule_for(path.back().substr(2), now, lists).strategy == ListStrategy::kReplace) return true;
  return !(before && before->is_array());
}

void remove_path(json& object, const FieldPath& path) {
  json* parent = &object;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const json* next = step_into(*parent, path[i]);
    if (next == nullptr) return;
    parent = const_cast<json*>(next);
  }
  const std::string& last = path.back();
  if (last.rfind("f:", 0) == 0) {
    if (parent->is_object()) parent->erase(last.substr(2));
    return;
  }
  const json* item = step_into(*parent, last);
  if (item == nullptr) return;
  parent->erase(static_cast<size_t>(item - &(*parent)[0]));
}

json merge_value(const json& live, const json& applied, const std::string& field, ListSemantics lists) {
  if (live.is_object() && applied.is_object()) {
    json out = live;
    for (auto it = applied.begin(); it != applied.end(); ++it) {
      out[it.key()] = live.contains(it.key()) ? merge_value(live[it.key()], it.value(), it.key(), lists) : it.value();
    }
    return out;
  }
  if (!live.is_array() || !applied.is_array()) return applied;
  const ListRule rule = rule_for(field, applied, lists);
  if (rule.strategy == ListStrategy::kReplace) return applied;
  json out = live;
  for (const json& item : applied) {
    if (rule.strategy == ListStrategy::kMergeByKey && !(item.is_object() && item.contains(rule.key))) continue;
    const json* match = step_into(out, item_step(rule, item));
    if (match == nullptr) {
      out.push_back(item);
    } else if (rule.strategy == ListStrategy::kMergeByKey) {
      *const_cast<json*>(match) = merge_value(*match, item, "", lists);
    }
  }
  return out;
}

bool owns_at_or_below(const FieldSet& fields, const FieldPath& path) {
  auto it = fields.lower_bound(path);
  return it != fields.end() && it->size() >= path.size() && std::equal(path.begin(), path.end(), it->begin());
}

const char* operation_name(ManagerOperation op) { return op == ManagerOperation::kApply ? "Apply" : "Update"; }

ManagedEntry& entry_for(std::vector<ManagedEntry>& entries, const std::string& manager, ManagerOperation op,
                        const std::string& subresource) {
  for (ManagedEntry& e : entries) {
    if (e.manager == manager && e.operation == op && e.subresource == subresource) return e;
  }
  entries.push_back(ManagedEntry{manager, op, "", subresource, "", {}});
  return entries.back();
}

void drop_empty(std::vector<ManagedEntry>& entries) {
  entries.erase(std::remove_if(entries.begin(), entries.end(), [](const ManagedEntry& e) { return e.fields.empty(); }),
                entries.end());
}

json without_managed_fields(const json& object) {
  json out = object;
  if (out.contains("metadata") && out["metadata"].is_object()) out["metadata"].erase("managedFields");
  return out;
}

}  // namespace

FieldSet fields_of(const json& object, ListSemantics lists, FieldScope scope) {
  FieldSet out;
  FieldPath path;
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string& key = it.key();
    if (key == "apiVersion" || key == "kind") continue;
    const bool status = key == "status";
    if ((scope == FieldScope::kAllButStatus && status) || (scope == FieldScope::kStatusOnly && !status)) continue;
    if (key == "metadata" && it->is_object()) {
      path = {"f:metadata"};
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (server_owned_metadata(m.key())) continue;
        path.push_back("f:" + m.key());
        out.insert(path);
        collect_value(m.value(), m.key(), path, out, lists);
        path.pop_back();
      }
      continue;
    }
    path = {"f:" + key};
    out.insert(path);
    collect_value(it.value(), key, path, out, lists);
  }
  return out;
}

json to_fields_v1(const FieldSet& fields) {
  json root = json::object();
  for (const FieldPath& path : fields) {
    json* node = &root;
    for (const std::string& step : path) node = &(*node)[step];
    if (node->is_null()) *node = json::object();
  }
  // A member with members below it carries ".": {} (the apiserver's form for "this field itself, too").
  std::vector<std::pair<json*, FieldPath>> stack = {{&root, {}}};
  while (!stack.empty()) {
    auto [node, path] = stack.back();
    stack.pop_back();
    for (auto it = node->begin(); it != node->end(); ++it) {
      if (it.key() == ".") continue;
      FieldPath child = path;
      child.push_back(it.key());
      if (!it->empty() && fields.count(child)) (*it)["."] = json::object();
      stack.push_back({&*it, child});
    }
  }
  return root;
}

FieldSet from_fields_v1(const json& fields_v1) {
  FieldSet out;
  std::vector<std::pair<const json*, FieldPath>> stack = {{&fields_v1, {}}};
  while (!stack.empty()) {
    auto [node, path] = stack.back();
    stack.pop_back();
    if (!node->is_object()) continue;
    for (auto it = node->begin(); it != node->end(); ++it) {
      if (it.key() == ".") {
        out.insert(path);
        continue;
      }
      FieldPath child = path;
      child.push_back(it.key());
      if (it->empty()) out.insert(child);
      stack.push_back({&*it, child});
    }
  }
  return out;
}

std::optional<json> value_at(const json& object, const FieldPath& path) {
  const json* node = &object;
  for (const std::string& step : path) {
    node = step_into(*node, step);
    if (node == nullptr) return std::nullopt;
  }
  return *node;
}

std::string describe_path(const FieldPath& path) {
  std::string out;
  for (const std::string& step : path) {
    const std::string rest = step.substr(2);
    if (step.rfind("f:", 0) == 0) {
      out += "." + rest;
    } else if (step.rfind("k:", 0) == 0) {
      const json key = json::parse(rest);
      out += "[";
      for (auto it = key.begin(); it != key.end(); ++it) out += it.key() + "=" + it->dump();
      out += "]";
    } else {
      out += "[=" + rest + "]";
    }
  }
  return out;
}

std::vector<ManagedEntry> managed_entries(const json& object) {
  std::vector<ManagedEntry> out;
  const json& list = object.value("metadata", json::object()).value("managedFields", json::array());
  if (!list.is_array()) return out;
  for (const json& e : list) {
    if (!e.is_object() || !e.value("fieldsV1", json()).is_object()) continue;
    const std::string op = e.value("operation", "");
    if (op != "Apply" && op != "Update") continue;
    out.push_back(ManagedEntry{e.value("manager", ""),
                               op == "Apply" ? ManagerOperation::kApply : ManagerOperation::kUpdate,
                               e.value("apiVersion", ""), e.value("subresource", ""), e.value("time", ""),
                               from_fields_v1(e["fieldsV1"])});
  }
  return out;
}

json managed_fields_json(const std::vector<ManagedEntry>& entries) {
  json out = json::array();
  for (const ManagedEntry& e : entries) {
    json entry = {{"manager", e.manager},
                  {"operation", operation_name(e.operation)},
                  {"apiVersion", e.api_version},
                  {"time", e.time},
                  {"fieldsType", "FieldsV1"},
                  {"fieldsV1", to_fields_v1(e.fields)}};
    if (!e.subresource.empty()) entry["subresource"] = e.subresource;
    out.push_back(std::move(entry));
  }
  return out;
}

ApplyOutcome server_side_apply(const json* live, const json& applied, const std::string& manager,
                               const std::string& subresource, ListSemantics lists, FieldScope scope, Force force,
                               const std::string& now) {
  const json config = without_managed_fields(applied);
  const FieldSet applied_fields = fields_of(config, lists, scope);
  const json current = live != nullptr ? without_managed_fields(*live) : json::object();
  std::vector<ManagedEntry> entries = live != nullptr ? managed_entries(*live) : std::vector<ManagedEntry>{};

  ApplyOutcome outcome;
  for (const FieldPath& path : applied_fields) {
    const std::optional<json> wanted = value_at(config, path);
    const std::optional<json> live_value = value_at(current, path);
    if (!wanted || live_value == wanted || !compared_whole(*wanted, live_value, path, lists)) continue;
    for (ManagedEntry& e : entries) {
      const bool self = e.manager == manager && e.operation == ManagerOperation::kApply;
      if (self || e.subresource != subresource || !e.fields.count(path)) continue;
      if (force == Force::kYes) {
        e.fields.erase(path);
      } else {
        outcome.conflicts.push_back({e.manager, e.api_version, path});
      }
    }
  }
  if (!outcome.conflicts.empty()) return outcome;

  ManagedEntry& mine = entry_for(entries, manager, ManagerOperation::kApply, subresource);
  json merged = merge_value(current, config, "", lists);
  // What this manager applied before and applies no more goes, unless another manager owns it (or below it).
  std::vector<FieldPath> dropped;
  for (const FieldPath& path : mine.fields) {
    if (!applied_fields.count(path)) dropped.push_back(path);
  }
  std::sort(dropped.begin(), dropped.end(), [](const FieldPath& a, const FieldPath& b) { return a.size() > b.size(); });
  for (const FieldPath& path : dropped) {
    const bool kept = std::any_of(entries.begin(), entries.end(), [&](const ManagedEntry& e) {
      return &e != &mine && owns_at_or_below(e.fields, path);
    });
    if (!kept) remove_path(merged, path);
  }
  if (mine.fields != applied_fields || mine.time.empty()) mine.time = now;
  mine.fields = applied_fields;
  mine.api_version = config.value("apiVersion", "");
  drop_empty(entries);
  if (!merged.contains("metadata") || !merged["metadata"].is_object()) merged["metadata"] = json::object();
  merged["metadata"]["managedFields"] = managed_fields_json(entries);
  outcome.object = std::move(merged);
  return outcome;
}

json track_update(const json* before, const json& after, const std::string& manager, const std::string& subresource,
                  ListSemantics lists, FieldScope scope, const std::string& now) {
  std::vector<ManagedEntry> entries = before != nullptr ? managed_entries(*before) : std::vector<ManagedEntry>{};
  const json old_object = before != nullptr ? without_managed_fields(*before) : json::object();
  const FieldSet old_fields = fields_of(old_object, lists, scope);
  const FieldSet new_fields = fields_of(after, lists, scope);
  FieldSet changed;
  for (const FieldPath& path : new_fields) {
    const std::optional<json> was = value_at(old_object, path);
    const std::optional<json> is = value_at(after, path);
    if (!was || (compared_whole(*is, was, path, lists) && was != is)) changed.insert(path);
  }
  FieldSet removed;
  for (const FieldPath& path : old_fields) {
    if (!new_fields.count(path)) removed.insert(path);
  }
  for (ManagedEntry& e : entries) {
    for (const FieldPath& path : removed) e.fields.erase(path);
    const bool self = e.manager == manager && e.operation == ManagerOperation::kUpdate && e.subresource == subresource;
    if (self) continue;
    for (const FieldPath& path : changed) e.fields.erase(path);
  }
  if (!manager.empty() && !changed.empty()) {
    ManagedEntry& mine = entry_for(entries, manager, ManagerOperation::kUpdate, subresource);
    mine.fields.insert(changed.begin(), changed.end());
    mine.time = now;
    mine.api_version = after.value("apiVersion", "");
  }
  drop_empty(entries);
  return managed_fields_json(entries);
}

}  // namespace torus::standin
