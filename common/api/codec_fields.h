#pragma once
// The field list of every TrainingJob struct, written once and used by both the decoder (codec_decode.cc) and the
// encoder (codec_encode.cc). Internal to the codec: include codec.h instead.
#include <concepts>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "common/api/training_job.h"

namespace torus::api::codec {

using json = nlohmann::json;

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
  v("volumeClaimTemplate", x.volume_claim_template);
  v("resumeFrom", x.resume_from);
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
requires Is<S, ResumePoint>
void describe(V& v, S& x) {
  v("attempt", x.attempt);
  v("step", x.step);
  v("path", x.path);
  v("run", x.run);
  v("reason", x.reason);
  v("time", x.time);
}

template <class V, class S>
requires Is<S, GoodputSeconds>
void describe(V& v, S& x) {
  v("startup", x.startup);
  v("commInit", x.comm_init);
  v("restore", x.restore);
  v("training", x.training);
  v("dataWait", x.data_wait);
  v("commWait", x.comm_wait);
  v("evaluation", x.evaluation);
  v("checkpoint", x.checkpoint);
}

template <class V, class S>
requires Is<S, Goodput>
void describe(V& v, S& x) {
  v("ratio", x.ratio);
  v("wallSeconds", x.wall_seconds);
  v("seconds", x.seconds);
  v("schedulingSeconds", x.scheduling_seconds);
  v("lostWorkSeconds", x.lost_work_seconds);
  v("lostSteps", x.lost_steps);
  v("stepSeconds", x.step_seconds);
  v("slowestCheckpointSeconds", x.slowest_checkpoint_seconds);
  v("attempt", x.attempt);
  v("lastStep", x.last_step);
  v("earlierAttempts", x.earlier_attempts);
  v("updateTime", x.update_time);
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
  v("disruptions", x.disruptions);
  v("startTime", x.start_time);
  v("completionTime", x.completion_time);
  v("workers", x.workers);
  v("progress", x.progress);
  v("lastCheckpoint", x.last_checkpoint);
  v("resumedFrom", x.resumed_from);
  v("run", x.run);
  v("ranks", x.ranks);
  v("goodput", x.goodput);
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

}  // namespace torus::api::codec
