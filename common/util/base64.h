#pragma once
// RFC 4648 base64 with padding, as Kubernetes writes it (kubeconfig *-data fields, Secret data, continue tokens).
// One implementation (OpenSSL's EVP) for the operator, its client and the API stand-in.
#include <optional>
#include <string>
#include <string_view>

namespace torus {

std::string base64_encode(std::string_view bytes);
// nullopt unless `text` is base64: length a multiple of 4, the alphabet, '=' padding only at the end.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace torus
