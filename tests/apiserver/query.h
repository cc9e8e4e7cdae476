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

// How a watch's first events are chosen: the apiserver's streaming lists (KEP-3157, "WatchList"), which client-go
// reflectors (kubectl wait, informers) use from v1.35 on.
enum class InitialEvents {
  kByResourceVersion,  // no sendInitialEvents: synthetic ADDED events only when resourceVersion is "" or "0"
  kSend,               // sendInitialEvents=true: the current state as ADDED, then (with bookmarks) a BOOKMARK
                       // annotated k8s.io/initial-events-end, then changes
  kSkip,               // sendInitialEvents=false: only changes after resourceVersion (or from now)
};

// Validates a list's or a watch's options as the apiserver's ValidateListOptions does (resourceVersionMatch,
// sendInitialEvents) and says how a watch starts; throws 422 Invalid "ListOptions.meta.k8s.io" naming each
// offending parameter, as the apiserver answers.
InitialEvents validate_list_options(const QueryParams& params, bool watch);

}  // namespace torus::standin
