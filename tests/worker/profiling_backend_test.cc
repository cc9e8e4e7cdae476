// ProfilingBackend (worker/backend/profiling_backend.h): the per-op and per-layer profiles of torus-train-bench.
#include "worker/backend/profiling_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "worker/backend/cpu/cpu_backend.h"

namespace torus::worker {
namespace {

// Runs one forward convolution of each geometry through `profiled`.
void run_convs(Backend& inner, ProfilingBackend& profiled, const std::vector<ConvGeometry>& geometries) {
  for (const ConvGeometry& g : geometries) {
    const auto w_elements = static_cast<int64_t>(inner.conv_weight_elements(g));
    Buffer w = inner.allocate(w_elements * 4);
    std::vector<float> x(g.input_shape().numel(), 1.0f), y(g.output_shape().numel());
    std::vector<float> host_w(g.weight_shape().numel(), 0.5f);
    Tensor native_w(w.data(), {w_elements});
    profiled.conv_weight_import(g, host_w.data(), native_w);
    profiled.conv_forward(g, Tensor(x.data(), g.input_shape()), native_w, Tensor(y.data(), g.output_shape()));
    EXPECT_FLOAT_EQ(y[0], 0.5f * 4 * static_cast<float>(g.c_in)) << "a corner output sums 2x2 taps x c_in";
  }
}

const ConvGeometry kNarrow{.n = 2, .h = 8, .w = 8, .c_in = 8, .c_out = 16, .kh = 3, .kw = 3, .pad = 1};
const ConvGeometry kWide{.n = 2, .h = 4, .w = 4, .c_in = 16, .c_out = 32, .kh = 3, .kw = 3, .pad = 1};

TEST(ProfilingBackend, PerOpAddsEveryConvolutionUnderOneName) {
  auto cpu = cpu::make_cpu_backend(1);
  ProfilingBackend profiled(*cpu);
  run_convs(*cpu, profiled, {kNarrow, kWide, kNarrow});
  ASSERT_EQ(profiled.stats().size(), 1u);
  EXPECT_EQ(profiled.stats().at("conv_forward").calls, 3);
  EXPECT_NE(profiled.report().find("conv_forward"), std::string::npos);
}

TEST(ProfilingBackend, PerShapeSplitsConvolutionsByGeometry) {
  auto cpu = cpu::make_cpu_backend(1);
  ProfilingBackend profiled(*cpu, ProfileDetail::kPerShape);
  run_convs(*cpu, profiled, {kNarrow, kWide, kNarrow});
  ASSERT_EQ(profiled.stats().size(), 2u);
  EXPECT_EQ(profiled.stats().at("conv_forward 8>16 8x8 k3s1").calls, 2);
  EXPECT_EQ(profiled.stats().at("conv_forward 16>32 4x4 k3s1").calls, 1);
  profiled.reset();
  EXPECT_TRUE(profiled.stats().empty());
}

std::string source(const std::string& path) {
  std::ifstream in(std::string(TORUS_SOURCE_DIR) + "/" + path);
  std::stringstream text;
  text << in.rdbuf();
  // Comments out: a word in a comment is not a declaration.
  return std::regex_replace(text.str(), std::regex("//[^\n]*"), "");
}

// The names of the virtual functions `class Backend` declares (its destructor aside), read from backend.h.
std::set<std::string> backend_virtuals() {
  const std::string text = source("worker/backend/backend.h");
  const size_t begin = text.find("class Backend {");
  std::set<std::string> names;
  static const std::regex kVirtual(R"(virtual\s+([^;{(]*?)\b(\w+)\s*\()");
  for (auto it = std::sregex_iterator(text.begin() + static_cast<std::ptrdiff_t>(begin), text.end(), kVirtual);
       it != std::sregex_iterator(); ++it) {
    if ((*it)[1].str().find('~') == std::string::npos) names.insert((*it)[2]);
  }
  return names;
}

// Backend gains an op: the wrapper must override it, and pass it on unless kNotForwarded says why not, or a profiled
// run would silently measure another path (the default of an optional op, the unfused ops).
TEST(ProfilingBackend, OverridesAndForwardsEveryVirtualOfBackend) {
  const std::set<std::string> virtuals = backend_virtuals();
  ASSERT_GT(virtuals.size(), 50u) << "the parse of backend.h found too few virtuals";
  const std::string wrapper = source("worker/backend/profiling_backend.h");
  for (const std::string& name : virtuals) {
    EXPECT_TRUE(std::regex_search(wrapper, std::regex("\\b" + name + R"(\s*\([^;{]*\boverride\b)")))
        << "ProfilingBackend does not override Backend::" << name;
    const bool passed_on = wrapper.find("inner_." + name + "(") != std::string::npos;
    const bool said_why = std::find(ProfilingBackend::kNotForwarded.begin(), ProfilingBackend::kNotForwarded.end(),
                                    name) != ProfilingBackend::kNotForwarded.end();
    EXPECT_TRUE(passed_on || said_why) << "ProfilingBackend::" << name << " does not call inner_." << name;
    EXPECT_FALSE(passed_on && said_why) << name << " is forwarded and listed as not forwarded";
  }
}

// What the wrapper offers is the inner backend's, less the captured step (every op is timed and synchronized).
TEST(ProfilingBackend, OffersWhatTheInnerBackendOffersButCapture) {
  auto cpu = cpu::make_cpu_backend(1);
  ProfilingBackend profiled(*cpu);
  EXPECT_FALSE(profiled.training_offers().capture);
  EXPECT_EQ(profiled.training_offers().staging, cpu->training_offers().staging);
  EXPECT_EQ(profiled.capture_step([] {}), nullptr);
  EXPECT_EQ(profiled.describe().rfind(cpu->describe(), 0), 0u) << profiled.describe();
  // The fused update is passed on and timed under its own name (unforwarded, Backend's loop called this wrapper's
  // sgd_update once per segment: another path than the inner backend's).
  std::vector<float> p(8, 1.0f), g(8, 0.5f), m(8, 0.0f);
  const std::vector<SgdSegment> segments = {{0, 5, 0.0f}, {5, 3, 0.0f}};
  profiled.sgd_update_segments(Tensor(p.data(), {8}), Tensor(g.data(), {8}), Tensor(m.data(), {8}), segments,
                               SgdHyper{.lr = 0.1f});
  EXPECT_EQ(profiled.stats().at("sgd_update_segments").calls, 1);
  EXPECT_EQ(profiled.stats().count("sgd_update"), 0u) << "the inner backend ran it, not the base class loop";
  EXPECT_FLOAT_EQ(p[7], 1.0f - 0.1f * 0.5f);
}

}  // namespace
}  // namespace torus::worker
