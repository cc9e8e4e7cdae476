// The stand-in's validation of TrainingJobs against the CRD, compared with an oracle that shares none of its code.
//
// The stand-in (tests/apiserver Store::create / update, on tests/support/openapi_schema.cc) is asked to admit each
// case as kubectl's requests would; the oracle, tests/api/crd_oracle.py, judges the same JSON with Python's
// `jsonschema` (Debian's python3-jsonschema, Draft 4) against the CRD's openAPIV3Schema read from the chart's YAML
// with PyYAML. The two must agree on accept / refuse for every case and, where both refuse, on the field paths.
//
// The cases: every file of tests/corpus/ and examples/; probes that change one field of a valid job, for every
// property the schema names under spec and status (each type's wrong types, null, removal, unknown fields, and the
// schema's own minimum/maximum, lengths, enums, patterns, formats and list types: crd_probes.h); and the resource's
// envelope (metadata.name, apiVersion, kind). Each create is judged twice, under strict field validation (what
// kubectl sends by default) and under Ignore (unknown fields pruned); status probes go through the status
// subresource, onto a job created valid.
//
// What the oracle covers, and how: JSON Schema knows types, enums, bounds, lengths, patterns, required and item
// counts. Kubernetes' structural-schema semantics it cannot know are handled in crd_oracle.py, each by name
// (routing, status-subresource, object-meta, nullable, unknown-fields, int-or-string, list-type, formats), as the
// Kubernetes documentation states them. What it does not cover: CEL rules (x-kubernetes-validations), defaults, and
// any other x-kubernetes-* key or format make it refuse to judge (exit 2, naming the key; tested below), so a CRD
// that grows one fails this test until the oracle models it; admission, ObjectMeta rules beyond the name, and YAML
// decoding are outside both sides of the comparison. Where both refuse, paths are compared as sets; a strict
// decoding refusal (400) names only the unknown fields, so it is compared with the oracle's unknown fields alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "common/api/yaml.h"
#include "tests/api/corpus.h"
#include "tests/api/crd_probes.h"
#include "tests/apiserver/api_error.h"
#include "tests/apiserver/store.h"
#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"

namespace torus::api {
namespace {

using nlohmann::json;
using standin::ApiError;
using standin::FieldValidation;
using standin::Store;
using standin::Subresource;

const std::filesystem::path kCrdFile = testing::source_dir() / "charts/torus-operator/crds/trainingjobs.torus.dev.yaml";
const std::string kOracle = (testing::source_dir() / "tests/api/crd_oracle.py").string();

json load_yaml(const std::string& text, const std::string& name) {
  FieldErrors errors;
  json document = parse_yaml_document(text, errors);
  EXPECT_TRUE(errors.empty()) << name << ": " << (errors.empty() ? "" : errors[0].to_string());
  return document;
}

struct Case {
  std::string name;
  json document;
  std::string mode = "strict";       // or "ignore": the fieldValidation of the write
  std::string subresource = "main";  // or "status": a status write onto the document created without its status
};

// A verdict, the oracle's or the stand-in's: accepted, or the field paths refused (with their kinds, for the oracle).
struct Verdict {
  bool accepted = false;
  std::set<std::string> paths;
  std::set<std::string> unknown_paths;  // the oracle's unknown-field errors
  bool strict_decoding = false;         // the stand-in refused unknown fields alone (400), as strict decoding does
  std::string detail;
};

std::string describe(const Verdict& v) {
  if (v.accepted) return "accepted";
  std::string out = "refused at {";
  for (const auto& p : v.paths) out += (out.back() == '{' ? "" : ", ") + p;
  return out + "}" + (v.detail.empty() ? "" : " (" + v.detail + ")");
}

// The oracle's verdicts on every case, in one run of crd_oracle.py.
std::vector<Verdict> ask_oracle(const std::vector<Case>& cases, const std::filesystem::path& crd = kCrdFile) {
  json input = json::array();
  for (const Case& c : cases) {
    input.push_back({{"document", c.document}, {"mode", c.mode}, {"subresource", c.subresource}});
  }
  test::TempDir dir("crd-oracle");
  const std::string file = dir.write("cases.json", input.dump());
  const test::ShellResult r = test::run_shell("timeout 300 /usr/bin/python3 " + kOracle + " " + crd.string() + " " +
                                              file + " 2>" + dir.file("stderr"));
  if (r.exit_code != 0) {
    ADD_FAILURE() << "crd_oracle.py exited " << r.exit_code << ": " << testing::read_text(dir.file("stderr"));
    return {};
  }
  const json out = json::parse(r.output);
  std::vector<Verdict> verdicts;
  for (const json& o : out) {
    Verdict v;
    v.accepted = o["accepted"];
    for (const json& e : o["errors"]) {
      v.paths.insert(e["path"].get<std::string>());
      if (e["kind"] == "unknown") v.unknown_paths.insert(e["path"].get<std::string>());
    }
    verdicts.push_back(std::move(v));
  }
  return verdicts;
}

// The stand-in's verdict: a store with the chart's CRD, the case written as kubectl writes it.
class Standin {
 public:
  explicit Standin(const json& crd) : crd_(crd) {}

