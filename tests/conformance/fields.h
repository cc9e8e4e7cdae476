#pragma once
// One row per leaf field of the TrainingJob schema (crds/trainingjobs.torus.dev.yaml): which launcher it applies
// to, and the test that shows its effect. fields_test fails when a schema field has no row, a row names no schema
// field, or a row's test does not exist. docs/trainingjob.md ("Where each field acts") is the prose of this table.
#include <array>
#include <string_view>

namespace torus::conformance {

// kBoth: `torus run` and the operator's pods (the worker reads it from the job file either way).
// kOperator: only the operator acts on it; `torus run` runs processes on this machine and has nothing to apply it to.
enum class Launchers { kBoth, kOperator };
// How the named test observes the effect: the real binaries from outside (exit code, summary, logs, checkpoint files,
// the operator's objects on the API stand-in), or in-process through the same functions the binaries call.
enum class Evidence { kBinaries, kInProcess };

struct FieldRow {
  std::string_view path;  // list elements as "[]"
  Launchers launchers;
  Evidence evidence;
  std::string_view test;  // "Suite.Name"
};

using L = Launchers;
using E = Evidence;

inline constexpr auto kFields = std::to_array<FieldRow>({
    {"spec.gang.workers", L::kBoth, E::kBinaries, "TorusRun.OneTwoAndFourWorkersLearnTheSame"},
    {"spec.gang.processesPerWorker", L::kBoth, E::kBinaries, "Conformance.ProcessesPerWorkerIsRanksPerWorker"},
    {"spec.gang.device", L::kBoth, E::kInProcess, "Planner.GpuWorkersAskForGpusAndOnePodPerNode"},
    {"spec.gang.threadsPerProcess", L::kBoth, E::kBinaries,
     "Conformance.RankZeroSaysWhatItRunsAndEveryRankNamesItsOverride"},
    {"spec.gang.image", L::kOperator, E::kInProcess, "OperatorConformance.ImageAndPortsReachThePodsAndTheService"},
    {"spec.gang.resources", L::kOperator, E::kInProcess, "Planner.GpuWorkersAskForGpusAndOnePodPerNode"},
    {"spec.gang.template", L::kOperator, E::kInProcess, "Planner.UserTemplateIsMergedButGangFieldsWin"},
    {"spec.model.arch", L::kBoth, E::kBinaries, "Conformance.ParameterCountsFollowTheModel"},
    {"spec.model.widths", L::kBoth, E::kBinaries, "Conformance.ParameterCountsFollowTheModel"},
    {"spec.model.stem", L::kBoth, E::kBinaries, "Conformance.ParameterCountsFollowTheModel"},
    {"spec.model.inputChannels", L::kBoth, E::kBinaries, "Conformance.ParameterCountsFollowTheModel"},
    {"spec.model.numClasses", L::kBoth, E::kBinaries, "Conformance.ParameterCountsFollowTheModel"},
    {"spec.model.pooling", L::kBoth, E::kBinaries, "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.model.zeroInitResidual", L::kBoth, E::kBinaries, "Conformance.ZeroInitResidualZeroesEveryBlocksLastScale"},
    {"spec.data.dataset", L::kBoth, E::kBinaries, "Conformance.AFailingRanksOwnErrorIsTheSummarysReason"},
    {"spec.data.path", L::kBoth, E::kBinaries, "TorusRun.AlwaysFailingWorkerExhaustsTheBackoffLimit"},
    {"spec.data.imageSize", L::kBoth, E::kBinaries, "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.data.loaderThreads", L::kBoth, E::kBinaries,
     "Conformance.RankZeroSaysWhatItRunsAndEveryRankNamesItsOverride"},
    {"spec.data.synthetic.trainImages", L::kBoth, E::kBinaries,
     "Conformance.StepsFollowTheBatchesAndCheckpointsTheirSchedule"},
    {"spec.data.synthetic.validationImages", L::kBoth, E::kBinaries,
     "Conformance.EvaluationFieldsChangeWhatIsMeasured"},
    {"spec.data.synthetic.numClasses", L::kBoth, E::kBinaries, "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.epochs", L::kBoth, E::kBinaries, "Conformance.StepsFollowTheBatchesAndCheckpointsTheirSchedule"},
    {"spec.training.batchSize", L::kBoth, E::kBinaries, "Conformance.StepsFollowTheBatchesAndCheckpointsTheirSchedule"},
    {"spec.training.perRankBatchSize", L::kBoth, E::kBinaries,
     "Conformance.StepsFollowTheBatchesAndCheckpointsTheirSchedule"},
    {"spec.training.optimizer.type", L::kBoth, E::kBinaries, "Conformance.AnOptimizerOtherThanSgdIsRefused"},
    {"spec.training.optimizer.momentum", L::kBoth, E::kBinaries, "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.optimizer.nesterov", L::kBoth, E::kBinaries, "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.optimizer.weightDecay", L::kBoth, E::kBinaries,
     "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.optimizer.noDecayOnNormAndBias", L::kBoth, E::kBinaries,
     "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.lrSchedule.type", L::kBoth, E::kBinaries, "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.lrSchedule.peak", L::kBoth, E::kBinaries, "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.lrSchedule.warmupEpochs", L::kBoth, E::kBinaries,
     "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.lrSchedule.initial", L::kBoth, E::kBinaries, "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.lrSchedule.final", L::kBoth, E::kBinaries, "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.lrSchedule.points[].epoch", L::kBoth, E::kBinaries,
     "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.lrSchedule.points[].lr", L::kBoth, E::kBinaries,
     "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.lrSchedule.referenceBatchSize", L::kBoth, E::kBinaries,
     "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.labelSmoothing", L::kBoth, E::kBinaries, "Conformance.EachLearningFieldChangesWhatIsLearned"},
    // The effect: each rank's trainer exports the dtype it trains in (a real `torus run` of the worker's main on the
    // pretend device; the CPU engine's refusal is Conformance.BadCombinationsAreRefusedBeforeAnythingStarts).
    {"spec.training.precision", L::kBoth, E::kBinaries,
     "PretendDeviceRun.HalfPrecisionJobsTrainInTheirDtypeOnBothRanksAsTheTrainerExports"},
    {"spec.training.phases[].fromEpoch", L::kBoth, E::kBinaries,
     "Conformance.StepsFollowTheBatchesAndCheckpointsTheirSchedule"},
    {"spec.training.phases[].toEpoch", L::kBoth, E::kBinaries,
     "Conformance.StepsFollowTheBatchesAndCheckpointsTheirSchedule"},
    {"spec.training.phases[].imageSize", L::kBoth, E::kBinaries, "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.phases[].batchSize", L::kBoth, E::kBinaries,
     "Conformance.StepsFollowTheBatchesAndCheckpointsTheirSchedule"},
    {"spec.training.phases[].perRankBatchSize", L::kBoth, E::kBinaries,
     "Conformance.StepsFollowTheBatchesAndCheckpointsTheirSchedule"},
    {"spec.training.rectangularValidation", L::kBoth, E::kBinaries,
     "Conformance.ImageFolderClassesDefaultToItsClassFolders"},
    {"spec.training.validationImageSize", L::kBoth, E::kBinaries, "Conformance.EvaluationFieldsChangeWhatIsMeasured"},
    {"spec.training.targetAccuracy", L::kBoth, E::kInProcess,
     "WorkerMain.TargetAccuracyStopsAtTheFirstEvaluationThatReachesIt"},
    {"spec.training.seed", L::kBoth, E::kBinaries, "Conformance.SeedInitializesTheWeights"},
    {"spec.training.augmentation.flip", L::kBoth, E::kBinaries, "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.augmentation.cropPadding", L::kBoth, E::kBinaries,
     "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.augmentation.randomResizedCropMinScale", L::kBoth, E::kBinaries,
     "Conformance.EachLearningFieldChangesWhatIsLearned"},
    {"spec.training.checkpoint.dir", L::kBoth, E::kBinaries,
     "TorusRun.SigkilledWorkerIsFollowedByAttemptOneFromTheCheckpoint"},
    {"spec.training.checkpoint.everyEpochs", L::kBoth, E::kBinaries,
     "Conformance.StepsFollowTheBatchesAndCheckpointsTheirSchedule"},
    {"spec.training.checkpoint.everySteps", L::kBoth, E::kInProcess,
     "WorkerMain.EveryStepsAloneCheckpointsByStepsOnly"},
    {"spec.training.checkpoint.keep", L::kBoth, E::kBinaries,
     "Conformance.StepsFollowTheBatchesAndCheckpointsTheirSchedule"},
    {"spec.training.checkpoint.resumeFrom", L::kBoth, E::kBinaries,
     "TorusRun.TwoRunsInARowBothTrainFromStepZeroAndResumeContinuesARun"},
    {"spec.training.checkpoint.volumeClaimTemplate", L::kOperator, E::kInProcess,
     "CheckpointStorage.AClaimTemplateMakesAClaimOwnedByTheJobMountedOnWorkerZero"},
    {"spec.allReduce.algorithm", L::kBoth, E::kBinaries, "Conformance.AllReduceAlgorithmIsWhatRuns"},
    {"spec.allReduce.bucketSizeMB", L::kBoth, E::kBinaries, "Conformance.BucketSizesAreTheBytesPerAllReduce"},
    {"spec.allReduce.firstBucketSizeMB", L::kBoth, E::kBinaries, "Conformance.BucketSizesAreTheBytesPerAllReduce"},
    {"spec.allReduce.compression", L::kBoth, E::kBinaries, "Conformance.Fp16CompressionHalvesTheBytesPerAllReduce"},
    {"spec.allReduce.grid.x", L::kBoth, E::kBinaries, "Conformance.Torus2dRunsOnTheJobsGrid"},
    {"spec.allReduce.grid.y", L::kBoth, E::kBinaries, "Conformance.Torus2dRunsOnTheJobsGrid"},
    {"spec.allReduce.timeoutSeconds", L::kBoth, E::kBinaries,
     "Conformance.TimeoutSecondsTurnsAPausedPeerIntoACollectiveTimeout"},
    {"spec.runPolicy.restartPolicy", L::kBoth, E::kBinaries,
     "TorusRun.SigkilledWorkerIsFollowedByAttemptOneFromTheCheckpoint"},
    {"spec.runPolicy.backoffLimit", L::kBoth, E::kBinaries, "TorusRun.AlwaysFailingWorkerExhaustsTheBackoffLimit"},
    {"spec.runPolicy.activeDeadlineSeconds", L::kBoth, E::kBinaries, "OperatorE2E.ActiveDeadlineFailsTheJob"},
    {"spec.runPolicy.runningDeadlineSeconds", L::kOperator, E::kInProcess, "Planner.DeadlinesRequeue"},
    {"spec.runPolicy.ttlSecondsAfterFinished", L::kOperator, E::kBinaries, "OperatorE2E.TtlDeletesFinishedJob"},
    {"spec.runPolicy.cleanPodPolicy", L::kOperator, E::kInProcess, "PlannerTable.Actions"},
    {"spec.runPolicy.suspend", L::kBoth, E::kBinaries, "Conformance.SuspendStartsNothing"},
    {"spec.runPolicy.managedBy", L::kOperator, E::kInProcess, "PlannerTable.Actions"},
    {"spec.runPolicy.schedulingPolicy.schedulerName", L::kOperator, E::kBinaries,
     "OperatorE2E.AGangSchedulerGetsAPodGroupOwnedByTheJob"},
    {"spec.runPolicy.schedulingPolicy.podGroup", L::kOperator, E::kInProcess,
     "Planner.GangSchedulersGetTheirPodGroupBeforeThePods"},
    {"spec.runPolicy.schedulingPolicy.minAvailable", L::kOperator, E::kInProcess,
     "Planner.GangSchedulersGetTheirPodGroupBeforeThePods"},
    {"spec.runPolicy.schedulingPolicy.queue", L::kOperator, E::kInProcess,
     "Planner.GangSchedulersGetTheirPodGroupBeforeThePods"},
    {"spec.runPolicy.schedulingPolicy.priorityClass", L::kOperator, E::kInProcess,
     "OperatorConformance.PriorityClassReachesThePods"},
    {"spec.runPolicy.topology.key", L::kOperator, E::kBinaries,
     "OperatorE2E.TopologyKeyMapsNodesToRacksForWorkersAndStatus"},
    {"spec.runPolicy.topology.placement", L::kOperator, E::kInProcess, "Planner.TopologyAndGangScheduling"},
    {"spec.metricsPort", L::kOperator, E::kInProcess, "OperatorConformance.ImageAndPortsReachThePodsAndTheService"},
    {"spec.rendezvousPort", L::kOperator, E::kInProcess, "OperatorConformance.ImageAndPortsReachThePodsAndTheService"},
});

}  // namespace torus::conformance
