#include "common/api/field_scope.h"

#include <algorithm>

namespace torus::api {

std::vector<std::string> operator_only_fields_set(const nlohmann::json& document) {
  std::vector<std::string> out;
  for (std::string_view path : kOperatorOnlyFields) {
    const nlohmann::json* node = &document;
    size_t begin = 0;
    while (node != nullptr && begin <= path.size()) {
      const size_t end = std::min(path.find('.', begin), path.size());
      const std::string key(path.substr(begin, end - begin));
      const auto it = node->is_object() ? node->find(key) : node->end();
      node = node->is_object() && it != node->end() && !it->is_null() ? &*it : nullptr;
      begin = end + 1;
    }
    if (node != nullptr) out.emplace_back(path);
  }
  return out;
}

}  // namespace torus::api
