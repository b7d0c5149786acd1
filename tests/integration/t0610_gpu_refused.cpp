// t0610_gpu_refused.cpp — a GPU the worker cannot have is refused, and the reason reaches the user:
// `salamander run` of a job on a GPU ordinal no machine has (cuda:63) fails at once, naming the
// device, whether this build has the CUDA path (the worker refuses: no such GPU) or not (run
// refuses before starting anything); and on a machine without an NVIDIA driver, so does cuda:0.
// Runs everywhere (no GPU needed).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// Runs a tiny job on `devices`; REQUIREs a failure within 20 s; returns the output.
std::string refused_run(const std::string& dir, const std::string& devices) {
  MeshOptions shape;
  std::string name = "gpu-" + devices.substr(5);
  std::ofstream(dir + "/" + name + ".lua") << "return { " << shape.model << " " << shape.data
                                           << " mesh = { nodes = 1, devices = '" << devices << "' },"
                                           << " policies = { min_replicas = 1 } }\n";
  Proc run = spawn({bin(), "run", dir + "/" + name + ".lua", "--steps", "5", "--out", dir + "/" + name},
                   dir + "/" + name + ".out");
  int rc = run.wait(20000);
  std::string out = run.output();
  INFO(out);
  REQUIRE(rc == 1);
  return out;
}

// One of the two refusals, naming the device.
void check_refusal(const std::string& out, const std::string& device) {
  INFO(out);
  CHECK(out.find(device) != std::string::npos);
  bool no_gpu = out.find("no worker could start") != std::string::npos &&
                (out.find(device + ": no such GPU") != std::string::npos ||
                 out.find(device + ": this machine has no usable GPU") != std::string::npos);
  bool no_cuda = out.find("this build of salamander has no CUDA path") != std::string::npos;
  CHECK((no_gpu || no_cuda));
}

}  // namespace

TEST_CASE("t0610-gpu-refused: a cuda device this machine or build cannot give is refused with the reason") {
  std::string dir = temp_dir("gpu-refused");
  check_refusal(refused_run(dir, "cuda:63"), "cuda:63");
  if (std::filesystem::exists("/dev/nvidiactl") || std::filesystem::exists("/dev/nvidia0")) {
    MESSAGE("an NVIDIA driver is present: cuda:0 may be a real GPU, not checked here");
    return;
  }
  check_refusal(refused_run(dir, "cuda:0"), "cuda:0");
}
