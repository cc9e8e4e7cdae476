#pragma once
// Decoding of the few Kubernetes protobuf bodies kubectl's generators send (`kubectl create namespace|configmap|
// secret|serviceaccount NAME`): the "k8s\0" envelope (runtime.Unknown) and the fields of those kinds and of
// ObjectMeta that such objects carry. Anything else is refused with 415, as a server without the type would.
#include <nlohmann/json.hpp>
#include <string>

namespace torus::standin {

// Throws ApiError 415 for other kinds, 400 for a malformed body.
nlohmann::json decode_protobuf_object(const std::string& body);

}  // namespace torus::standin
