#!/usr/bin/env python3
"""scripts/test_summary.py on a results folder as scripts/lib.sh leaves it: each lane with its counts, every skipped
test with its GoogleTest reason, the tests a lane leaves out, a lane switched off, the configure step's words."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../scripts"))
import test_summary  # noqa: E402


def case(name, status, output="", skipped=None):
    skip = f'<skipped message="{skipped}"/>' if skipped else ""
    return (f'<testcase name="{name}" classname="{name}" time="0.1" status="{status}">{skip}'
            f"<system-out>{output}</system-out></testcase>")


GPU_SKIP = ("[ RUN      ] GpuTest.SgdMatchesCpu\ntests/gpu/gpu_backend_test.cc:40: Skipped\n"
            "no CUDA device: cudaGetDeviceCount found none\n\n[  SKIPPED ] GpuTest.SgdMatchesCpu (0 ms)\n")


class Summary(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def summary(self):
        return "\n".join(test_summary.summarize(self.dir))

    def test_every_lane_with_its_counts_every_skip_with_its_reason(self):
        self.write("configure.log", "-- Torus: oneDNN 2.6.3\n-- Torus: no CUDA compiler; CUDA backend disabled\n"
                   "-- Configuring done\n")
        self.write("lanes", "suite 0 125 build/\nasan off TORUS_SANITIZER_LANE=0\ntsan 8 61 build-tsan/\n")
        self.write("suite.xml", "<testsuite>" + case("Planner.A", "run") + case("Planner.B", "run")
                   + case("GpuTest.SgdMatchesCpu", "notrun", GPU_SKIP, "SKIP_REGULAR_EXPRESSION_MATCHED")
                   + case("Nccl.X", "notrun", "tests/comm/nccl.cc:19: Skipped\n\n[  SKIPPED ] Nccl.X (0 ms)\n",
                          "SKIP_REGULAR_EXPRESSION_MATCHED")
                   + "</testsuite>")
        self.write("tsan.xml", "<testsuite>" + case("Store.A", "run") + case("WorkQueue.B", "fail") + "</testsuite>")
        self.write("tsan.excluded", "WatchdogDeathTest.C\tits order is reversed under TSan\n")
        text = self.summary()
        self.assertIn("configure (build/): Torus: no CUDA compiler; CUDA backend disabled", text)
        self.assertNotIn("Configuring done", text)
        self.assertIn("lane suite (build/): passed: 2 passed, 0 failed, 2 skipped, 2 min 5 s", text)
        self.assertIn("lane asan: OFF, not run (TORUS_SANITIZER_LANE=0)", text)
        self.assertIn("lane tsan (build-tsan/): FAILED (exit 8): 1 passed, 1 failed, 0 skipped, 1 min 1 s", text)
        self.assertIn("left out of lane tsan (1): its order is reversed under TSan", text)
        self.assertIn("WatchdogDeathTest.C", text)
        self.assertIn("suite (1): no CUDA device: cudaGetDeviceCount found none\n      GpuTest.SgdMatchesCpu", text)
        self.assertIn("suite (1): (GTEST_SKIP without a message)\n      Nccl.X", text)
        self.assertIn("tsan: WorkQueue.B: failed", text)
        self.assertTrue(text.endswith("result: FAILED in lane(s) tsan"), text)

    def test_a_command_that_stopped_before_its_lanes_says_so(self):
        text = self.summary()
        self.assertIn("no record of the configure step", text)
        self.assertIn("no lane ran", text)

    def test_all_passed(self):
        self.write("lanes", "suite 0 10 build/\ndemo 0 70 build-demo/\n")
        self.write("suite.xml", "<testsuite>" + case("A.B", "run") + "</testsuite>")
        text = self.summary()
        self.assertIn("lane demo (build-demo/): passed: 1 min 10 s", text)
        self.assertIn("skipped tests: none", text)
        self.assertTrue(text.endswith("result: every lane that ran passed (2 of 2)"), text)

    def test_a_parameterized_name_loses_its_parameter_dump_but_not_its_isa_suffix(self):
        self.assertEqual(test_summary.short_name("G/W.E/n1  # GetParam() = 48-byte object <01-00>.AVX2"), "G/W.E/n1.AVX2")
        self.assertEqual(test_summary.short_name("G/W.E/n1  # GetParam() = 48-byte object <01-00>"), "G/W.E/n1")
        self.assertEqual(test_summary.short_name("Store.A"), "Store.A")


if __name__ == "__main__":
    unittest.main()
