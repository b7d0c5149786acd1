// main.cpp — `salamander`: one binary, one subcommand per role (see `salamander help`).
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"

namespace {

const char* kHelp = R"(salamander — resilient, elastic Mixture-of-Experts training

usage: salamander <command> [options]      (salamander <command> --help for its options)

commands:
  run [JOB.lua]        start a controller and a local mesh of agents; run the job
  controller JOB.lua   serve a job's controller (agents connect to its mesh endpoint)
  agent                join a controller as one node; run one worker per device
  repl [ENDPOINT]      attach a Lua prompt to a live controller (-e CHUNK for one-shot)
  job check FILE.lua   check a job file; `job schema` lists every key
  policy SUBCOMMAND    check a policy, plan, recovery probability, SPARe layout, MoEtion window
  sample --checkpoint DIR   print what a trained model writes after a prompt (--logits: its logits)
  export --checkpoint DIR   write a checkpoint as named tensors with its config (--format safetensors)
  report RUN_DIR       write a run's HTML report; --compare DIR... for several runs
  sim SCENARIO.lua     simulate a scenario (scripts/experiments/): strategies, sweeps, a report
  sim fit RUN_DIR      a scenario that replays a finished run, its step-time model fitted
  sim ettr|spare       the simulator's quick checks: Monte Carlo beside the closed forms
                       (sim --fields lists every scenario field)
  keygen NAME          make a CURVE key pair (NAME.key, NAME.pub) for non-loopback endpoints
  version              print the version and build features
)";

int version() {
#ifdef SAL_HAVE_CUDA
  const char* cuda = "CUDA path built";
#else
  const char* cuda = "CPU only (no CUDA path)";
#endif
  std::printf("salamander %s (%s)\n", SAL_VERSION, cuda);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kHelp, stderr);
    return 2;
  }
  std::string cmd = argv[1];
  sal::cli::Args args(argv + 2, argv + argc);
  using namespace sal::cli;
  if (cmd == "run") return cmd_run(args);
  if (cmd == "controller") return cmd_controller(args);
  if (cmd == "agent") return cmd_agent(args);
  if (cmd == "worker") return cmd_worker(args);
  if (cmd == "repl") return cmd_repl(args);
  if (cmd == "job") return cmd_job(args);
  if (cmd == "keygen") return cmd_keygen(args);
  if (cmd == "policy") return cmd_policy(args);
  if (cmd == "sample") return cmd_sample(args);
  if (cmd == "export") return cmd_export(args);
  if (cmd == "sim") return cmd_sim(args);
  if (cmd == "report") return cmd_report(args);
  if (cmd == "version" || cmd == "--version") return version();
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::fputs(kHelp, stdout);
    return 0;
  }
  std::fprintf(stderr, "salamander: unknown command '%s'\n\n%s", cmd.c_str(), kHelp);
  return 2;
}
