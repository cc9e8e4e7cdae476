#pragma once
// Exit codes shared by the worker, the local runtime and the operator's gang policy.
namespace torus::launch {

enum class ExitCode : int {
  kSuccess = 0,
  kFailure = 1,             // permanent: bad input, a bug; the gang is not restarted under ExitCode policy
  kUsage = 2,               // bad command line
  kRetryable = 42,          // transient: the gang should restart from its last checkpoint (e.g. a peer died)
  kCollectiveTimeout = 43,  // a collective never finished; retryable, reported as CollectiveTimeout
  // permanent under every policy: the attempt should resume from a checkpoint (TORUS_RESUME_STEP) and found none, so
  // a restart cannot help; reported as CheckpointLost instead of training again from step 0
  kCheckpointLost = 44,
};

constexpr int to_int(ExitCode c) { return static_cast<int>(c); }

}  // namespace torus::launch
