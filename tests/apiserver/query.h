#pragma once
// The query string and path of a request: decoding, splitting and typed parameters.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace torus::standin {

using QueryParams = std::map<std::string, std::string>;

std::string url_decode(const std::string& text);
QueryParams parse_query(const std::string& query);
std::vector<std::string> split_path(const std::string& path);
// The integer parameter `name`, or `fallback` when absent or empty; ApiError 400 when it is not an integer.
int64_t int_param(const QueryParams& params, const std::string& name, int64_t fallback);
// The parameter `name`, "" when absent.
std::string param(const QueryParams& params, const std::string& name);
bool truthy(const std::string& value);

}  // namespace torus::standin
