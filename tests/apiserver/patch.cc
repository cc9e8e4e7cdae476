#include "tests/apiserver/patch.h"

#include <algorithm>
#include <map>

#include "tests/apiserver/api_error.h"

namespace torus::standin {

using json = nlohmann::json;

// patchStrategy/patchMergeKey of the built-in types' list fields, by field name. "ports" is keyed by
// containerPort in containers and by port in services: decided per list by what its items carry.
ListRule list_rule(const std::string& field, const json& sample_items) {
  static const std::map<std::string, std::string> by_key = {{"containers", "name"},
                                                            {"initContainers", "name"},
                                                            {"ephemeralContainers", "name"},
                                                            {"env", "name"},
                                                            {"volumes", "name"},
                                                            {"imagePullSecrets", "name"},
                                                            {"volumeMounts", "mountPath"},
                                                            {"volumeDevices", "devicePath"},
                                                            {"conditions", "type"},
                                                            {"ownerReferences", "uid"},
                                                            {"hostAliases", "ip"},
                                                            {"topologySpreadConstraints", "topologyKey"},
                                                            {"resourceClaims", "name"},
                                                            {"addresses", "type"},
                                                            {"taints", "key"}};
  if (field == "finalizers") return {ListStrategy::kMergePrimitives, ""};
  if (field == "ports") {
    for (const json& item : sample_items) {
      if (item.is_object() && item.contains("containerPort")) return {ListStrategy::kMergeByKey, "containerPort"};
    }
    return {ListStrategy::kMergeByKey, "port"};
  }
  auto it = by_key.find(field);
  if (it == by_key.end()) return {ListStrategy::kReplace, ""};
  return {ListStrategy::kMergeByKey, it->second};
}

namespace {

bool is_directive(const std::string& key) { return !key.empty() && key[0] == '$'; }

json strip_directives(const json& value) {
  if (value.is_object()) {
    json out = json::object();
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!is_directive(it.key())) out[it.key()] = strip_directives(it.value());
    }
    return out;
  }
  if (value.is_array()) {
    json out = json::array();
    for (const json& item : value) {
      if (item.is_object() && item.value("$patch", "") == "delete") continue;
      out.push_back(strip_directives(item));
    }
    return out;
  }
  return value;
}

json merge_map(const json& original, const json& patch);

// Orders `items` as `order` lists them (by merge key or value); items not listed keep their relative order at the
// end, as the apiserver does for $setElementOrder.
json apply_order(const json& items, const json& order, const ListRule& rule) {
  if (!order.is_array()) return items;
  json sorted = json::array();
  std::vector<bool> used(items.size(), false);
  for (const json& wanted : order) {
    for (size_t i = 0; i < items.size(); ++i) {
      if (used[i]) continue;
      bool same = rule.strategy == ListStrategy::kMergeByKey
                      ? items[i].is_object() && wanted.is_object() &&
                            items[i].value(rule.key, json()) == wanted.value(rule.key, json())
                      : items[i] == wanted;
      if (same) {
        sorted.push_back(items[i]);
        used[i] = true;
        break;
      }
    }
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (!used[i]) sorted.push_back(items[i]);
  }
  return sorted;
}

json merge_keyed_list(const json& original, const json& patch, const std::string& key) {
  json result = original.is_array() ? original : json::array();
  for (const json& item : patch) {
    if (!item.is_object()) throw bad_request("strategic merge patch: list items of a keyed list must be objects");
    if (item.value("$patch", "") == "replace") return strip_directives(patch);
    if (!item.contains(key)) {
      throw bad_request("map: " + item.dump() + " does not contain declared merge key: " + key);
    }
    auto match = std::find_if(result.begin(), result.end(), [&](const json& existing) {
      return existing.is_object() && existing.value(key, json()) == item[key];
    });
    if (item.value("$patch", "") == "delete") {
      if (match != result.end()) result.erase(match);
    } else if (match != result.end()) {
      *match = merge_map(*match, item);
    } else {
      result.push_back(strip_directives(item));
    }
  }
  return result;
}

json merge_primitive_list(const json& original, const json& patch) {
  json result = original.is_array() ? original : json::array();
  for (const json& item : patch) {
    if (std::find(result.begin(), result.end(), item) == result.end()) result.push_back(item);
  }
  return result;
}