  Verdict judge(const Case& c) const {
    Store store;  // one per case: cases share names, and a refused write must leave nothing behind
    store.create(*store.registry().find("apiextensions.k8s.io", "v1", "customresourcedefinitions"), "", crd_);
    const standin::ResourceType& type = *store.registry().find("torus.dev", "v1alpha1", "trainingjobs");
    standin::WriteOptions options;
    options.validation = c.mode == "strict" ? FieldValidation::kStrict : FieldValidation::kIgnore;
    const json& meta = c.document.value("metadata", json::object());
    const std::string ns = meta.contains("namespace") && meta["namespace"].is_string() ? meta["namespace"] : "default";
    if (ns != "default") {
      store.create(*store.registry().find("", "v1", "namespaces"), "", json{{"metadata", {{"name", ns}}}});
    }
    Verdict v;
    try {
      if (c.subresource == "status") {
        json created = c.document;
        created.erase("status");
        created["metadata"].erase("finalizers");
        const standin::WriteResult stored = store.create(type, ns, created, options);
        json body = *stored.object;
        if (c.document.contains("status")) {
          body["status"] = c.document.at("status");
        } else {
          body.erase("status");
        }
        store.update(type, ns, body["metadata"]["name"], body, Subresource::kStatus, options);
      } else {
        store.create(type, ns, c.document, options);
      }
      v.accepted = true;
    } catch (const ApiError& e) {
      v.detail = std::to_string(e.code()) + " " + e.what();
      for (const standin::Cause& cause : e.details().causes) v.paths.insert(cause.field);
      const std::string message = e.what();
      if (e.code() == 400 && message.find("strict decoding error") != std::string::npos) {
        v.strict_decoding = true;
        static const std::regex kUnknown(R"re(unknown field "([^"]*)")re");
        for (std::sregex_iterator it(message.begin(), message.end(), kUnknown), end; it != end; ++it) {
          v.paths.insert((*it)[1]);
        }
      }
      // Routing refusals, which a Status names by message only.
      if (message.find("the API version in the data") != std::string::npos) v.paths.insert("apiVersion");
      if (message.find("the kind in the data") != std::string::npos) v.paths.insert("kind");
    } catch (const std::exception& e) {
      v.detail = std::string("threw, not an ApiError: ") + e.what();
      v.paths.insert("<exception>");
    }
    return v;
  }

 private:
  json crd_;
};

// Empty when the verdicts agree; otherwise why not.
std::string disagreement(const Verdict& standin, const Verdict& oracle) {
  if (standin.accepted != oracle.accepted || (!standin.accepted && standin.paths.empty())) {
    return "stand-in " + describe(standin) + ", oracle " + describe(oracle);
  }
  if (standin.accepted) return "";
  const std::set<std::string>& expected = standin.strict_decoding ? oracle.unknown_paths : oracle.paths;
  if (standin.paths != expected) return "paths differ: stand-in " + describe(standin) + ", oracle " + describe(oracle);
  return "";
}

json crd() { return load_yaml(testing::read_text(kCrdFile), "crd"); }

const json& schema_of(const json& c) { return c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]; }

std::vector<Case> corpus_cases() {
  std::vector<Case> cases;
  for (const auto& f : testing::corpus()) {
    const json doc = load_yaml(f.text, f.path.string());
    cases.push_back({f.path.filename().string(), doc});
    if (doc.contains("status"))
      cases.push_back({f.path.filename().string() + " (status write)", doc, "strict", "status"});
  }
  for (const auto& p : testing::yaml_files(testing::source_dir() / "examples")) {
    cases.push_back({p.filename().string(), load_yaml(testing::read_text(p), p.string())});
  }
  return cases;
}

std::vector<Case> probe_cases(const json& c) {
  std::vector<Case> cases;
  const auto base_of = [](const char* file) {
    const auto path = testing::source_dir() / file;
    return load_yaml(testing::read_text(path), path.string());
  };
  // The examples between them set most of the spec; what a base lacks, the probes add.
  for (const char* file : {"examples/imagenet-resnet50.yaml", "examples/cifar10-resnet9.yaml",
                           "tests/corpus/valid/imagefolder-phases.yaml"}) {
    for (auto& p : testing::schema_probes(schema_of(c), base_of(file), "spec")) {
      cases.push_back({std::string(file) + ": " + p.name, std::move(p.document)});
    }
  }
  const json with_status = base_of("tests/corpus/valid/piecewise-with-status.yaml");
  for (auto& p : testing::envelope_probes(with_status)) cases.push_back({p.name, std::move(p.document)});
  for (auto& p : testing::schema_probes(schema_of(c), with_status, "status")) {
    cases.push_back({"status write: " + p.name, std::move(p.document), "strict", "status"});
  }
  return cases;
}

// Every strict create again under field validation Ignore.
void add_ignore_mode(std::vector<Case>& cases) {
  const size_t n = cases.size();
  for (size_t i = 0; i < n; ++i) {
    Case ignore = cases[i];
    ignore.mode = "ignore";
    ignore.name += " [fieldValidation=Ignore]";
    cases.push_back(std::move(ignore));
  }
}

// Runs every case on both sides; returns the disagreements, one line each.
std::vector<std::string> compare(const std::vector<Case>& cases, size_t& refused_by_both) {
  const std::vector<Verdict> oracle = ask_oracle(cases);
  if (oracle.size() != cases.size()) return {"the oracle answered " + std::to_string(oracle.size()) + " verdicts"};
  const Standin standin(crd());
  std::vector<std::string> out;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Verdict s = standin.judge(cases[i]);
    if (!s.accepted && !oracle[i].accepted) ++refused_by_both;
    if (std::string why = disagreement(s, oracle[i]); !why.empty()) out.push_back(cases[i].name + ": " + why);
  }
  return out;
}

std::string first_lines(const std::vector<std::string>& lines, size_t n = 40) {
  std::string out;
  for (size_t i = 0; i < std::min(n, lines.size()); ++i) out += lines[i] + "\n";
  if (lines.size() > n) out += "... and " + std::to_string(lines.size() - n) + " more\n";
  return out;
}

TEST(CrdOracle, StandinAndOracleAgreeOnTheCorpusAndExamples) {
  std::vector<Case> cases = corpus_cases();
  ASSERT_GE(cases.size(), 30u);
  add_ignore_mode(cases);
  size_t refused = 0;
  const auto disagreements = compare(cases, refused);
  EXPECT_TRUE(disagreements.empty()) << disagreements.size() << " of " << cases.size() << " cases:\n"
                                     << first_lines(disagreements);
  EXPECT_GE(refused, 10u) << "the corpus's invalid files are refused by both";
}

// The oracle also agrees with what the corpus files say of themselves (`# schema: accepts`, `# expect:` paths):
// its verdicts are not just the stand-in's echoed.
TEST(CrdOracle, OracleReadsTheCorpusAsItsAnnotationsSay) {
  const auto files = testing::corpus();
  std::vector<Case> cases;
  for (const auto& f : files) cases.push_back({f.path.string(), load_yaml(f.text, f.path.string())});
  const std::vector<Verdict> verdicts = ask_oracle(cases);
  ASSERT_EQ(verdicts.size(), files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    SCOPED_TRACE(files[i].path.string());
    // A create drops status (status subresource): a file wrong only there is admitted.
    const auto& paths = files[i].expected_paths;
    const bool only_status = !paths.empty() && std::all_of(paths.begin(), paths.end(), [](const std::string& p) {
      return p.rfind("status.", 0) == 0;
    });
    // An apiVersion the CRD does not serve is not routed to it (kubectl: no matches for kind), whatever the schema.
    const bool unserved = files[i].text.find("apiVersion: torus.dev/v1alpha1") == std::string::npos;
    EXPECT_EQ(verdicts[i].accepted, (files[i].schema_accepts || only_status) && !unserved) << describe(verdicts[i]);
    if (!verdicts[i].accepted) {
      for (const auto& p : paths)
        EXPECT_TRUE(unserved || verdicts[i].paths.count(p)) << p << ": " << describe(verdicts[i]);
    }
  }
}

TEST(CrdOracle, StandinAndOracleAgreeOnEveryFieldProbe) {
  const json c = crd();
  std::vector<Case> cases = probe_cases(c);
  ASSERT_GE(cases.size(), 1000u);
  add_ignore_mode(cases);
  size_t refused = 0;
  const auto disagreements = compare(cases, refused);
  EXPECT_TRUE(disagreements.empty()) << disagreements.size() << " of " << cases.size() << " cases:\n"
                                     << first_lines(disagreements);
  EXPECT_GE(refused, cases.size() / 4) << "the probes reach the schema's refusals";
  EXPECT_LE(refused, cases.size() * 9 / 10) << "and its acceptances";
}

// A CRD with what the oracle does not model (a CEL rule, a default) is not judged: the test fails instead of
// comparing against an oracle that would silently ignore it.
TEST(CrdOracle, OracleRefusesToJudgeWhatItDoesNotModel) {
  test::TempDir dir("crd-oracle");
  std::string text = testing::read_text(kCrdFile);
  const std::string anchor = "            spec:\n              type: object\n";
  ASSERT_NE(text.find(anchor), std::string::npos);
  for (const char* extra : {"              x-kubernetes-validations: [{rule: \"self.gang.workers > 0\"}]\n",
                            "              default: {}\n"}) {
    const std::string changed = std::string(text).replace(text.find(anchor), anchor.size(), anchor + extra);
    const test::ShellResult r =
        test::run_shell("echo '[]' > " + dir.file("none.json") + " && /usr/bin/python3 " + kOracle + " " +
                        dir.write("crd.yaml", changed) + " " + dir.file("none.json"));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(std::string(extra).find("x-kubernetes-validations") != std::string::npos
                                ? "x-kubernetes-validations"
                                : "default"),
              std::string::npos)
        << r.output;
  }
}

}  // namespace
}  // namespace torus::api
