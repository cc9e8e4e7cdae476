#pragma once
// Discovery and OpenAPI documents, built from the registry so CRDs appear as soon as they are created.
// kubectl 1.32 asks for aggregated discovery (apidiscovery.k8s.io/v2) and falls back to these legacy documents
// (APIVersions, APIGroupList, APIResourceList) when the server answers plain application/json.
#include <nlohmann/json.hpp>
#include <string>

#include "tests/apiserver/resources.h"

namespace torus::standin {

json version_info();
json api_versions();                                                 // GET /api
json api_group_list(const Registry& registry);                       // GET /apis
json api_group(const Registry& registry, const std::string& group);  // GET /apis/<group>; null when unknown
json api_resource_list(const Registry& registry, const std::string& group, const std::string& version);  // or null

// GET /openapi/v3: one entry per group version. Each document lists the PATCH operations with their
// x-kubernetes-group-version-kind and the `fieldValidation` parameter, which is how kubectl decides it can leave
// validation to the server (--validate=strict sends fieldValidation=Strict), plus the custom resources' schemas.
json openapi_v3_root(const Registry& registry);
json openapi_v3_document(const Registry& registry, const std::string& group, const std::string& version);  // or null

}  // namespace torus::standin