json merge_list(const std::string& field, const json& original, const json& patch, const json& order,
                const json& deletions) {
  json sample = original.is_array() ? original : json::array();
  for (const json& item : patch) sample.push_back(item);
  ListRule rule = list_rule(field, sample);
  json result;
  switch (rule.strategy) {
    case ListStrategy::kReplace:
      return strip_directives(patch);
    case ListStrategy::kMergeByKey:
      result = merge_keyed_list(original, patch, rule.key);
      break;
    case ListStrategy::kMergePrimitives:
      result = merge_primitive_list(original, patch);
      break;
  }
  if (deletions.is_array()) {
    json kept = json::array();
    for (const json& item : result) {
      if (std::find(deletions.begin(), deletions.end(), item) == deletions.end()) kept.push_back(item);
    }
    result = kept;
  }
  return apply_order(result, order, rule);
}

json merge_map(const json& original, const json& patch) {
  if (!patch.is_object()) return patch;
  std::string directive = patch.value("$patch", "");
  if (directive == "replace") return strip_directives(patch);
  json result = original.is_object() ? original : json::object();
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string& key = it.key();
    const json& value = it.value();
    if (is_directive(key)) continue;
    if (value.is_null()) {
      result.erase(key);
    } else if (value.is_object()) {
      if (value.value("$patch", "") == "delete") {
        result.erase(key);
      } else {
        result[key] = merge_map(result.contains(key) ? result[key] : json(), value);
      }
    } else if (value.is_array()) {
      json order = patch.value("$setElementOrder/" + key, json());
      json deletions = patch.value("$deleteFromPrimitiveList/" + key, json());
      result[key] = merge_list(key, result.contains(key) ? result[key] : json(), value, order, deletions);
    } else {
      result[key] = value;
    }
  }
  // Directives for list fields the patch does not otherwise touch.
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string& key = it.key();
    const std::string del = "$deleteFromPrimitiveList/";
    if (key.rfind(del, 0) == 0) {
      std::string field = key.substr(del.size());
      if (!patch.contains(field) && result.contains(field)) {
        result[field] = merge_list(field, result[field], json::array(), json(), it.value());
      }
    }
  }
  if (patch.contains("$retainKeys") && patch["$retainKeys"].is_array()) {
    json kept = json::object();
    for (const json& k : patch["$retainKeys"]) {
      if (k.is_string() && result.contains(k.get<std::string>()))
        kept[k.get<std::string>()] = result[k.get<std::string>()];
    }
    result = kept;
  }
  return result;
}

}  // namespace

PatchType patch_type_from_content_type(const std::string& content_type) {
  std::string base = content_type.substr(0, content_type.find(';'));
  if (base == "application/merge-patch+json") return PatchType::kMerge;
  if (base == "application/json-patch+json") return PatchType::kJsonPatch;
  if (base == "application/strategic-merge-patch+json") return PatchType::kStrategicMerge;
  if (base == "application/apply-patch+yaml") return PatchType::kApply;
  throw unsupported_media_type(content_type);
}

json strategic_merge(const json& original, const json& patch) {
  if (!patch.is_object()) throw bad_request("strategic merge patch: the patch must be a JSON object");
  return merge_map(original, patch);
}

json apply_patch(PatchType type, const json& original, const json& patch) {
  switch (type) {
    case PatchType::kMerge: {
      if (!patch.is_object()) throw bad_request("merge patch: the patch must be a JSON object");
      json result = original;
      result.merge_patch(patch);
      return result;
    }
    case PatchType::kJsonPatch:
      if (!patch.is_array()) throw bad_request("json patch: the patch must be a JSON array of operations");
      try {
        return original.patch(patch);
      } catch (const json::exception& e) {
        throw ApiError(422, "Invalid",
                       std::string("the server rejected our request due to an error in our request: ") + e.what());
      }
    case PatchType::kStrategicMerge:
      return strategic_merge(original, patch);
    case PatchType::kApply:
      break;
  }
  throw unsupported_media_type("application/apply-patch+yaml (server-side apply is not supported by the stand-in)");
}

}  // namespace torus::standin
