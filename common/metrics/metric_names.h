#pragma once
// Every metric name Torus exposes, declared once. The worker (worker_metrics.cc, goodput_metrics.cc, telemetry.cc)
// and the operator (operator_metrics.cc) register them from here, the operator's progress reads (progress.cc,
// goodput_status.cc, straggler_status.cc) look them up from here, the dashboards' generator
// (dashboards/build_dashboards.py) reads this file and refuses a query of a name it does not declare, and the alert
// rules' test (tests/metrics/rules_test.cc) refuses a rule that reads one. Histograms are named without their
// _bucket/_sum/_count series; counters carry their _total. docs/observability.md says what each means.
//
// One declaration per name, `inline constexpr char kId[] = "name";`: the generator parses this form.

namespace torus::metrics::name {

// ---- a worker rank's (labels job, namespace, rank, attempt and, per family, more) ----
inline constexpr char kWorkerAllreduceBusBandwidthBaselineBytesPerSecond[] =
    "torus_worker_allreduce_bus_bandwidth_baseline_bytes_per_second";
inline constexpr char kWorkerAllreduceBusBandwidthBytesPerSecond[] =
    "torus_worker_allreduce_bus_bandwidth_bytes_per_second";
inline constexpr char kWorkerAllreduceBytesTotal[] = "torus_worker_allreduce_bytes_total";
inline constexpr char kWorkerAllreduceCallsTotal[] = "torus_worker_allreduce_calls_total";
inline constexpr char kWorkerAllreduceSeconds[] = "torus_worker_allreduce_seconds";
inline constexpr char kWorkerBatchSize[] = "torus_worker_batch_size";
inline constexpr char kWorkerCheckpointSeconds[] = "torus_worker_checkpoint_seconds";
inline constexpr char kWorkerCheckpointsTotal[] = "torus_worker_checkpoints_total";
inline constexpr char kWorkerCollectiveSequence[] = "torus_worker_collective_sequence";
inline constexpr char kWorkerCommInitSeconds[] = "torus_worker_comm_init_seconds";
inline constexpr char kWorkerCommWaitSeconds[] = "torus_worker_comm_wait_seconds";
inline constexpr char kWorkerComputeSeconds[] = "torus_worker_compute_seconds";
inline constexpr char kWorkerDataWaitSeconds[] = "torus_worker_data_wait_seconds";
inline constexpr char kWorkerDeviceMemoryBytes[] = "torus_worker_device_memory_bytes";
inline constexpr char kWorkerEpoch[] = "torus_worker_epoch";
inline constexpr char kWorkerGlobalBatchSize[] = "torus_worker_global_batch_size";
inline constexpr char kWorkerGlobalStep[] = "torus_worker_global_step";
inline constexpr char kWorkerGoodputSecondsTotal[] = "torus_worker_goodput_seconds_total";
inline constexpr char kWorkerImageSizePixels[] = "torus_worker_image_size_pixels";
inline constexpr char kWorkerImagesPerSecond[] = "torus_worker_images_per_second";
inline constexpr char kWorkerImagesTotal[] = "torus_worker_images_total";
inline constexpr char kWorkerLastCheckpointEpoch[] = "torus_worker_last_checkpoint_epoch";
inline constexpr char kWorkerLastCheckpointStep[] = "torus_worker_last_checkpoint_step";
inline constexpr char kWorkerLastCheckpointTimestampSeconds[] = "torus_worker_last_checkpoint_timestamp_seconds";
inline constexpr char kWorkerLastProgressTimestampSeconds[] = "torus_worker_last_progress_timestamp_seconds";
inline constexpr char kWorkerLearningRate[] = "torus_worker_learning_rate";
inline constexpr char kWorkerLoss[] = "torus_worker_loss";
inline constexpr char kWorkerLossScale[] = "torus_worker_loss_scale";
inline constexpr char kWorkerPlannedEpochs[] = "torus_worker_planned_epochs";
inline constexpr char kWorkerPlannedSteps[] = "torus_worker_planned_steps";
inline constexpr char kWorkerReplayedStepsTotal[] = "torus_worker_replayed_steps_total";
inline constexpr char kWorkerResidentMemoryBytes[] = "torus_worker_resident_memory_bytes";
inline constexpr char kWorkerResumedFromInfo[] = "torus_worker_resumed_from_info";
inline constexpr char kWorkerResumedStep[] = "torus_worker_resumed_step";
inline constexpr char kWorkerRunInfo[] = "torus_worker_run_info";
inline constexpr char kWorkerSkippedStepsTotal[] = "torus_worker_skipped_steps_total";
inline constexpr char kWorkerStartTimestampSeconds[] = "torus_worker_start_timestamp_seconds";
inline constexpr char kWorkerStepSeconds[] = "torus_worker_step_seconds";
inline constexpr char kWorkerStepsTotal[] = "torus_worker_steps_total";
inline constexpr char kWorkerTargetAccuracy[] = "torus_worker_target_accuracy";
inline constexpr char kWorkerTargetAccuracyReached[] = "torus_worker_target_accuracy_reached";
inline constexpr char kWorkerTrainAccuracy[] = "torus_worker_train_accuracy";
inline constexpr char kWorkerValidationAccuracy[] = "torus_worker_validation_accuracy";
inline constexpr char kWorkerWorldSize[] = "torus_worker_world_size";

// ---- the operator's ----
inline constexpr char kOperatorApiRequestErrorsTotal[] = "torus_operator_api_request_errors_total";
inline constexpr char kOperatorApiRequestsTotal[] = "torus_operator_api_requests_total";
inline constexpr char kOperatorBuildInfo[] = "torus_operator_build_info";
inline constexpr char kOperatorGangRestartsTotal[] = "torus_operator_gang_restarts_total";
inline constexpr char kOperatorJobs[] = "torus_operator_jobs";
inline constexpr char kOperatorLeader[] = "torus_operator_leader";
inline constexpr char kOperatorReconcileErrorsTotal[] = "torus_operator_reconcile_errors_total";
inline constexpr char kOperatorReconcileSeconds[] = "torus_operator_reconcile_seconds";
inline constexpr char kOperatorReconcilesTotal[] = "torus_operator_reconciles_total";
inline constexpr char kOperatorStragglerRank[] = "torus_operator_straggler_rank";
inline constexpr char kOperatorStragglerSlowdown[] = "torus_operator_straggler_slowdown";
inline constexpr char kOperatorTimeToFirstStepSeconds[] = "torus_operator_time_to_first_step_seconds";
inline constexpr char kOperatorTimeToRunningSeconds[] = "torus_operator_time_to_running_seconds";
inline constexpr char kOperatorWorkqueueDepth[] = "torus_operator_workqueue_depth";

// ---- label values the readers select on ----
// torus_worker_allreduce_*'s `level` of a whole all-reduce (its phases are levels of their own): what the operator's
// and the dashboards' bus bandwidth and busiest algorithm read.
inline constexpr char kLevelWholeAllReduce[] = "global";

}  // namespace torus::metrics::name
