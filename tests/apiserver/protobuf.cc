#include "tests/apiserver/protobuf.h"

#include <cstdint>
#include <functional>

#include "common/util/base64.h"
#include "tests/apiserver/api_error.h"

namespace torus::standin {

namespace {

using json = nlohmann::json;

// A protobuf wire-format reader (varints and length-delimited fields are all these messages use).
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool done() const { return at_ >= data_.size(); }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) malformed();
      uint8_t byte = static_cast<uint8_t>(data_[at_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    malformed();
  }
  std::string_view bytes() {
    uint64_t size = varint();
    if (size > data_.size() - at_) malformed();
    std::string_view out = data_.substr(at_, size);
    at_ += size;
    return out;
  }
  // Calls `field(number, reader_of_value)` for length-delimited fields and `scalar(number, value)` for varints.
  void fields(const std::function<void(int, std::string_view)>& field,
              const std::function<void(int, uint64_t)>& scalar = nullptr) {
    while (!done()) {
      uint64_t key = varint();
      int number = static_cast<int>(key >> 3);
      switch (key & 7) {
        case 0: {
          uint64_t v = varint();
          if (scalar) scalar(number, v);
          break;
        }
        case 2:
          field(number, bytes());
          break;
        case 1:
          skip(8);
          break;
        case 5:
          skip(4);
          break;
        default:
          malformed();
      }
    }
  }

 private:
  void skip(size_t n) {
    if (n > data_.size() - at_) malformed();
    at_ += n;
  }
  [[noreturn]] static void malformed() { throw bad_request("the protobuf request body is malformed"); }
  std::string_view data_;
  size_t at_ = 0;
};

std::string text(std::string_view v) { return std::string(v); }

// map<string, string|bytes> entries: key = 1, value = 2.
void map_entry(std::string_view entry, json& into, bool value_is_bytes) {
  std::string key;
  std::string value;
  Reader(entry).fields([&](int n, std::string_view v) {
    if (n == 1) key = text(v);
    if (n == 2) value = value_is_bytes ? base64_encode(v) : text(v);
  });
  into[key] = value;
}

json owner_reference(std::string_view data) {
  json ref = json::object();
  Reader(data).fields(
      [&](int n, std::string_view v) {
        if (n == 1) ref["kind"] = text(v);
        if (n == 3) ref["name"] = text(v);
        if (n == 4) ref["uid"] = text(v);
        if (n == 5) ref["apiVersion"] = text(v);
      },
      [&](int n, uint64_t v) {
        if (n == 6) ref["controller"] = v != 0;
        if (n == 7) ref["blockOwnerDeletion"] = v != 0;
      });
  return ref;
}

json object_meta(std::string_view data) {
  json meta = json::object();
  Reader(data).fields([&](int n, std::string_view v) {
    switch (n) {
      case 1:
        meta["name"] = text(v);
        break;
      case 2:
        meta["generateName"] = text(v);
        break;
      case 3:
        meta["namespace"] = text(v);
        break;
      case 6:
        meta["resourceVersion"] = text(v);
        break;
      case 11:
        map_entry(v, meta["labels"], false);
        break;
      case 12:
        map_entry(v, meta["annotations"], false);
        break;
      case 13:
        meta["ownerReferences"].push_back(owner_reference(v));
        break;
      case 14:
        meta["finalizers"].push_back(text(v));
        break;
      default:
        break;  // server-owned fields (uid, timestamps, managedFields) are ignored on writes anyway
    }
  });
  for (const char* key : {"name", "generateName", "namespace", "resourceVersion"}) {
    if (meta.contains(key) && meta[key] == "") meta.erase(key);
  }
  return meta;
}

json decode_kind(const std::string& kind, std::string_view raw) {
  json object = {{"kind", kind}, {"apiVersion", "v1"}};
  Reader(raw).fields(
      [&](int n, std::string_view v) {
        if (n == 1) {
          object["metadata"] = object_meta(v);
        } else if (kind == "ConfigMap" && n == 2) {
          map_entry(v, object["data"], false);
        } else if (kind == "ConfigMap" && n == 3) {
          map_entry(v, object["binaryData"], true);
        } else if (kind == "Secret" && n == 2) {
          map_entry(v, object["data"], true);
        } else if (kind == "Secret" && n == 3) {
          object["type"] = text(v);
        } else if (kind == "Secret" && n == 4) {
          map_entry(v, object["stringData"], false);
        }
      },
      [&](int n, uint64_t v) {
        if ((kind == "ConfigMap" && n == 4) || (kind == "Secret" && n == 5)) object["immutable"] = v != 0;
      });
  return object;
}

// metav1.DeleteOptions: what client-go sends with a DELETE (Helm's release storage deletes its Secret so).
json delete_options(std::string_view raw) {
  json options = {{"kind", "DeleteOptions"}, {"apiVersion", "meta.k8s.io/v1"}};
  Reader(raw).fields(
      [&](int n, std::string_view v) {
        if (n == 2) {
          json preconditions = json::object();
          Reader(v).fields([&](int m, std::string_view w) {
            if (m == 1) preconditions["uid"] = text(w);
            if (m == 2) preconditions["resourceVersion"] = text(w);
          });
          options["preconditions"] = preconditions;
        } else if (n == 4) {
          options["propagationPolicy"] = text(v);
        } else if (n == 5) {
          options["dryRun"].push_back(text(v));
        }
      },
      [&](int n, uint64_t v) {
        if (n == 1) options["gracePeriodSeconds"] = static_cast<int64_t>(v);
        if (n == 3) options["orphanDependents"] = v != 0;
      });
  return options;
}

}  // namespace

json decode_protobuf_object(const std::string& body) {
  static const std::string magic("k8s\0", 4);
  if (body.compare(0, magic.size(), magic) != 0) throw bad_request("protobuf body without the k8s envelope");
  std::string api_version;
  std::string kind;
  std::string_view raw;
  std::string_view payload(body);
  Reader(payload.substr(magic.size())).fields([&](int n, std::string_view v) {
    if (n == 1) {
      Reader(v).fields([&](int m, std::string_view w) {
        if (m == 1) api_version = text(w);
        if (m == 2) kind = text(w);
      });
    }
    if (n == 2) raw = v;
  });
  if (kind == "DeleteOptions" && (api_version == "v1" || api_version == "meta.k8s.io/v1")) return delete_options(raw);
  if (kind == "Eviction" && (api_version == "policy/v1" || api_version == "policy/v1beta1")) {
    // policy Eviction: metadata = 1, deleteOptions = 2 (what `kubectl drain` posts to pods/eviction).
    json eviction = {{"kind", kind}, {"apiVersion", api_version}};
    Reader(raw).fields([&](int n, std::string_view v) {
      if (n == 1) eviction["metadata"] = object_meta(v);
      if (n == 2) eviction["deleteOptions"] = delete_options(v);
    });
    return eviction;
  }
  bool known = api_version == "v1" &&
               (kind == "Namespace" || kind == "ConfigMap" || kind == "Secret" || kind == "ServiceAccount");
  if (!known) {
    throw ApiError(415, "UnsupportedMediaType",
                   "the Kubernetes API stand-in reads protobuf only for v1 Namespace, ConfigMap, Secret, "
                   "ServiceAccount, DeleteOptions and policy Eviction, not " +
                       api_version + " " + kind + "; send JSON (kubectl create -f, apply)");
  }
  return decode_kind(kind, raw);
}

}  // namespace torus::standin
