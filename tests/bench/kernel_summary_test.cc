// bench/gpu/kernel_summary.py, which reads a profiled step's per-kernel table (bench/gpu/profile.sh): each kernel
// lands in its kind (Torus's batch norm and element-wise kernels, cuDNN's passes, NCCL), times are per step, both
// profilers' CSVs read alike, and a table it cannot read is a clear error.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"

namespace torus::test {
namespace {

ShellResult summarize(const std::string& csv_path, const std::string& args) {
  return run_shell("/usr/bin/python3 " + std::string(TORUS_SOURCE_DIR) + "/bench/gpu/kernel_summary.py " + csv_path +
                   " " + args);
}

std::string result_line(const std::string& output) {
  const size_t at = output.rfind("RESULT ");
  return at == std::string::npos ? "" : output.substr(at);
}

// `nsys stats --report cuda_gpu_kern_sum --format csv`: one row per kernel name, totals over the profiled steps,
// after nsys's own notes.
TEST(KernelSummary, NsightSystemsTotalsGoToTheirKindsPerStep) {
  TempDir dir("kernel-summary");
  const std::string csv = dir.write("nsys.csv",
                                    "Processing [resnet50.sqlite] with [cuda_gpu_kern_sum.py]... \n"
                                    "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev "
                                    "(ns),Name\n"
                                    "40.0,8000000,106,1,1,1,1,0,\"void torus::worker::cuda::(anonymous "
                                    "namespace)::bn_apply_relu_mask_kernel<(torus::worker::DType)2>(...)\"\n"
                                    "30.0,6000000,16,1,1,1,1,0,sm90_xmma_wgrad_implicit_gemm_bf16bf16_f32\n"
                                    "15.0,3000000,53,1,1,1,1,0,sm90_xmma_fprop_implicit_gemm_bf16\n"
                                    "10.0,2000000,10,1,1,1,1,0,\"void torus::worker::cuda::add_kernel<2>(...)\"\n"
                                    "5.0,1000000,4,1,1,1,1,0,ncclDevKernel_AllReduce_Sum_f32_RING_LL\n");
  const ShellResult r = summarize(csv, "--steps 2 --label resnet50_bf16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("10.00 ms of GPU time per step"), std::string::npos) << r.output;
  const std::string result = result_line(r.output);
  for (const char* field :
       {"resnet50_bf16_gpu_ms_per_step=10.00", "resnet50_bf16_batch_norm_ms=4.00", "resnet50_bf16_conv_wgrad_ms=3.00",
        "resnet50_bf16_conv_fprop_ms=1.50", "resnet50_bf16_elementwise_ms=1.00", "resnet50_bf16_nccl_ms=0.50"})
    EXPECT_NE(result.find(field), std::string::npos) << field << " in " << result;
  EXPECT_NE(r.output.find("53.0  batch_norm"), std::string::npos) << "106 calls over 2 steps\n" << r.output;
}

// `ncu --csv --metrics gpu__time_duration.sum`: one row per launch, in the unit ncu chose, after its ==PROF== lines
// and whatever the profiled program printed.
TEST(KernelSummary, NsightComputeLaunchesAddUpWithTheirUnits) {
  TempDir dir("kernel-summary");
  const std::string header =
      "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\","
      "\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";
  auto row = [](int id, const std::string& name, const std::string& unit, const std::string& value) {
    return "\"" + std::to_string(id) + "\",\"1\",\"torus_gpu_bench\",\"h\",\"" + name +
           "\",\"1\",\"7\",\"(32, 8, 1)\",\"(2, 64, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\","
           "\"gpu__time_duration.sum\",\"" +
           unit + "\",\"" + value + "\"\n";
  };
  const std::string csv =
      dir.write("ncu.csv", "==PROF== Connected to process 42\n# resnet50 bf16 batch 128: 40.0 ms/step\n" + header +
                               row(0, "bn_moments_kernel", "usecond", "1,500.00") +
                               row(1, "bn_moments_kernel", "nsecond", "500,000") +
                               row(2, "sm90_xmma_dgrad_implicit_gemm", "msecond", "2") +
                               row(3, "mystery_kernel", "usecond", "1") + "==PROF== Disconnected from process 42\n");
  const ShellResult r = summarize(csv, "--steps 1 --label x");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string result = result_line(r.output);
  for (const char* field :
       {"x_gpu_ms_per_step=4.00", "x_batch_norm_ms=2.00", "x_conv_dgrad_ms=2.00", "x_other_ms=0.00"})
    EXPECT_NE(result.find(field), std::string::npos) << field << " in " << result;
}

TEST(KernelSummary, ATableWithoutKernelColumnsIsAClearError) {
  TempDir dir("kernel-summary");
  const ShellResult r = summarize(dir.write("empty.csv", "no profile here\n"), "--steps 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no kernel table"), std::string::npos) << r.output;
  const ShellResult steps = summarize(dir.write("any.csv", "x\n"), "--steps 0");
  EXPECT_NE(steps.exit_code, 0);
  EXPECT_NE(steps.output.find("--steps"), std::string::npos) << steps.output;
}

}  // namespace
}  // namespace torus::test
