#pragma once
// Server-side printing: the meta.k8s.io/v1 Table kubectl asks for (`Accept: application/json;as=Table;...`), with
// the columns kubectl shows for pods and the additionalPrinterColumns of custom resources.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/apiserver/store.h"

namespace torus::standin {

enum class TableObjects { kNone, kMetadata, kFull };  // includeObject=None|Metadata|Object

json to_table(const ResourceType& type, const std::vector<ObjectPtr>& objects, TableObjects include);

// Evaluates the JSONPath subset printer columns use: `.a.b`, `.list[0].x`, `.list[?(@.type=="Ready")].status`.
json evaluate_json_path(const json& object, const std::string& path);

// "5s", "3m", "2d4h": kubectl's age format.
std::string human_age(const std::string& rfc3339_timestamp);

}  // namespace torus::standin
