#include "common/api/codec.h"

#include <cerrno>
#include <cmath>
#include <concepts>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>

#include "common/api/yaml.h"
#include "common/util/error.h"

namespace torus::api {
namespace {

using json = nlohmann::json;

// ---- the field list of every struct, written once and used by both the decoder and the encoder ----
// `S` is the struct or the const struct, so one list serves reading (fills it) and writing (reads it).

template <class S, class T>
concept Is = std::same_as<std::remove_const_t<S>, T>;

template <class V, class S>
requires Is<S, OwnerReference>
void describe(V& v, S& x) {
  v("apiVersion", x.api_version);
  v("kind", x.kind);
  v("name", x.name);
  v("uid", x.uid);
  v("controller", x.controller);
  v("blockOwnerDeletion", x.block_owner_deletion);
}

template <class V, class S>
requires Is<S, ObjectMeta>
void describe(V& v, S& x) {
  v("name", x.name);
  v("generateName", x.generate_name);
  v("namespace", x.namespace_);
  v("labels", x.labels);
  v("annotations", x.annotations);
  v("uid", x.uid);
  v("resourceVersion", x.resource_version);
  v("generation", x.generation);
  v("creationTimestamp", x.creation_timestamp);
  v("deletionTimestamp", x.deletion_timestamp);
  v("finalizers", x.finalizers);
  v("ownerReferences", x.owner_references);
  // Server-owned ObjectMeta fields Torus never acts on: accepted from the apiserver, not kept.
  v.tolerate("managedFields");
  v.tolerate("selfLink");
  v.tolerate("deletionGracePeriodSeconds");
}

template <class V, class S>
requires Is<S, GangSpec>
void describe(V& v, S& x) {
  v("workers", x.workers);
  v("processesPerWorker", x.processes_per_worker);
  v("device", x.device);
  v("threadsPerProcess", x.threads_per_process);
  v("image", x.image);
  v("resources", x.resources);
  v("template", x.pod_template);
}

template <class V, class S>
requires Is<S, ModelSpec>
void describe(V& v, S& x) {
  v("arch", x.arch);
  v("widths", x.widths);
  v("stem", x.stem);
  v("inputChannels", x.input_channels);
  v("numClasses", x.num_classes);
  v("pooling", x.pooling);
  v("zeroInitResidual", x.zero_init_residual);
}

template <class V, class S>
requires Is<S, SyntheticSpec>
void describe(V& v, S& x) {
  v("trainImages", x.train_images);
  v("validationImages", x.validation_images);
  v("numClasses", x.num_classes);
}

template <class V, class S>
requires Is<S, DataSpec>
void describe(V& v, S& x) {
  v("dataset", x.dataset);
  v("path", x.path);
  v("imageSize", x.image_size);
  v("loaderThreads", x.loader_threads);
  v("synthetic", x.synthetic);
}

template <class V, class S>
requires Is<S, OptimizerSpec>
void describe(V& v, S& x) {
  v("type", x.type);
  v("momentum", x.momentum);
  v("nesterov", x.nesterov);
  v("weightDecay", x.weight_decay);
  v("noDecayOnNormAndBias", x.no_decay_on_norm_and_bias);
}

template <class V, class S>
requires Is<S, LrPoint>
void describe(V& v, S& x) {
  v("epoch", x.epoch);
  v("lr", x.lr);
}

template <class V, class S>
requires Is<S, LrScheduleSpec>
void describe(V& v, S& x) {
  v("type", x.type);
  v("peak", x.peak);
  v("warmupEpochs", x.warmup_epochs);
  v("initial", x.initial);
  v("final", x.final_lr);
  v("points", x.points);
  v("referenceBatchSize", x.reference_batch_size);
}

template <class V, class S>
requires Is<S, PhaseSpec>
void describe(V& v, S& x) {
  v("fromEpoch", x.from_epoch);
  v("toEpoch", x.to_epoch);
  v("imageSize", x.image_size);
  v("batchSize", x.batch_size);
  v("perRankBatchSize", x.per_rank_batch_size);
}

template <class V, class S>
requires Is<S, AugmentationSpec>
void describe(V& v, S& x) {
  v("flip", x.flip);
  v("cropPadding", x.crop_padding);
  v("randomResizedCropMinScale", x.random_resized_crop_min_scale);
}

template <class V, class S>
requires Is<S, CheckpointSpec>
void describe(V& v, S& x) {
  v("dir", x.dir);
  v("everyEpochs", x.every_epochs);
  v("everySteps", x.every_steps);
  v("keep", x.keep);
}

template <class V, class S>
requires Is<S, TrainingSpec>
void describe(V& v, S& x) {
  v("epochs", x.epochs);
  v("batchSize", x.batch_size);
  v("perRankBatchSize", x.per_rank_batch_size);
  v("optimizer", x.optimizer);
  v("lrSchedule", x.lr_schedule);
  v("labelSmoothing", x.label_smoothing);
  v("precision", x.precision);
  v("phases", x.phases);
  v("rectangularValidation", x.rectangular_validation);
  v("validationImageSize", x.validation_image_size);
  v("targetAccuracy", x.target_accuracy);
  v("seed", x.seed);
  v("augmentation", x.augmentation);
  v("checkpoint", x.checkpoint);
}

template <class V, class S>
requires Is<S, GridSpec>
void describe(V& v, S& x) {
  v("x", x.x);
  v("y", x.y);
}

template <class V, class S>
requires Is<S, AllReduceSpec>
void describe(V& v, S& x) {
  v("algorithm", x.algorithm);
  v("bucketSizeMB", x.bucket_size_mb);
  v("firstBucketSizeMB", x.first_bucket_size_mb);
  v("compression", x.compression);
  v("grid", x.grid);
  v("timeoutSeconds", x.timeout_seconds);
}

template <class V, class S>
requires Is<S, SchedulingPolicy>
void describe(V& v, S& x) {
  v("schedulerName", x.scheduler_name);
  v("podGroup", x.pod_group);
  v("minAvailable", x.min_available);
  v("queue", x.queue);
  v("priorityClass", x.priority_class);
}

template <class V, class S>
requires Is<S, TopologySpec>
void describe(V& v, S& x) {
  v("key", x.key);
  v("placement", x.placement);
}

template <class V, class S>
requires Is<S, RunPolicy>
void describe(V& v, S& x) {
  v("restartPolicy", x.restart_policy);
  v("backoffLimit", x.backoff_limit);
  v("activeDeadlineSeconds", x.active_deadline_seconds);
  v("runningDeadlineSeconds", x.running_deadline_seconds);
  v("ttlSecondsAfterFinished", x.ttl_seconds_after_finished);
  v("cleanPodPolicy", x.clean_pod_policy);
  v("suspend", x.suspend);
  v("managedBy", x.managed_by);
  v("schedulingPolicy", x.scheduling_policy);
  v("topology", x.topology);
}

template <class V, class S>
requires Is<S, TrainingJobSpec>
void describe(V& v, S& x) {
  v("gang", x.gang);
  v("model", x.model);
  v("data", x.data);
  v("training", x.training);
  v("allReduce", x.all_reduce);
  v("runPolicy", x.run_policy);
  v("metricsPort", x.metrics_port);
  v("rendezvousPort", x.rendezvous_port);
}

template <class V, class S>
requires Is<S, Condition>
void describe(V& v, S& x) {
  v("type", x.type);
  v("status", x.status);
  v("reason", x.reason);
  v("message", x.message);
  v("lastTransitionTime", x.last_transition_time);
  v("observedGeneration", x.observed_generation);
}

template <class V, class S>
requires Is<S, WorkerCounts>
void describe(V& v, S& x) {
  v("ready", x.ready);
  v("active", x.active);
  v("succeeded", x.succeeded);
  v("failed", x.failed);
}

template <class V, class S>
requires Is<S, Progress>
void describe(V& v, S& x) {
  v("epoch", x.epoch);
  v("step", x.step);
  v("loss", x.loss);
  v("accuracy", x.accuracy);
  v("imagesPerSecond", x.images_per_second);
  v("etaSeconds", x.eta_seconds);
  v("busBandwidthGBps", x.bus_bandwidth_gbps);
  v("allReduceAlgorithm", x.allreduce_algorithm);
  v("updateTime", x.update_time);
}

template <class V, class S>
requires Is<S, CheckpointRef>
void describe(V& v, S& x) {
  v("path", x.path);
  v("epoch", x.epoch);
  v("step", x.step);
  v("time", x.time);
}

template <class V, class S>
requires Is<S, RankPlacement>
void describe(V& v, S& x) {
  v("rank", x.rank);
  v("worker", x.worker);
  v("localRank", x.local_rank);
  v("pod", x.pod);
  v("node", x.node);
  v("block", x.block);
}

template <class V, class S>
requires Is<S, TrainingJobStatus>
void describe(V& v, S& x) {
  v("phase", x.phase);
  v("conditions", x.conditions);
  v("observedGeneration", x.observed_generation);
  v("attempt", x.attempt);
  v("restarts", x.restarts);
  v("startTime", x.start_time);
  v("completionTime", x.completion_time);
  v("workers", x.workers);
  v("progress", x.progress);
  v("lastCheckpoint", x.last_checkpoint);
  v("ranks", x.ranks);
}

template <class V, class S>
requires Is<S, TrainingJob>
void describe(V& v, S& x) {
  v("apiVersion", x.api_version);
  v("kind", x.kind);
  v("metadata", x.metadata);
  v("spec", x.spec);
  v("status", x.status);
}

template <class T>
concept ApiEnum = std::is_enum_v<T> && requires {
  EnumNames<T>::kValues;
};

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

std::string describe_value(const json& j) {
  std::string text = j.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

std::string json_type_name(const json& j) {
  switch (j.type()) {
    case json::value_t::object:
      return "a map";
    case json::value_t::array:
      return "a list";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::null:
      return "null";
    default:
      return "a value";
  }
}

std::string join(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

// ---- decoding ----

class Decoder {
 public:
  explicit Decoder(FieldErrors& errors) : errors_(errors) {}

  void wrong_type(const std::string& path, const char* expected, const json& j) {
    errors_.push_back(
        {path, std::string("must be ") + expected + ", got " + json_type_name(j) + " " + describe_value(j)});
  }

  void read(const json& j, const std::string& path, bool& out) {
    if (!j.is_boolean()) return wrong_type(path, "a boolean (true or false)", j);
    out = j.get<bool>();
  }

  template <std::integral T>
  requires(!std::same_as<T, bool>) void read(const json& j, const std::string& path, T& out) {
    if (!j.is_number_integer()) return wrong_type(path, "an integer", j);
    const bool fits = j.is_number_unsigned() ? j.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                                             : j.get<int64_t>() >= std::numeric_limits<T>::min() &&
                                                   j.get<int64_t>() <= std::numeric_limits<T>::max();
    if (!fits) {
      errors_.push_back({path, "must fit in " + std::to_string(sizeof(T) * 8) + " bits, got " + describe_value(j)});
      return;
    }
    out = j.get<T>();
  }

  void read(const json& j, const std::string& path, double& out) {
    if (!j.is_number()) return wrong_type(path, "a number", j);
    out = j.get<double>();
  }

  void read(const json& j, const std::string& path, std::string& out) {
    if (!j.is_string()) return wrong_type(path, "a string", j);
    out = j.get<std::string>();
  }

  // Opaque Kubernetes objects (resources, pod template): any map, kept as is.
  void read(const json& j, const std::string& path, json& out) {
    if (!j.is_object()) return wrong_type(path, "a map", j);
    out = j;
  }

  void read(const json& j, const std::string& path, std::map<std::string, std::string>& out) {
    if (!j.is_object()) return wrong_type(path, "a map of strings", j);
    for (const auto& [key, value] : j.items()) {
      std::string s;
      const size_t before = errors_.size();
      read(value, path + "[" + key + "]", s);
      if (errors_.size() == before) out[key] = s;
    }
  }

  template <ApiEnum E>
  void read(const json& j, const std::string& path, E& out) {
    if (!j.is_string()) return wrong_type(path, ("one of " + enum_choices<E>()).c_str(), j);
    auto parsed = parse_enum<E>(j.get<std::string>());
    if (!parsed) {
      errors_.push_back({path, "must be one of " + enum_choices<E>() + ", got " + describe_value(j)});
      return;
    }
    out = *parsed;
  }

  template <class T>
  void read(const json& j, const std::string& path, std::optional<T>& out) {
    if (j.is_null()) return;  // Kubernetes reads null as "not given"
    T value{};
    const size_t before = errors_.size();
    read(j, path, value);
    if (errors_.size() == before) out = std::move(value);
  }

  template <class T>
  void read(const json& j, const std::string& path, std::vector<T>& out) {
    if (j.is_null()) return;
    if (!j.is_array()) return wrong_type(path, "a list", j);
    for (size_t i = 0; i < j.size(); ++i) {
      T item{};
      read(j[i], path + "[" + std::to_string(i) + "]", item);
      out.push_back(std::move(item));
    }
  }

  template <class S>
  requires std::is_class_v<S>
  void read(const json& j, const std::string& path, S& out) {
    if (j.is_null()) return;
    if (!j.is_object()) return wrong_type(path, "a map", j);
    FieldVisitor visitor{*this, j, path, {}};
    describe(visitor, out);
    for (const auto& [key, value] : j.items()) {
      if (!visitor.seen.count(key)) errors_.push_back({join(path, key), "unknown field"});
    }
  }

 private:
  struct FieldVisitor {
    Decoder& decoder;
    const json& object;
    const std::string& path;
    std::set<std::string> seen;

    template <class T>
    void operator()(const char* name, T& member) {
      seen.insert(name);
      auto it = object.find(name);
      // Kubernetes reads a null field as "not given".
      if (it != object.end() && !it->is_null()) decoder.read(*it, join(path, name), member);
    }
    void tolerate(const char* name) { seen.insert(name); }
  };

  FieldErrors& errors_;
};

// ---- encoding ----

json encode(const bool& v) { return v; }
template <std::integral T>
requires(!std::same_as<T, bool>) json encode(const T& v) { return v; }
json encode(const double& v) { return v; }
json encode(const std::string& v) { return v; }
json encode(const json& v) { return v; }
json encode(const std::map<std::string, std::string>& v) { return json(v); }
template <ApiEnum E>
json encode(const E& v) {
  return std::string(to_string(v));
}
template <class T>
json encode(const std::vector<T>& v);
template <class S>
requires std::is_class_v<S> json encode(const S& s);

// Unset, empty and all-default members are left out, so that decode(encode(x)) == x and manifests stay short.
template <class T>
bool omitted(const T& v) {
  if constexpr (IsOptional<T>::value) {
    return !v.has_value();
  } else if constexpr (std::same_as<T, std::string> || IsVector<T>::value ||
                       std::same_as<T, std::map<std::string, std::string>>) {
    return v.empty();
  } else if constexpr (std::same_as<T, json>) {
    return v.is_null();
  } else if constexpr (std::is_class_v<T>) {
    return v == T{};
  } else {
    return false;
  }
}

struct EncodeVisitor {
  json& out;
  template <class T>
  void operator()(const char* name, const T& member) {
    if (omitted(member)) return;
    if constexpr (IsOptional<T>::value) {
      out[name] = encode(*member);
    } else {
      out[name] = encode(member);
    }
  }
  void tolerate(const char*) {}
};

template <class T>
json encode(const std::vector<T>& v) {
  json out = json::array();
  for (const auto& item : v) out.push_back(encode(item));
  return out;
}

template <class S>
requires std::is_class_v<S> json encode(const S& s) {
  json out = json::object();
  EncodeVisitor visitor{out};
  describe(visitor, s);
  return out;
}

Decoded decode_parsed(const json& document, FieldErrors errors) {
  Decoded out;
  out.job.api_version.clear();
  out.job.kind.clear();
  Decoder decoder(out.errors);
  out.errors = std::move(errors);
  if (!document.is_object()) {
    out.errors.push_back({"", "a TrainingJob must be a map, got " + json_type_name(document)});
    return out;
  }
  decoder.read(document, "", out.job);
  return out;
}

}  // namespace

Decoded decode_json(const json& document) { return decode_parsed(document, {}); }

Decoded decode_yaml(std::string_view text) {
  FieldErrors errors;
  SourceMap sources;
  json document = parse_yaml_document(text, errors, &sources);
  Decoded out;
  if (!errors.empty() && document.is_null()) {
    out.errors = std::move(errors);
  } else {
    out = decode_parsed(document, std::move(errors));
  }
  sources.locate(out.errors);
  out.sources = std::move(sources);
  return out;
}

Decoded decode_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    Decoded out;
    out.errors.push_back({"", "cannot read file: " + std::string(std::strerror(errno))});
    return out;
  }
  std::ostringstream text;
  text << in.rdbuf();
  const bool is_json = path.size() > 5 && path.substr(path.size() - 5) == ".json";
  if (!is_json) return decode_yaml(text.str());
  const json document = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) {
    Decoded out;
    out.errors.push_back({"", "malformed JSON"});
    return out;
  }
  return decode_json(document);
}

TrainingJob from_json(const json& document) {
  Decoded decoded = decode_json(document);
  if (!decoded.errors.empty()) throw_field_errors(decoded.errors, "");
  return std::move(decoded.job);
}

TrainingJob from_yaml(std::string_view text, std::string_view source) {
  Decoded decoded = decode_yaml(text);
  if (!decoded.errors.empty()) throw_field_errors(decoded.errors, source);
  return std::move(decoded.job);
}

json to_json(const TrainingJob& job) { return encode(job); }
json status_to_json(const TrainingJobStatus& status) { return encode(status); }
json spec_to_json(const TrainingJobSpec& spec) { return encode(spec); }

std::string to_yaml(const TrainingJob& job) { return json_to_yaml(to_json(job)); }

}  // namespace torus::api
