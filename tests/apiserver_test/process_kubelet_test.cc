// The process kubelet (tests/apiserver/process_kubelet.h): pods run as real local processes, each container in its
// own filesystem (pod_root.h) with its downward API values, ConfigMap and Secret volumes, claims, hostPath and
// emptyDir volumes at their mount paths, its own host name, DNS names resolved by the container through a headless
// Service (cluster_dns.h), exit codes written back to the pod status, and SIGTERM then SIGKILL on deletion.
#include "tests/apiserver/process_kubelet.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "tests/apiserver_test/standin_fixture.h"
#include "tests/support/eventually.h"

namespace torus::standin::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

class ProcessKubeletTest : public StandinTest {
 protected:
  void SetUp() override {
    StandinTest::SetUp();
    kubelet_.reset();
    KubeletOptions options;
    options.processes = SandboxOptions{dir_ + "/pods", {{"shell", "/bin/sh"}}, {{"FROM_KUBELET", "yes"}}};
    options.processes->images = {{"registry.test/sh", "/bin/sh"}};
    options.processes->mint_token = [this](const std::string& ns, const std::string& account) {
      return server_->mint_service_account_token(ns, account);
    };
    options.processes->service_host = "127.0.0.1";
    options.processes->service_port = server_->port();
    kubelet_ = std::make_unique<KubeletSim>(*server_, options);
  }

