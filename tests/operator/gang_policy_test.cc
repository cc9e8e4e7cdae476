// Table-driven tests of the gang restart contract shared by the operator and `torus run`.
#include "operator/controller/gang_policy.h"

#include <gtest/gtest.h>

#include "common/util/error.h"

namespace torus::controller {
namespace {

using std::chrono::seconds;

const TimePoint kT0 = TimePoint(seconds(1'700'000'000));

// Fluent builder for an observed gang.
class GangBuilder {
 public:
  explicit GangBuilder(int workers) {
    gang_.expected_workers = workers;
    gang_.job_start = kT0;
    gang_.attempt_start = kT0;
    gang_.now = kT0;
  }
  // Attempt `a` after `a` failure restarts (attempts started by spec edits or resumes: restarts(n) after).
  GangBuilder& attempt(int a) {
    gang_.attempt = a;
    gang_.restarts = a;
    return *this;
  }
  GangBuilder& restarts(int n) {
    gang_.restarts = n;
    return *this;
  }
  GangBuilder& at(seconds since_start) {
    gang_.now = kT0 + since_start;
    return *this;
  }
  GangBuilder& attempt_started(seconds since_start) {
    gang_.attempt_start = kT0 + since_start;
    return *this;
  }
  GangBuilder& all_running() {
    for (int i = static_cast<int>(gang_.workers.size()); i < gang_.expected_workers; ++i) running(i);
    gang_.running_since = gang_.attempt_start;
    return *this;
  }
  GangBuilder& running(int index) { return add(index, PodPhase::kRunning, std::nullopt, ""); }
  GangBuilder& pending(int index, std::string detail = "") {
    return add(index, PodPhase::kPending, std::nullopt, detail);
  }
  GangBuilder& exited(int index, int code) {
    return replace(index, code == 0 ? PodPhase::kSucceeded : PodPhase::kFailed, code, "");
  }
  GangBuilder& signalled(int index, int sig) {
    WorkerState& w = slot(index);
    w.phase = PodPhase::kFailed;
    w.exit_code.reset();
    w.term_signal = sig;
    return *this;
  }
  // Taken away by the platform (a DisruptionTarget condition since `since`), as last seen: a pod that vanished
  // from the running gang counts as killed (137).
  GangBuilder& disrupted(int index, seconds since, std::string reason = "EvictionByEvictionAPI") {
    WorkerState& w = slot(index);
    w.phase = PodPhase::kFailed;
    w.exit_code = 137;
    w.disruption =
        Disruption{std::move(reason), "Eviction API: evicting", "node-" + std::to_string(index), kT0 + since};
    return *this;
  }
  // A disruption whose condition has no time.
  GangBuilder& disrupted_untimed(int index) {
    disrupted(index, seconds(0));
    slot(index).disruption->since.reset();
    return *this;
  }
  // Exited with `code` at `when` (the container's finishedAt).
  GangBuilder& exited_at(int index, int code, seconds when) {
    exited(index, code);
    slot(index).finished_at = kT0 + when;
    return *this;
  }
  GangObservation build() const { return gang_; }

 private:
  WorkerState& slot(int index) {
    std::string name = "job-worker-" + std::to_string(index);
    for (auto& w : gang_.workers) {
      if (w.name == name) return w;
    }
    gang_.workers.push_back(WorkerState{name, PodPhase::kPending, std::nullopt, std::nullopt, ""});
    return gang_.workers.back();
  }
  GangBuilder& add(int index, PodPhase phase, std::optional<int> code, std::string detail) {
    return replace(index, phase, code, std::move(detail));
  }
  GangBuilder& replace(int index, PodPhase phase, std::optional<int> code, std::string detail) {
    WorkerState& w = slot(index);
    w.phase = phase;
    w.exit_code = code;
    w.detail = std::move(detail);
    return *this;
  }
  GangObservation gang_;
};

GangPolicy policy(RestartPolicy rp, int backoff = 3) {
  GangPolicy p;
  p.restart_policy = rp;
  p.backoff_limit = backoff;
  return p;
}

struct ExitCase {
  RestartPolicy policy;
  int code;
  ExitClass expected;
};

class ClassifyExit : public ::testing::TestWithParam<ExitCase> {};

TEST_P(ClassifyExit, FollowsThePolicy) {
  const ExitCase& c = GetParam();
  EXPECT_EQ(classify_exit(policy(c.policy), c.code), c.expected) << to_string(c.policy) << " code " << c.code;
}

INSTANTIATE_TEST_SUITE_P(Table, ClassifyExit,
                         ::testing::Values(ExitCase{RestartPolicy::kExitCode, 0, ExitClass::kSuccess},
                                           ExitCase{RestartPolicy::kExitCode, 1, ExitClass::kPermanent},
                                           ExitCase{RestartPolicy::kExitCode, 2, ExitClass::kPermanent},
                                           ExitCase{RestartPolicy::kExitCode, 42, ExitClass::kRetryable},
                                           ExitCase{RestartPolicy::kExitCode, 43, ExitClass::kRetryable},
                                           ExitCase{RestartPolicy::kExitCode, 127, ExitClass::kPermanent},
                                           ExitCase{RestartPolicy::kExitCode, 128, ExitClass::kRetryable},
                                           ExitCase{RestartPolicy::kExitCode, 137, ExitClass::kRetryable},
                                           ExitCase{RestartPolicy::kExitCode, 255, ExitClass::kRetryable},
                                           ExitCase{RestartPolicy::kOnFailure, 1, ExitClass::kRetryable},
                                           ExitCase{RestartPolicy::kOnFailure, 137, ExitClass::kRetryable},
                                           ExitCase{RestartPolicy::kOnFailure, 0, ExitClass::kSuccess},
                                           ExitCase{RestartPolicy::kNever, 137, ExitClass::kPermanent},
                                           ExitCase{RestartPolicy::kNever, 42, ExitClass::kPermanent},
                                           ExitCase{RestartPolicy::kNever, 0, ExitClass::kSuccess}));

TEST(LastWords, TheReasonIsTheFirstLineAndTheStepComesFromTheAbortedEvent) {
  struct Case {
    std::string message;
    size_t max_chars;
    std::string reason;
    std::optional<int64_t> step;
  };
  const Case cases[] = {
      {"CollectiveTimeout: ranks that never arrived: 1", 400, "CollectiveTimeout: ranks that never arrived: 1", {}},
      {"CollectiveFailed: peer closed\n@torus-event {\"event\":\"aborted\",\"rank\":0,\"step\":56}", 400,
       "CollectiveFailed: peer closed", 56},
      {"abcdef", 3, "abc", {}},
      {"x\n@torus-event {\"event\":\"finished\",\"step\":9}", 400, "x", {}},     // not an aborted event
      {"x\n@torus-event {\"event\":\"aborted\",\"step\":\"9\"}", 400, "x", {}},  // not a number
      {"x\n@torus-event {not json", 400, "x", {}},
  };
  for (const Case& c : cases) {
    const LastWords w = parse_last_words(c.message, c.max_chars);
    EXPECT_EQ(w.reason, c.reason) << c.message;
    EXPECT_EQ(w.step, c.step) << c.message;
  }
}

TEST(ClassifyExit, ExtraRetryableCodes) {
  GangPolicy p = policy(RestartPolicy::kExitCode);
  p.extra_retryable_codes = {3};
  EXPECT_EQ(classify_exit(p, 3), ExitClass::kRetryable);
  EXPECT_EQ(classify_exit(p, 4), ExitClass::kPermanent);
}

TEST(EffectiveExitCode, SignalCountsAs128Plus) {
  WorkerState w{"p", PodPhase::kFailed, std::nullopt, 9, ""};
  EXPECT_EQ(effective_exit_code(w), 137);
  w.term_signal.reset();
  w.phase = PodPhase::kRunning;
  EXPECT_EQ(effective_exit_code(w), std::nullopt);
}

struct DecideCase {
  const char* name;
  GangPolicy policy;
  GangObservation gang;
  Verdict verdict;
  Reason reason;
  std::vector<std::string> culprits;
};

class Decide : public ::testing::TestWithParam<DecideCase> {};

TEST_P(Decide, Table) {
  const DecideCase& c = GetParam();
  Decision d = decide(c.policy, c.gang);
  EXPECT_EQ(d.verdict, c.verdict) << c.name << ": " << d.message;
  EXPECT_EQ(d.reason, c.reason) << c.name << ": " << to_string(d.reason) << " " << d.message;
  EXPECT_EQ(d.culprits, c.culprits) << c.name;
}

GangPolicy with_deadlines(std::optional<seconds> active, std::optional<seconds> running, int backoff = 3) {
  GangPolicy p = policy(RestartPolicy::kExitCode, backoff);
  p.active_deadline = active;
  p.running_deadline = running;
  return p;
}

INSTANTIATE_TEST_SUITE_P(
    Table, Decide,
    ::testing::Values(DecideCase{"running gang continues",
                                 policy(RestartPolicy::kExitCode),
                                 GangBuilder(2).all_running().build(),
                                 Verdict::kContinue,
                                 Reason::kNone,
                                 {}},
                      DecideCase{"all succeeded",
                                 policy(RestartPolicy::kExitCode),
                                 GangBuilder(2).all_running().exited(0, 0).exited(1, 0).build(),
                                 Verdict::kSucceed,
                                 Reason::kNone,
                                 {}},
                      DecideCase{"one of two succeeded keeps waiting",
                                 policy(RestartPolicy::kExitCode),
                                 GangBuilder(2).all_running().exited(0, 0).build(),
                                 Verdict::kContinue,
                                 Reason::kNone,
                                 {}},
                      DecideCase{"137 restarts the gang",
                                 policy(RestartPolicy::kExitCode),
                                 GangBuilder(3).all_running().exited(1, 137).build(),
                                 Verdict::kRestart,
                                 Reason::kRetryableFailure,
                                 {"job-worker-1"}},
                      DecideCase{"SIGKILL of a local process restarts",
                                 policy(RestartPolicy::kExitCode),
                                 GangBuilder(2).all_running().signalled(0, 9).build(),
                                 Verdict::kRestart,
                                 Reason::kRetryableFailure,
                                 {"job-worker-0"}},
                      DecideCase{"exit 1 fails",
                                 policy(RestartPolicy::kExitCode),
                                 GangBuilder(2).all_running().exited(1, 1).build(),
                                 Verdict::kFail,
                                 Reason::kWorkerFailed,
                                 {"job-worker-1"}},
                      DecideCase{"permanent wins over retryable",
                                 policy(RestartPolicy::kExitCode),
                                 GangBuilder(3).all_running().exited(0, 137).exited(2, 1).build(),
                                 Verdict::kFail,
                                 Reason::kWorkerFailed,
                                 {"job-worker-2"}},
                      DecideCase{"OnFailure restarts exit 1",
                                 policy(RestartPolicy::kOnFailure),
                                 GangBuilder(2).all_running().exited(1, 1).build(),
                                 Verdict::kRestart,
                                 Reason::kRetryableFailure,
                                 {"job-worker-1"}},
                      DecideCase{"Never fails on 137",
                                 policy(RestartPolicy::kNever),
                                 GangBuilder(2).all_running().exited(0, 137).build(),
                                 Verdict::kFail,
                                 Reason::kWorkerFailed,
                                 {"job-worker-0"}},
                      DecideCase{"Never names a collective timeout",
                                 policy(RestartPolicy::kNever),
                                 GangBuilder(2).all_running().exited(0, 43).build(),
                                 Verdict::kFail,
                                 Reason::kCollectiveTimeout,
                                 {"job-worker-0"}},
                      DecideCase{"collective timeout restart cause",
                                 policy(RestartPolicy::kExitCode),
                                 GangBuilder(2).all_running().exited(0, 43).exited(1, 42).build(),
                                 Verdict::kRestart,
                                 Reason::kCollectiveTimeout,
                                 {"job-worker-0", "job-worker-1"}},
                      DecideCase{"backoff limit 3 allows attempt 3 (the third restart)",
                                 policy(RestartPolicy::kExitCode, 3),
                                 GangBuilder(2).attempt(2).all_running().exited(0, 137).build(),
                                 Verdict::kRestart,
                                 Reason::kRetryableFailure,
                                 {"job-worker-0"}},
                      DecideCase{"backoff limit exhausted",
                                 policy(RestartPolicy::kExitCode, 3),
                                 GangBuilder(2).attempt(3).all_running().exited(0, 137).build(),
                                 Verdict::kFail,
                                 Reason::kBackoffLimitExceeded,
                                 {"job-worker-0"}},
                      DecideCase{"attempts that followed spec edits spend no backoff",
                                 policy(RestartPolicy::kExitCode, 1),
                                 GangBuilder(2).attempt(3).restarts(0).all_running().exited(0, 137).build(),
                                 Verdict::kRestart,
                                 Reason::kRetryableFailure,
                                 {"job-worker-0"}},
                      DecideCase{"backoff limit 0 never restarts",
                                 policy(RestartPolicy::kOnFailure, 0),
                                 GangBuilder(1).all_running().exited(0, 1).build(),
                                 Verdict::kFail,
                                 Reason::kBackoffLimitExceeded,
                                 {"job-worker-0"}},
                      DecideCase{"active deadline passed",
                                 with_deadlines(seconds(60), std::nullopt),
                                 GangBuilder(2).all_running().at(seconds(61)).build(),
                                 Verdict::kFail,
                                 Reason::kDeadlineExceeded,
                                 {}},
                      DecideCase{"deadline beats a retryable exit",
                                 with_deadlines(seconds(60), std::nullopt),
                                 GangBuilder(2).all_running().exited(0, 137).at(seconds(60)).build(),
                                 Verdict::kFail,
                                 Reason::kDeadlineExceeded,
                                 {}},
                      DecideCase{"success beats the deadline",
                                 with_deadlines(seconds(60), std::nullopt),
                                 GangBuilder(1).all_running().exited(0, 0).at(seconds(90)).build(),
                                 Verdict::kSucceed,
                                 Reason::kNone,
                                 {}},
                      DecideCase{"pending within running deadline",
                                 with_deadlines(std::nullopt, seconds(30)),
                                 GangBuilder(2).running(0).pending(1).at(seconds(29)).build(),
                                 Verdict::kContinue,
                                 Reason::kNone,
                                 {}},
                      DecideCase{"gang timeout names unscheduled pods",
                                 with_deadlines(std::nullopt, seconds(30)),
                                 GangBuilder(3).running(0).pending(1, "Unschedulable").at(seconds(31)).build(),
                                 Verdict::kFail,
                                 Reason::kGangTimeout,
                                 {"job-worker-1 (Unschedulable)", "1 worker(s) never created"}},
                      DecideCase{
                          "running deadline counts from the attempt",
                          with_deadlines(std::nullopt, seconds(30)),
                          GangBuilder(1).attempt(2).attempt_started(seconds(100)).pending(0).at(seconds(120)).build(),
                          Verdict::kContinue,
                          Reason::kNone,
                          {}},
                      DecideCase{"running gang ignores running deadline",
                                 with_deadlines(std::nullopt, seconds(30)),
                                 GangBuilder(2).all_running().at(seconds(300)).build(),
                                 Verdict::kContinue,
                                 Reason::kNone,
                                 {}}),
    [](const ::testing::TestParamInfo<DecideCase>& param_info) {
      std::string n = param_info.param.name;
      for (char& ch : n) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

// Disruptions (a pod's DisruptionTarget condition, as last seen): a restart that spends no backoffLimit.
INSTANTIATE_TEST_SUITE_P(
    Disruptions, Decide,
    ::testing::Values(
        DecideCase{"a disrupted worker restarts the gang with no backoff left",
                   policy(RestartPolicy::kExitCode, 0),
                   GangBuilder(2).all_running().disrupted(1, seconds(10)).build(),
                   Verdict::kRestart,
                   Reason::kDisrupted,
                   {"job-worker-1"}},
        DecideCase{"a disruption after the backoff limit was spent still restarts",
                   policy(RestartPolicy::kExitCode, 3),
                   GangBuilder(2).attempt(3).all_running().disrupted(0, seconds(10)).build(),
                   Verdict::kRestart,
                   Reason::kDisrupted,
                   {"job-worker-0"}},
        DecideCase{"a peer that stopped after the disruption follows it",
                   policy(RestartPolicy::kExitCode, 0),
                   GangBuilder(2).all_running().disrupted(1, seconds(10)).exited_at(0, 42, seconds(12)).build(),
                   Verdict::kRestart,
                   Reason::kDisrupted,
                   {"job-worker-1"}},
        DecideCase{"a peer that exited in the disruption's second follows it",
                   policy(RestartPolicy::kExitCode, 0),
                   GangBuilder(3).all_running().exited_at(0, 43, seconds(10)).disrupted(2, seconds(10)).build(),
                   Verdict::kRestart,
                   Reason::kDisrupted,
                   {"job-worker-2"}},
        DecideCase{"two disruptions, the earliest times the followers",
                   policy(RestartPolicy::kExitCode, 0),
                   GangBuilder(3)
                       .all_running()
                       .disrupted(0, seconds(20), "PreemptionByScheduler")
                       .disrupted(1, seconds(10))
                       .exited_at(2, 42, seconds(15))
                       .build(),
                   Verdict::kRestart,
                   Reason::kDisrupted,
                   {"job-worker-0", "job-worker-1"}},
        DecideCase{"a failure before the disruption is a failure",
                   policy(RestartPolicy::kExitCode, 0),
                   GangBuilder(2).all_running().exited_at(0, 137, seconds(9)).disrupted(1, seconds(10)).build(),
                   Verdict::kFail,
                   Reason::kBackoffLimitExceeded,
                   {"job-worker-0", "job-worker-1"}},
        DecideCase{"a failure before the disruption spends backoff",
                   policy(RestartPolicy::kExitCode, 3),
                   GangBuilder(2).all_running().exited_at(0, 137, seconds(9)).disrupted(1, seconds(10)).build(),
                   Verdict::kRestart,
                   Reason::kRetryableFailure,
                   {"job-worker-0", "job-worker-1"}},
        DecideCase{"a worker that vanished without a condition beside a disrupted one is a failure",
                   policy(RestartPolicy::kExitCode, 3),
                   GangBuilder(2).all_running().exited(0, 137).disrupted(1, seconds(10)).build(),
                   Verdict::kRestart,
                   Reason::kRetryableFailure,
                   {"job-worker-0", "job-worker-1"}},
        DecideCase{"a disruption with no time has no followers",
                   policy(RestartPolicy::kExitCode, 3),
                   GangBuilder(2).all_running().disrupted_untimed(1).exited_at(0, 42, seconds(12)).build(),
                   Verdict::kRestart,
                   Reason::kRetryableFailure,
                   {"job-worker-0", "job-worker-1"}},
        DecideCase{"a disruption with no time alone is still one",
                   policy(RestartPolicy::kExitCode, 0),
                   GangBuilder(2).all_running().disrupted_untimed(1).build(),
                   Verdict::kRestart,
                   Reason::kDisrupted,
                   {"job-worker-1"}},
        DecideCase{"a permanent failure beside a disruption fails the job",
                   policy(RestartPolicy::kExitCode, 3),
                   GangBuilder(2).all_running().disrupted(1, seconds(10)).exited_at(0, 1, seconds(12)).build(),
                   Verdict::kFail,
                   Reason::kWorkerFailed,
                   {"job-worker-0"}},
        DecideCase{"Never fails a disrupted worker like any other",
                   policy(RestartPolicy::kNever),
                   GangBuilder(2).all_running().disrupted(1, seconds(10)).build(),
                   Verdict::kFail,
                   Reason::kWorkerFailed,
                   {"job-worker-1"}},
        DecideCase{"the active deadline beats a disruption",
                   with_deadlines(seconds(60), std::nullopt, 0),
                   GangBuilder(2).all_running().disrupted(1, seconds(10)).at(seconds(61)).build(),
                   Verdict::kFail,
                   Reason::kDeadlineExceeded,
                   {}},
        DecideCase{"a disrupted worker that exited 0 succeeded",
                   policy(RestartPolicy::kExitCode, 0),
                   GangBuilder(2).all_running().exited(0, 0).disrupted(1, seconds(10)).exited(1, 0).build(),
                   Verdict::kSucceed,
                   Reason::kNone,
                   {}}),
    [](const ::testing::TestParamInfo<DecideCase>& param_info) {
      std::string n = param_info.param.name;
      for (char& ch : n) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

TEST(Decide, RecheckAfterIsTheNearestDeadline) {
  Decision d = decide(with_deadlines(seconds(100), seconds(30)), GangBuilder(2).pending(0).at(seconds(10)).build());
  ASSERT_EQ(d.verdict, Verdict::kContinue);
  ASSERT_TRUE(d.recheck_after);
  EXPECT_EQ(*d.recheck_after, seconds(20));
  d = decide(with_deadlines(seconds(100), seconds(30)), GangBuilder(2).all_running().at(seconds(10)).build());
  ASSERT_TRUE(d.recheck_after);
  EXPECT_EQ(*d.recheck_after, seconds(90));
}

TEST(Decide, MessagesNameWorkersAndCodes) {
  Decision d =
      decide(policy(RestartPolicy::kExitCode, 1), GangBuilder(2).attempt(1).all_running().exited(1, 137).build());
  EXPECT_NE(d.message.find("job-worker-1 exited with code 137"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("after attempt 1"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("backoff limit 1"), std::string::npos) << d.message;
}

TEST(Decide, ADisruptionsMessageNamesThePodItsNodeAndTheConditionsReason) {
  const Decision d = decide(policy(RestartPolicy::kExitCode, 0), GangBuilder(2)
                                                                     .attempt(2)
                                                                     .restarts(0)
                                                                     .all_running()
                                                                     .disrupted(1, seconds(10))
                                                                     .exited_at(0, 42, seconds(11))
                                                                     .build());
  EXPECT_EQ(d.message,
            "job-worker-1 on node node-1 was disrupted: EvictionByEvictionAPI (Eviction API: evicting); 1 peer stopped "
            "after it; restarting the gang as attempt 3 from its checkpoint (a disruption, not a failure: restarts "
            "and backoffLimit unchanged)");
  EXPECT_STREQ(to_string(d.reason), "Disrupted");
}

// Exit 44: the attempt should have resumed and found no checkpoint. No restart can bring it back, so every policy
// fails the job, saying so.
TEST(Decide, ACheckpointLostFailsUnderEveryPolicyWithItsReason) {
  for (RestartPolicy p : {RestartPolicy::kNever, RestartPolicy::kOnFailure, RestartPolicy::kExitCode}) {
    EXPECT_EQ(classify_exit(policy(p, 3), 44), ExitClass::kPermanent);
    const Decision d =
        decide(policy(p, 3), GangBuilder(2).attempt(1).all_running().exited(0, 44).exited(1, 44).build());
    EXPECT_EQ(d.verdict, Verdict::kFail);
    EXPECT_STREQ(to_string(d.reason), "CheckpointLost");
    EXPECT_NE(d.message.find("found no checkpoint to resume from"), std::string::npos) << d.message;
  }
}

}  // namespace
}  // namespace torus::controller