  // A pod running `script` in /bin/sh (through the "shell" command mapping), with extra spec lines.
  std::string pod_yaml(const std::string& name, const std::string& script, const std::string& extra = "",
                       const std::string& container_extra = "") {
    return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  labels: {app: " + name +
           "}\nspec:\n  restartPolicy: Never\n" + extra +
           "  containers:\n  - name: main\n    image: busybox\n    command: [shell, -c, '" + script + "']\n" +
           container_extra;
  }

  json pod(const std::string& name) { return get_json({"get", "pod", name, "-o", "json"}); }

  // A headless Service `name` selecting the pod whose name label is `pod_name` (the pods get `name: <pod>` labels
  // from pod_yaml), publishing not-ready addresses as the operator's does.
  static std::string service_yaml(const std::string& name, const std::string& pod_name) {
    return "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name +
           "\nspec:\n  clusterIP: None\n  publishNotReadyAddresses: true\n  selector: {app: " + pod_name +
           "}\n  ports:\n  - {port: 29500}\n";
  }

  // The host pid a container wrote as "pid N" to its log (the sandbox has no pid namespace; the pod spec writes
  // $$ as $$$$, since Kubernetes expands $$ in a command to $).
  pid_t wait_for_pid(const std::string& name) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string log = log_of(name);
      if (auto at = log.find("pid "); at != std::string::npos && log.find('\n', at) != std::string::npos) {
        return static_cast<pid_t>(std::stol(log.substr(at + 4)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return 0;
  }

  // A pod `stubborn` that ignores SIGTERM, with a 30 s grace, Ready; returns its container's host pid (0 if none).
  pid_t run_stubborn_pod() {
    ok({"apply", "-f",
        write_file("p.yaml", pod_yaml("stubborn", "trap \"\" TERM; echo pid $$$$; while :; do sleep 0.1; done",
                                      "  terminationGracePeriodSeconds: 30\n"))});
    ok({"wait", "--for=condition=Ready", "pod/stubborn", "--timeout=30s"});
    return wait_for_pid("stubborn");
  }

  std::string log_of(const std::string& name) {
    std::ifstream in(pod_dir(dir_ + "/pods", pod(name)) / "main.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
};

TEST_F(ProcessKubeletTest, RunsTheContainerWithItsEnvironmentVolumesAndNamesAndReportsItsExitCode) {
  ok({"create", "configmap", "cfg", "--from-literal=job.json={\"epochs\":3}"});
  ok({"create", "secret", "generic", "sec", "--from-literal=secret=s3cret"});
  ok({"apply", "-f",
      write_file("rank0.yaml",
                 pod_yaml("job-worker-0", "exec sleep 60", "  hostname: job-worker-0\n  subdomain: job\n"))});
  ok({"apply", "-f", write_file("svc.yaml", service_yaml("job", "job-worker-0"))});
  const std::string script =
      "echo name=$NAME ip=$IP node=$NODE master=$MASTER kubelet=$FROM_KUBELET host=$(hostname); "
      "getent hosts $MASTER; cat $JOB_FILE; echo; cat $0; echo; exit 3";
  const std::string env =
      "    args: [/etc/secret/secret]\n"
      "    env:\n"
      "    - {name: NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}\n"
      "    - {name: IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}\n"
      "    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}\n"
      "    - {name: MASTER, value: job-worker-0.job.default.svc}\n"
      "    - {name: JOB_FILE, value: /etc/job/job.json}\n"
      "    volumeMounts:\n"
      "    - {name: job, mountPath: /etc/job, readOnly: true}\n"
      "    - {name: secret, mountPath: /etc/secret, readOnly: true}\n"
      "  volumes:\n"
      "  - {name: job, configMap: {name: cfg}}\n"
      "  - {name: secret, secret: {secretName: sec}}\n";
  ok({"apply", "-f", write_file("reader.yaml", pod_yaml("reader", script, "", env))});
  ok({"wait", "--for=jsonpath={.status.phase}=Failed", "pod/reader", "--timeout=30s"});
  const json reader = pod("reader");
  EXPECT_EQ(reader["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 3);
  const json rank0 = pod("job-worker-0");
  EXPECT_EQ(rank0["status"]["phase"], "Running");
  const std::string log = log_of("reader");
  EXPECT_THAT(log, HasSubstr("name=reader ip=" + reader["status"]["podIP"].get<std::string>() +
                             " node=" + reader["spec"]["nodeName"].get<std::string>() +
                             " master=job-worker-0.job.default.svc kubelet=yes host=reader"));
  // getent prints the address and the record's canonical name.
  EXPECT_THAT(log, ContainsRegex(rank0["status"]["podIP"].get<std::string>() +
                                 " +job-worker-0\\.job\\.default\\.svc\\.cluster\\.local"));
  EXPECT_THAT(log, HasSubstr("{\"epochs\":3}"));
  EXPECT_THAT(log, HasSubstr("s3cret"));
}

// As in a cluster, a pod's name resolves only once a headless Service selects it, and a running container sees the
// record appear (its /etc/hosts is kept current); without the Service the lookup fails.
TEST_F(ProcessKubeletTest, ANameResolvesOnlyThroughAHeadlessServiceThatSelectsThePod) {
  ok({"apply", "-f",
      write_file("rank0.yaml",
                 pod_yaml("job-worker-0", "exec sleep 60", "  hostname: job-worker-0\n  subdomain: job\n"))});
  const std::string name = "job-worker-0.job.default.svc";
  ok({"apply", "-f",
      write_file("peer.yaml", pod_yaml("peer", "getent hosts " + name + " || echo unresolved; until getent hosts " +
                                                   name + " >/dev/null; do sleep 0.05; done; getent hosts " + name))});
  ASSERT_TRUE(test::eventually([&] { return log_of("peer").find("unresolved") != std::string::npos; }, 30s, 20ms))
      << log_of("peer");
  ok({"apply", "-f", write_file("svc.yaml", service_yaml("job", "job-worker-0"))});
  ok({"wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/peer", "--timeout=30s"});
  EXPECT_THAT(log_of("peer"), ContainsRegex(pod("job-worker-0")["status"]["podIP"].get<std::string>() + " +" + name));
}

TEST_F(ProcessKubeletTest, ExitZeroSucceeds) {
  ok({"apply", "-f", write_file("p.yaml", pod_yaml("done", "echo fine"))});
  ok({"wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/done", "--timeout=30s"});
  EXPECT_EQ(pod("done")["status"]["containerStatuses"][0]["state"]["terminated"]["reason"], "Completed");
  EXPECT_THAT(log_of("done"), HasSubstr("fine"));
}

// restartPolicy Always: an exited container is started again (the kubelet's restart, the first one at once), its
// volumes kept; the status counts the restart and the pod runs again. The emptyDir counts the starts.
TEST_F(ProcessKubeletTest, AnExitedContainerOfAnAlwaysPodIsStartedAgain) {
  std::string spec =
      pod_yaml("again",
               "echo start >> /data/starts; if [ $(wc -l < /data/starts) -ge 2 ]; then exec sleep 60; "
               "fi; exit 3",
               "  volumes: [{name: data, emptyDir: {}}]\n", "    volumeMounts: [{name: data, mountPath: /data}]\n");
  spec.replace(spec.find("restartPolicy: Never"), 20, "restartPolicy: Always");
  ok({"apply", "-f", write_file("again.yaml", spec)});
  ok({"wait", "--for=jsonpath={.status.containerStatuses[0].restartCount}=1", "pod/again", "--timeout=20s"});
  const json status = pod("again")["status"];
  EXPECT_EQ(status["phase"], "Running");
  EXPECT_EQ(status["containerStatuses"][0]["lastState"]["terminated"]["exitCode"], 3);
  // The second start is a real process: it writes its line to the pod's emptyDir (the status may come first, so
  // the file is watched until it does, within a deadline).
  const auto starts = pod_dir(dir_ + "/pods", pod("again")) / "volumes" / "data" / "starts";
  auto lines = [&] {
    std::ifstream in(starts);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) ++n;
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (lines() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a file has no event to wait on here
  }
  EXPECT_EQ(lines(), 2);
}

TEST_F(ProcessKubeletTest, DeletionAsksWithSigtermAndKillsAfterTheGracePeriod) {
  ok({"apply", "-f",
      write_file("p.yaml", pod_yaml("polite",
                                    "trap \"echo got-term; exit 0\" TERM; echo up; "
                                    "while :; do sleep 0.1; done") +
                               "---\n" +
                               pod_yaml("stubborn", "trap \"\" TERM; echo up; while :; do sleep 0.1; done",
                                        "  terminationGracePeriodSeconds: 1\n"))});
  ok({"wait", "--for=condition=Ready", "pod/polite", "pod/stubborn", "--timeout=30s"});
  // Both shells run their trap before deletion: wait until they said so.
  for (const char* name : {"polite", "stubborn"}) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (log_of(name).find("up") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(50ms);
    }
  }
  const std::string polite_dir = pod_dir(dir_ + "/pods", pod("polite")).string();
  ok({"delete", "pod", "polite", "stubborn", "--wait=true", "--timeout=30s"});
  std::ifstream in(polite_dir + "/main.log");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("got-term"));
  EXPECT_EQ(kubectl({"get", "pod", "stubborn"}).exit_code, 1) << "the stubborn pod went after SIGKILL";
}

// A pod already being deleted stays while its grace runs, as the apiserver keeps it (rest.BeforeDelete): a repeated
// delete (the operator's cleanup and the garbage collector both delete a job's pods) leaves it and its processes
// alone; a shorter --grace-period brings the SIGKILL forward; the kubelet removes the pod once its processes ended.
TEST_F(ProcessKubeletTest, ARepeatedDeleteKeepsThePodUntilItsProcessesEndAndAShorterGraceKillsSooner) {
  const pid_t pid = run_stubborn_pod();
  ASSERT_GT(pid, 0);
  ok({"delete", "pod", "stubborn", "--wait=false"});
  const json marked = pod("stubborn");
  ok({"delete", "pod", "stubborn", "--wait=false"});
  ok({"delete", "pod", "stubborn", "--wait=false", "--grace-period=60"});
  // Nothing to wait for: a kubelet that (wrongly) acted on the repeated deletes would kill within this window.
  std::this_thread::sleep_for(300ms);
  const json still = pod("stubborn");
  EXPECT_EQ(still["metadata"]["deletionTimestamp"], marked["metadata"]["deletionTimestamp"]);
  EXPECT_EQ(still["metadata"]["deletionGracePeriodSeconds"], 30);
  EXPECT_EQ(::kill(pid, 0), 0) << "the container runs out its grace";
  const auto start = std::chrono::steady_clock::now();
  ok({"delete", "pod", "stubborn", "--grace-period=1", "--wait=true", "--timeout=20s"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "SIGKILL after the shorter grace, not the first 30 s";
  EXPECT_EQ(kubectl({"get", "pod", "stubborn"}).exit_code, 1);
  EXPECT_NE(::kill(pid, 0), 0) << "the pod went only after its process ended";
}

// --force --grace-period=0 removes the pod at once; the kubelet then kills what still runs.
TEST_F(ProcessKubeletTest, AForcedDeleteRemovesThePodAtOnceAndTheKubeletKillsItsProcesses) {
  const pid_t pid = run_stubborn_pod();
  ASSERT_GT(pid, 0);
  ok({"delete", "pod", "stubborn", "--wait=false"});
  ok({"delete", "pod", "stubborn", "--force", "--grace-period=0"});
  EXPECT_EQ(kubectl({"get", "pod", "stubborn"}).exit_code, 1);
  EXPECT_TRUE(test::eventually([&] { return ::kill(pid, 0) != 0; }, 10s, 50ms)) << "killed, not left to its 30 s grace";
}

// A container's last words reach its status as a kubelet puts them there: what it wrote to its
// terminationMessagePath (/dev/termination-log by default, a file of its own), else under FallbackToLogsOnError
// the tail of its output when it failed; a container that wrote none and succeeded has no message.
TEST_F(ProcessKubeletTest, TheTerminationMessageIsWhatTheContainerWroteOrItsLogsTail) {
  const std::string fallback = "    terminationMessagePolicy: FallbackToLogsOnError\n";
  ok({"apply", "-f",
      write_file("p.yaml",
                 pod_yaml("wrote", "echo noise; printf \"CollectiveTimeout: rank 1\" > /dev/termination-log; exit 43") +
                     "---\n" +
                     pod_yaml("custom", "echo done > /tmp/why; exit 2", "", "    terminationMessagePath: /tmp/why\n") +
                     "---\n" +
                     pod_yaml("fell-back", "for i in $(seq 1 100); do echo line-$i; done; exit 1", "", fallback) +
                     "---\n" + pod_yaml("quiet", "echo fine", "", fallback))});
  for (const char* name : {"wrote", "custom", "fell-back"})
    ok({"wait", "--for=jsonpath={.status.phase}=Failed", std::string("pod/") + name, "--timeout=30s"});
  ok({"wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/quiet", "--timeout=30s"});
  auto message = [&](const std::string& name) {
    return pod(name)["status"]["containerStatuses"][0]["state"]["terminated"].value("message", "<none>");
  };
  EXPECT_EQ(message("wrote"), "CollectiveTimeout: rank 1");
  EXPECT_EQ(message("custom"), "done\n");
  const std::string tail = message("fell-back");
  EXPECT_EQ(tail.rfind("line-21\n", 0), 0u) << "the last 80 lines: " << tail;
  EXPECT_THAT(tail, ::testing::EndsWith("line-100\n"));
  EXPECT_EQ(message("quiet"), "<none>");
}

// /dev is the container's own, as a runtime makes it: the harmless devices work, the host's others are not there,
// and the termination log is no file of the host's /dev.
TEST_F(ProcessKubeletTest, DevHoldsOnlyARuntimesDevices) {
  // A terminal of the host's (/dev/pts/N) that the pod must not see.
  const int host_terminal = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(host_terminal, 0);
  ASSERT_EQ(::unlockpt(host_terminal), 0);
  ASSERT_TRUE(std::filesystem::exists(::ptsname(host_terminal)));
  ok({"apply", "-f",
      write_file("p.yaml", pod_yaml("devs",
                                    "echo x > /dev/null; head -c 4 /dev/urandom | wc -c; ls /dev | sort | "
                                    "tr \"\\n\" \" \"; echo; ls -l /dev/stdout; echo \"pts: $(ls /dev/pts)\""))});
  ok({"wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/devs", "--timeout=30s"});
  const std::string log = log_of("devs");
  EXPECT_THAT(log, HasSubstr("4\n"));
  EXPECT_THAT(log, HasSubstr(" null "));
  EXPECT_THAT(log, HasSubstr(" termination-log "));
  EXPECT_THAT(log, HasSubstr("/proc/self/fd/1"));
  EXPECT_THAT(log, HasSubstr("pts: ptmx\n")) << "a devpts of its own: none of the host's terminals";
  for (const char* host_only : {" loop0 ", " kmsg ", " tty1 "}) EXPECT_THAT(log, Not(HasSubstr(host_only))) << log;
  EXPECT_FALSE(std::filesystem::exists("/dev/termination-log")) << "the host's /dev was written";
  ::close(host_terminal);
}

// A container neither mapped to a host program nor from an image a node has or the registry serves waits for its
// image: ErrImagePull, then ImagePullBackOff with containerd's message naming the normalised reference.
TEST_F(ProcessKubeletTest, APodWhoseImageNoRegistryServesBacksOffPullingIt) {
  ok({"apply", "-f",
      write_file("p.yaml",
                 "apiVersion: v1\nkind: Pod\nmetadata:\n  name: nosuch\nspec:\n  restartPolicy: Never\n"
                 "  containers: [{name: main, image: busybox}]\n")});
  ok({"wait", "--for=jsonpath={.status.containerStatuses[0].state.waiting.reason}=ImagePullBackOff", "pod/nosuch",
      "--timeout=30s"});
  const json status = pod("nosuch")["status"];
  EXPECT_EQ(status["phase"], "Pending");
  EXPECT_THAT(status["containerStatuses"][0]["state"]["waiting"]["message"].get<std::string>(),
              HasSubstr("Back-off pulling image \"busybox\": ErrImagePull: rpc error: code = NotFound desc = failed "
                        "to pull and unpack image \"docker.io/library/busybox:latest\""));
}

// A container without a command runs its image's mapped entrypoint with its args, $(VAR) expanded as the kubelet
// does ($$ escapes).
TEST_F(ProcessKubeletTest, AMappedImageRunsItsEntrypointWithTheArgsExpanded) {
  ok({"apply", "-f",
      write_file("p.yaml",
                 "apiVersion: v1\nkind: Pod\nmetadata:\n  name: entry\nspec:\n  restartPolicy: Never\n"
                 "  containers:\n  - name: main\n    image: registry.test/sh:1.2\n"
                 "    args: [-c, \"echo 'said=$(GREETING) kept=$$(GREETING) unknown=$(NOPE)'\"]\n"
                 "    env: [{name: GREETING, value: hello}]\n")});
  ok({"wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/entry", "--timeout=30s"});
  EXPECT_THAT(log_of("entry"), HasSubstr("said=hello kept=$(GREETING) unknown=$(NOPE)"));
}

// The ServiceAccount admission's kube-api-access volume, projected as a kubelet does: a token minted for the pod's
// account (TokenRequest), the namespace's kube-root-ca.crt, the namespace; and the `kubernetes` Service's address.
TEST_F(ProcessKubeletTest, APodGetsItsAccountsTokenTheRootCaItsNamespaceAndTheApiServersAddress) {
  const std::string sa = "/var/run/secrets/kubernetes.io/serviceaccount";
  ok({"apply", "-f",
      write_file("sa.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: reader}\n---\n" +
                                pod_yaml("sa-reader",
                                         "echo ns=$(cat " + sa + "/namespace) token=$(cat " + sa +
                                             "/token) ca=$(wc -c < " + sa + "/ca.crt) at=$KUBERNETES_SERVICE_HOST:" +
                                             "$KUBERNETES_SERVICE_PORT; touch " + sa + "/x || echo read-only",
                                         "  serviceAccountName: reader\n"))});
  ok({"wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/sa-reader", "--timeout=30s"});
  const std::string log = log_of("sa-reader");
  EXPECT_THAT(log, HasSubstr("ns=default token=sa-"));
  EXPECT_THAT(log, HasSubstr("ca=0 at=127.0.0.1:" + std::to_string(server_->port())));  // plain HTTP: no CA
  EXPECT_THAT(log, HasSubstr("read-only"));
}

// What a pod did not mount is its own and goes with it; a claim outlives pods; hostPath is per node; emptyDir is per
// pod (medium Memory: a tmpfs of its sizeLimit); /dev/shm is private.
TEST_F(ProcessKubeletTest, EachPodSeesOnlyWhatItMountsAndAClaimOutlivesIt) {
  ok({"apply", "-f",
      write_file("claim.yaml",
                 "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\nspec:\n"
                 "  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n")});
  EXPECT_EQ(get_json({"get", "pvc", "data", "-o", "json"})["status"]["phase"], "Bound");
  const std::string volumes =
      "  volumes:\n"
      "  - {name: claim, persistentVolumeClaim: {claimName: data}}\n"
      "  - {name: scratch, emptyDir: {}}\n"
      "  - {name: fast, emptyDir: {medium: Memory, sizeLimit: 2Mi}}\n";
  const std::string mounts =
      "    volumeMounts:\n"
      "    - {name: claim, mountPath: /ckpt}\n"
      "    - {name: scratch, mountPath: /scratch}\n"
      "    - {name: fast, mountPath: /fast}\n";
  // The writer leaves files in each place; the test's own folder on the host is not there for it.
  const std::string writer =
      "echo kept > /ckpt/step-4; echo lost > /var/private; echo pod > /scratch/s; echo shm > /dev/shm/s; "
      "test -e " +
      dir_ + " && echo host-visible; df -k /fast | tail -1; df -k /dev/shm | tail -1; echo written";
  ok({"apply", "-f", write_file("writer.yaml", pod_yaml("writer", writer, volumes, mounts))});
  ok({"wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/writer", "--timeout=30s"});
  const std::string log = log_of("writer");
  EXPECT_THAT(log, HasSubstr("written"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("host-visible")));
  EXPECT_THAT(log, ::testing::ContainsRegex("tmpfs +2048 ")) << "medium Memory: a tmpfs of its sizeLimit";
  EXPECT_THAT(log, ::testing::ContainsRegex("tmpfs +65536 ")) << "/dev/shm: a private 64 MiB, as a runtime's default";
  EXPECT_FALSE(std::filesystem::exists("/var/private")) << "a write outside the volumes reached the host";
  const std::string reader =
      "cat /ckpt/step-4; for f in /var/private /scratch/s /dev/shm/s; do test -e $f && echo still-there $f; done; "
      "echo read";
  ok({"apply", "-f", write_file("reader.yaml", pod_yaml("reader", reader, volumes, mounts))});
  ok({"wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/reader", "--timeout=30s"});
  EXPECT_THAT(log_of("reader"), HasSubstr("kept\nread")) << "only the claim's file outlives the writer";
}

TEST_F(ProcessKubeletTest, AHostPathIsTheNodesFolderAndAPodWaitsForItsClaim) {
  const std::string spec = "  nodeName: node-1\n  volumes:\n  - {name: host, hostPath: {path: /var/lib/cache}}\n";
  const std::string mount = "    volumeMounts:\n    - {name: host, mountPath: /cache}\n";
  ok({"apply", "-f", write_file("a.yaml", pod_yaml("host-a", "echo a > /cache/a", spec, mount))});
  ok({"wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/host-a", "--timeout=30s"});
  ok({"apply", "-f", write_file("b.yaml", pod_yaml("host-b", "cat /cache/a", spec, mount))});
  ok({"wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/host-b", "--timeout=30s"});
  EXPECT_THAT(log_of("host-b"), HasSubstr("a"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/pods/_nodes/node-1/var/lib/cache/a"));
  // A claim that does not exist yet keeps the pod from starting, as ContainerCreating does.
  const std::string claim = "  volumes:\n  - {name: c, persistentVolumeClaim: {claimName: later}}\n";
  ok({"apply", "-f",
      write_file("w.yaml",
                 pod_yaml("waits", "echo started", claim, "    volumeMounts: [{name: c, mountPath: /c}]\n"))});
  ok({"wait", "--for=jsonpath={.status.containerStatuses[0].state.waiting.message}=persistentvolumeclaim \"later\" "
      "not found (volume c)",
      "pod/waits", "--timeout=30s"});
  EXPECT_EQ(pod("waits")["status"]["phase"], "Pending");
  EXPECT_EQ(pod("waits")["status"]["containerStatuses"][0]["state"]["waiting"]["reason"], "ContainerCreating");
  EXPECT_THAT(log_of("waits"), ::testing::Not(HasSubstr("started")));
  ok({"apply", "-f",
      write_file("later.yaml",
                 "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: later\nspec:\n"
                 "  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n")});
  ok({"wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/waits", "--timeout=30s"});
  EXPECT_THAT(log_of("waits"), HasSubstr("started"));
}

}  // namespace
}  // namespace torus::standin::testing
