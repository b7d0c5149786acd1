// command_table.cpp — the one definition of every `salamander` command and option. The parser,
// each command's --help, `salamander help` and docs/cli.md (`salamander help --markdown`, checked
// by t0310) are all generated from this table; nothing else declares a command or an option.
#include "cli/commands.h"
#include "cli/common.h"

namespace sal::cli {
namespace {

// `policy plan`'s options; `policy recovery --compare` takes the same allocation inputs.
std::vector<OptSpec> plan_options() {
  return {{"--loads", "FILE", "expert loads: CSV (a line per layer), SmartMoE trace lines or a JSON array of layers"},
          {"--steps", "DIR", "recorded steps: a directory of load files, one a step (train.record_routing's "
                             "table_iter<N>.log), or a file per step and rank (SmartMoE's table_iter<N>_rank<R>.log), "
                             "each step's ranks summed (the text output says what was read: \"80 files: 5 steps of "
                             "16 ranks\"); the last 16 are the placement's ctx.steps and the frontier's balance is "
                             "judged on them; without --loads the loads are their mean"},
          {"--nodes", "N", "nodes (plan positions)"},
          {"--slots", "C", "expert slots per node"},
          {"--min-replicas", "F", "fault-tolerance floor f (default 2)"},
          {"--allocation", "NAME|FILE", "allocation policy (default lazarus)"},
          {"--placement", "NAME|FILE", "placement policy (default goodput)"},
          {"--node-mtbf-h", "H", "mean hours between failures of one node, for the placement's goodput (default: "
                                 "assumed 5000)"},
          {"--correlated", "Q", "probability that a node loss takes another node with it (default 0)"},
          {"--current", "PLAN.json", "the plan in force (a plan file): what its nodes hold is the placement's "
                                     "ctx.current, as in a live re-plan (nodes beyond it: new, holding nothing)"},
          {"--fetch-s", "S", "with --current: seconds one worker takes to fetch one expert replica (ctx.moves; "
                             "with --horizon-s, the re-plan weighs its moves in seconds instead of a 1 % margin)"},
          {"--horizon-s", "H", "with --current: seconds a placement is expected to stand (the next rebalance or loss)"},
          {"--frontier", "", "the frontier of balance against recovery instead of one plan, and the placement's choice"},
          {"--json", "", "print the plan file (JSON; with --frontier the frontier)"}};
}

std::vector<OptSpec> recovery_options() {
  std::vector<OptSpec> opts = {{"--plan", "PLAN.json", "a plan file (salamander policy plan --json)"},
                               {"--failures", "K", "failed nodes (with --plan; default 1)"},
                               {"--compare", "A,B,...", "placement policies to compare on --loads"},
                               {"--max-failures", "K", "with --compare: k = 0..K (default min(N, 8))"},
                               {"--layers", "L,M,...", "with --compare: only these layers of the loads (0-based)"}};
  for (const auto& o : plan_options())
    if (o.name != "--placement" && o.name != "--json" && o.name != "--frontier" && o.name != "--node-mtbf-h" &&
        o.name != "--correlated" && o.name != "--steps" && o.name != "--current" && o.name != "--fetch-s" &&
        o.name != "--horizon-s")
      opts.push_back(o);
  opts.push_back({"--json", "", "print the probabilities as JSON"});
  return opts;
}

const char* const kCpuShareHelp =
    "benchmarks: each worker in a CPU cgroup of its own with a quota of F CPUs, so N workers on few cores "
    "behave like N slower dedicated cores (cgroup v1 cpu controller, as root; without it the run says so and "
    "runs unconfined)";

std::vector<CommandDef> make_table() {
  return {
      {{.name = "run",
        .operands = "[JOB.lua]",
        .brief = "start a controller and a local mesh of agents; run the job",
        .synopsis = "run [JOB.lua] [options]",
        .summary = "Runs a job on a local mesh: this process is the controller, and it starts the job's agents "
                   "(mesh.nodes) as child processes on loopback. Without JOB.lua it runs the embedded default "
                   "(scripts/jobs/quickstart.lua). Prints the REPL endpoint first.",
        .options = {{"--nodes", "N", "local agents to start (default: the job's mesh.nodes)"},
                    {"--set", "PATH=VALUE,...", kSetHelp},
                    {"--steps", "S", "the job's steps: sets train.steps, so the learning-rate schedule (warmup, cosine "
                                     "decay) ends with them (default: the job's train.steps, or a drill's steps; 0: idle "
                                     "until stopped)"},
                    {"--repl", "ENDPOINT", "where the REPL listens (default: the job's repl.bind)"},
                    {"--metrics", "ADDR", kMetricsHelp},
                    {"--out", "DIR", "run directory (default: runs/<job>-<time>)"},
                    {"--json", "", "end with one JSON summary object on stdout"},
                    {"--drill", "DRILL.lua", "run a failure drill (scripts/drills/) against the job"},
                    {"--drill-arg", "K=V,...", "values the drill script reads from its `args` table"},
                    {"--modes", "M,M,...",
                     "run once per recovery mode (elastic, fixed-ep-ft, checkpoint-restart) and write "
                     "<out>/compare.html and compare.json"},
                    {"--repeat", "N",
                     "with --modes: run each mode N times, the modes alternating (<out>/<mode>/run-K), and give "
                     "medians and ranges (default 1)"},
                    {"--resume", "CHECKPOINT|RUN_DIR",
                     "continue from a checkpoint or complete snapshot (or a run directory: its final checkpoint, "
                     "else its newest snapshot): weights, optimizer state, schedule and data position go on from "
                     "its step; the job is the one the run directory recorded, unless JOB.lua or --set is given; "
                     "with --modes every mode's run starts from it (the source is only read)"},
                    {"--resume-anyway", "",
                     "with --resume and a JOB.lua or --set that differs from the job the run recorded: train it "
                     "anyway (without it the run is refused, naming each key that differs)"},
                    {"--cpu-share", "F", kCpuShareHelp},
                    {"--supervise", "",
                     "run the controller as a child process, and bring it back from the journal (controller "
                     "--resume) if it dies; the agents ride out its absence (implied by a drill that kills the "
                     "controller or cuts links)"}},
        .max_positional = 1},
       cmd_run},
      {{.name = "controller",
        .operands = "[JOB.lua]",
        .brief = "serve a job's controller (agents connect to its mesh endpoint); --resume brings one back",
        .synopsis = "controller [JOB.lua] [options] | controller --resume RUN_DIR [options]",
        .summary = "Serves the controller of a job (without JOB.lua, the embedded default): agents join its mesh "
                   "endpoint, operators its REPL. With --resume, a controller that died comes back: its job, "
                   "committed steps, plan and running drill are read from RUN_DIR's journal, it binds the mesh "
                   "endpoint its agents reconnect to, and training goes on from the last committed step.",
        .options = {{"--resume", "RUN_DIR", "resume the job whose run directory (--out) holds journal.jsonl"},
                    {"--mesh", "ENDPOINT", "mesh endpoint (default: the job's mesh.bind; with --resume, the journal's)"},
                    {"--repl", "ENDPOINT", "REPL endpoint (default: the job's repl.bind)"},
                    {"--metrics", "ADDR", kMetricsHelp},
                    {"--steps", "N", "steps to drive, then stop: sets train.steps, the learning-rate schedule's "
                                     "length (default: the job's train.steps; with --resume the journal's, and the "
                                     "schedule stays the journal's job's)"},
                    {"--set", "PATH=VALUE,...", kSetHelp},
                    {"--server-key", "FILE",
                     "CURVE: the controller's key pair (default: the job's security.server_key; with --resume "
                     "give it again)"},
                    {"--allow", "FILE",
                     "CURVE: the allowlist, '<public key> <role> <name>' a line (default: the job's "
                     "security.allow; goes with --server-key)"},
                    {"--out", "DIR",
                     "the run directory: events, metrics, snapshots, the journal --resume reads, and at the end "
                     "summary.json and report.html"},
                    {"--json", "", "end with one JSON summary object on stdout (as `run --json`)"},
                    {"--drill", "DRILL.lua", "run a failure drill against the job (`add` and killing the controller "
                                             "need `salamander run`, which hosts the controller)"},
                    {"--drill-arg", "K=V,...", "values the drill script reads from its `args` table"},
                    {"--host-fd", "FD", "set by salamander run: the pipe its hosted controller asks it on"},
                    {"--host-netns", "", "set by salamander run: its mesh is in network namespaces (a drill's "
                                         "partition{} can cut links)"},
                    {"--parent-pid", "PID", "die with this process (set by salamander run)"}},
        .max_positional = 1},
       cmd_controller},
      {{.name = "agent",
        .brief = "join a controller as one node; run one worker per device",
        .synopsis = "agent --controller ENDPOINT [--devices cpu:K|cuda:I,J] [options]",
        .summary = "Joins a controller as one node and runs one worker per device.",
        .options = {{"--controller", "ENDPOINT", "the controller's mesh endpoint (tcp://host:port)"},
                    {"--devices", "SPEC", "cpu:K (K CPU workers, default cpu:1) or cuda:0,1"},
                    {"--name", "NAME", "node name shown in job.nodes() (default host:pid)"},
                    {"--server-key", "KEY", "CURVE: the controller's public key (Z85 or a .pub file)"},
                    {"--key", "FILE", "CURVE: this agent's key pair (.key file from salamander keygen)"},
                    {"--controller-timeout-ms", "MS", "exit after this long without the controller (default 30000)"},
                    {"--parent-pid", "PID", "die with this process (set by salamander run)"},
                    {"--data-host", "HOST",
                     "address other workers reach this node's workers at for the data plane (default 127.0.0.1 "
                     "with a local controller, else this host's name)"},
                    {"--cpu-share", "F", kCpuShareHelp}}},
       cmd_agent},
      {{.name = "worker",
        .brief = "internal: a worker process, started by its agent",
        .synopsis = "worker --agent ENDPOINT --index I --device D [options]",
        .summary = "Internal: a worker process, started by its agent. Not for direct use.",
        .options = {{"--agent", "ENDPOINT", "the agent's local endpoint"},
                    {"--index", "I", "worker index on its node"},
                    {"--device", "DEVICE", "cpu:N or cuda:N"},
                    {"--node", "ID", "node id (log lines)"},
                    {"--parent-pid", "PID", "die with this process"},
                    {"--heartbeat-ms", "MS", "status interval towards the agent"},
                    {"--data-host", "HOST", "this worker's data-plane address (default 127.0.0.1)"},
                    {"--server-key", "KEY",
                     "the controller's CURVE public key (Z85), for a rendezvous store that is not local"},
                    {"--key", "FILE", "this node's CURVE key pair (the agent's)"},
                    {"--pending-plan-fd", "FD", "a relaunched worker: the plan to apply, left by its previous image"},
                    {"--relaunched-at", "NS", "a relaunched worker: when its previous image relaunched"}},
        .hidden = true},
       cmd_worker},
      {{.name = "repl",
        .operands = "[ENDPOINT]",
        .brief = "attach a Lua prompt to a live controller (-e CHUNK for one-shot)",
        .synopsis = "repl [ENDPOINT] [-e CHUNK [--json]] [options]",
        .summary = "A Lua prompt inside a live controller. Without ENDPOINT: $SALAMANDER_REPL, else the controller "
                   "you most recently started on this machine. A local endpoint admits you with the job's token, "
                   "which the controller keeps where only its user reads it: your runtime directory (found by the "
                   "endpoint) and RUN_DIR/repl.token.",
        .options = {{"-e", "CHUNK", "evaluate CHUNK (or a client command: \\load SLOT FILE), print the result and exit (non-zero on error)"},
                    {"--json", "", "with -e: print the result as JSON"},
                    {"--server-key", "KEY", "CURVE: the controller's public key (Z85 or a .pub file)"},
                    {"--key", "FILE", "CURVE: your key pair (.key file)"},
                    {"--token-file", "FILE", "a local endpoint's token (default: your runtime directory's for the endpoint)"},
                    {"--timeout-ms", "MS", "give up on a reply after MS (default: the server's budget + 5 s)"}},
        .max_positional = 1},
       cmd_repl},
      {{.name = "job check",
        .operands = "FILE.lua",
        .brief = "check a job file: every error at once, then that its data exists",
        .synopsis = "job check FILE.lua [--set PATH=VALUE,...]",
        .summary = "Checks a job file against the schema (every error at once, then that its data.path exists).",
        .options = {{"--set", "PATH=VALUE,...", kSetHelp}},
        .min_positional = 1,
        .max_positional = 1},
       job_check},
      {{.name = "job schema",
        .brief = "every job file key, its rule and default",
        .synopsis = "job schema [--markdown]",
        .summary = "Prints the job file schema: every key, its rule and default.",
        .options = {{"--markdown", "", "schema as a Markdown table (docs/job-file.md)"}}},
       job_schema},
      {{.name = "policy check",
        .operands = "FILE.lua",
        .brief = "load a policy, check its shape, run its selftest and decide on a synthetic context",
        .synopsis = "policy check FILE.lua [--json]",
        .summary = "Loads a policy file, checks its shape (api, kind, name, doc, decide), runs its selftest, then "
                   "runs decide on a small synthetic context of its kind and checks the proposal as the controller "
                   "would.",
        .options = {{"--json", "", "print the result as JSON"}},
        .min_positional = 1,
        .max_positional = 1},
       policy_check},
      {{.name = "policy plan",
        .brief = "replica counts and placement for expert loads (the plan file with --json)",
        .synopsis = "policy plan --loads FILE | --steps DIR --nodes N --slots C [--min-replicas F] [options]",
        .summary = "Runs an allocation and a placement policy on the loads and prints per layer the replica counts "
                   "and the node -> slots table (expert ids 0-based). --json prints the plan file. --frontier prints "
                   "instead the placements no other beats on both balance and recovery for the allocation's "
                   "replicas (docs/placement.md), the lowest balance those replicas allow, and which point the "
                   "placement policy chooses and why.",
        .options = plan_options()},
       policy_plan},
      {{.name = "policy recovery",
        .brief = "probability a plan survives k node failures; --compare placements",
        .synopsis = "policy recovery --plan PLAN.json --failures K | --compare A,B --loads FILE ...",
        .summary = "The probability that a plan survives k uniformly random node failures (host failures for a "
                   "plan with `domains`: a host fails with all its workers), per layer and jointly, "
                   "and how it was computed (exact, closed-form or monte-carlo); or a table of the joint "
                   "probability against k for several placement policies on the same allocation.",
        .options = recovery_options()},
       policy_recovery},
      {{.name = "policy spare",
        .brief = "SPARe shard layout and closed forms for N groups, redundancy r",
        .synopsis = "policy spare --groups N --redundancy R [--json]",
        .summary = "SPARe's shard layout for N data-parallel groups with redundancy r (a cyclic Golomb ruler: no "
                   "two shard types share more than one host), and its closed forms.",
        .options = {{"--groups", "N", "data-parallel groups"},
                    {"--redundancy", "R", "shards per group (default r* for N)"},
                    {"--failures", "K", "also the depth bound c(K) after K failures"},
                    {"--save", "TS", "with --mtbf and --restart: checkpoint save time (any unit)"},
                    {"--mtbf", "TF", "mean time between restart-forcing failures (same unit)"},
                    {"--restart", "TR", "restart time (same unit): prints Tc* and A*"},
                    {"--json", "", "print as JSON"}}},
       policy_spare},
      {{.name = "policy window",
        .brief = "MoEtion's sparse checkpoint window and schedule for a profile",
        .synopsis = "policy window --profile PROFILE.json [--json]",
        .summary = "MoEtion's window search: the smallest W_sparse whose per-iteration snapshot fits in one "
                   "iteration, and the schedule. PROFILE.json: {\"iteration_s\": T, \"bandwidth\": B, "
                   "\"operators\": [{\"name\", \"kind\", \"full_bytes\", \"compute_bytes\", \"popularity\"}, ...]}.",
        .options = {{"--profile", "FILE", "the profile (see above)"}, {"--json", "", "print as JSON"}}},
       policy_window},
      {{.name = "sample",
        .brief = "print what a trained model writes after a prompt (--logits: its logits)",
        .synopsis = "sample --checkpoint DIR [--prompt TEXT] [--bytes N] [--temperature T] [--seed S] "
                    "[--tokenizer SPM.model] | sample --checkpoint DIR --logits IDS",
        .summary = "Prints what a trained model writes after a prompt, or with --logits the model's logits for "
                   "token ids as JSON. A byte-level model reads and writes bytes; a model of token ids reads and "
                   "writes text through its sentencepiece tokenizer: --tokenizer, else the data.tokenizer of the "
                   "job its run recorded (RUN_DIR/journal.jsonl).",
        .options = {{"--checkpoint", "DIR", kCheckpointHelp},
                    {"--prompt", "TEXT", "the text to continue (default: a newline)"},
                    {"--bytes", "N", "bytes to generate, or tokens with a tokenizer (default 200)"},
                    {"--temperature", "T", "sampling temperature; 0 takes the most likely token (default 0.8)"},
                    {"--seed", "S", "random seed (default 1)"},
                    {"--tokenizer", "SPM.model",
                     "the sentencepiece model that made the training ids (default: the run's job's data.tokenizer)"},
                    {"--score", "FILE",
                     "also print the model's loss on the text in FILE (nats per byte, or per token with a tokenizer)"},
                    {"--logits", "IDS",
                     "print the logits [sequences][positions][vocab] for the token ids IDS as JSON instead: "
                     "comma-separated ids, ';' between sequences of one length (at most seq_len), e.g. "
                     "72,105;33,10"}}},
       cmd_sample},
      {{.name = "data prepare",
        .operands = "INPUT",
        .brief = "tokenise text (a file or a directory) into a token file for data.format uint16/uint32",
        .synopsis = "data prepare INPUT --out FILE (--model SPM.model | --train-vocab N) [options]",
        .summary = "Turns text into a token file a job reads (data.format = \"uint16\" or \"uint32\"): INPUT is a "
                   "text file, or every text file of a directory in name order (the rule of the bytes corpus: "
                   "regular, non-hidden files without a NUL byte; no symlinks, no subdirectories); each file read "
                   "must be UTF-8. The tokenizer is a sentencepiece model, brought with --model or trained on "
                   "INPUT's lines with --train-vocab (written to FILE.model: byte fallback, no normalisation, so "
                   "decoding gives the text back). Writes FILE (little-endian ids: uint16 when the vocabulary "
                   "has at most 65536 ids, else uint32), FILE.idx (where each document begins: uint64 token "
                   "offsets, then the total) and FILE.json (what the file is: dtype, vocab, tokenizer, counts, "
                   "sources). Progress goes to stderr on long work.",
        .options = {{"--out", "FILE", "the token file to write (its sidecars: FILE.idx, FILE.json, FILE.model)"},
                    {"--model", "SPM.model", "a sentencepiece model to tokenise with"},
                    {"--train-vocab", "N",
                     "train a sentencepiece model of N pieces on INPUT instead, written to FILE.model (256 byte "
                     "pieces, 3 special ones and one per common character come first: a few hundred at least)"},
                    {"--model-type", "TYPE", "with --train-vocab: bpe (the default) or unigram"},
                    {"--normalize", "RULE", "with --train-vocab: identity (the default: decoding gives the text back), "
                     "nfkc, nmt_nfkc or nfkc_cf (Unicode NFKC first; decoding gives the normalised text)"},
                    {"--seed", "S", "with --train-vocab: the seed of sentencepiece's sampling of lines (default 1)"},
                    {"--dtype", "TYPE",
                     "uint16 or uint32 (default: uint16 when the vocabulary fits, else uint32; uint16 is refused for "
                     "a larger vocabulary)"},
                    {"--documents", "RULE",
                     "where documents begin, for FILE.idx: file (each input file is one, the default) or "
                     "blank-lines (each block of lines with the blank lines after it)"}},
        .min_positional = 1,
        .max_positional = 1},
       cmd_data_prepare},
      {{.name = "export",
        .brief = "write a checkpoint as named tensors with its config (safetensors)",
        .synopsis = "export --checkpoint DIR [--format safetensors] [--out FILE] [--optimizer]",
        .summary = "Writes a checkpoint as one portable file: every tensor named (embed.tokens, "
                   "layers.L.attn.w_qkv, layers.L.gate.w, layers.L.experts.X.w1, ...), the model's configuration "
                   "and step as metadata. A moe-llama checkpoint is written in the Hugging Face layout (Mixtral's "
                   "names where it is a Mixtral) with a config.json beside the file, which `import` reads back.",
        .options = {{"--checkpoint", "DIR", kCheckpointHelp},
                    {"--format", "FORMAT", "the file format: safetensors (the only one, and the default)"},
                    {"--out", "FILE", "where to write it (default: model.safetensors in the current directory)"},
                    {"--optimizer", "", "also write AdamW's moments (optim.exp_avg.NAME, optim.exp_avg_sq.NAME)"}}},
       cmd_export},
      {{.name = "import",
        .operands = "HF_DIR",
        .brief = "turn a Hugging Face-style moe-llama checkpoint into one this engine runs from",
        .synopsis = "import HF_DIR --out DIR",
        .summary = "Reads HF_DIR/config.json (model_type mixtral, qwen2_moe, olmoe, or what export writes) and "
                   "model.safetensors (or model.safetensors.index.json and its shards; F32, F16 or BF16) and writes "
                   "the checkpoint DIR (a manifest and one file per unit) and DIR/job.lua with the model's section "
                   "filled in: set its data, then `salamander run DIR/job.lua --resume DIR`. A tensor the config "
                   "does not imply, or one of the wrong shape, is refused by name.",
        .options = {{"--out", "DIR", "the checkpoint directory to write (required)"}},
        .max_positional = 1},
       cmd_import},
      {{.name = "report",
        .operands = "RUN_DIR",
        .brief = "write a run's HTML report; --compare DIR... for several runs",
        .synopsis = "report RUN_DIR [--out FILE] | report --compare DIR DIR... --out FILE",
        .summary = "Writes a run's HTML report (plots and tables from its metrics, events, timeline, plans and "
                   "summary), or a page comparing several runs of the same job.",
        .options = {{"--out", "FILE", "where to write (default RUN_DIR/report.html; required with --compare)"},
                    {"--compare", "", "compare the run directories given (two or more)"}},
        .max_positional = 1024},
       cmd_report},
      {{.name = "sim",
        .operands = "SCENARIO.lua",
        .brief = "simulate a scenario (scripts/experiments/): strategies, sweeps, a report",
        .synopsis = "sim SCENARIO.lua [--trials T] [--seed S] [--set PATH=VALUE,...] [--json] [--out DIR] | sim --fields",
        .summary = "Runs a simulation scenario (scripts/experiments/*.lua): every sweep point, strategy and trial "
                   "on the event core, with the real policies. Prints the table (rows: sweep points; columns: "
                   "strategies) and writes result.json and report.html. Fields: docs/simulator.md or "
                   "`salamander sim --fields`.",
        .options = {{"--trials", "T", "trials per strategy and point (default: the scenario's)"},
                    {"--seed", "S", "seed (default: the scenario's)"},
                    {"--set", "PATH=VALUE,...", "override scenario fields, e.g. --set cluster.nodes=64,stop.steps=500"},
                    {"--json", "", "print the result as JSON instead of the table"},
                    {"--out", "DIR", "where result.json and report.html go (default runs/sim/<name>-<time>)"},
                    {"--no-report", "", "write no files"},
                    {"--quiet", "", "no progress line"},
                    {"--fields", "", "list every scenario field with its meaning and default, and exit"}},
        .max_positional = 1},
       sim_scenario},
      {{.name = "sim fit",
        .operands = "RUN_DIR",
        .brief = "a scenario that replays a finished run, its step-time model fitted",
        .synopsis = "sim fit RUN_DIR [-o SCENARIO.lua] [--job JOB.lua] [--json]",
        .summary = "Writes a scenario that replays a finished run in the simulator: its cluster, its node losses "
                   "and joins, a step-time model fitted to its step times, its measured recovery costs and its "
                   "training time as the horizon. `salamander sim SCENARIO.lua` then predicts the samples it "
                   "trained.",
        .options = {{"-o", "FILE", "the scenario to write (default RUN_DIR/sim-fit.lua)"},
                    {"--job", "JOB.lua", "the run's job file (default: the one its agent logs name)"},
                    {"--json", "", "print the fit as JSON"}},
        .min_positional = 1,
        .max_positional = 1},
       sim_fit},
      {{.name = "sim stacks",
        .operands = "RUN_DIR",
        .brief = "a grouped run's patches and depths against SPARe's model of the same failures",
        .synopsis = "sim stacks RUN_DIR [--json]",
        .summary = "For a run of data-parallel groups (parallel.groups): every failure in the middle of a step "
                   "(the groups it hit, those already down) is replayed through the simulator's SPARe reordering "
                   "model on the stacks of the plan in force; the model's verdict (masked at some depth, or wiped "
                   "out) is set beside what the run did (patched, or aborted), and each plan's all-reduce depth "
                   "beside the model's minimal depth. Exits 1 when they disagree.",
        .options = {{"--json", "", "print the comparison as JSON"}},
        .min_positional = 1,
        .max_positional = 1},
       sim_stacks},
      {{.name = "sim ettr",
        .brief = "effective training time ratio under failures: simulated beside the closed form",
        .synopsis = "sim ettr --mtbf S --iter-time S --interval N --ckpt-time S [options]",
        .summary = "The effective training time ratio of a job that checkpoints every N iterations, under failures "
                   "with the given mean time between them: simulated on the event core, beside the closed form "
                   "(exponential failures). The model is in engine/sim/ettr.h.",
        .options = {{"--mtbf", "S", "mean time between the job's failures (seconds)"},
                    {"--iter-time", "S", "one iteration (seconds)"},
                    {"--interval", "N", "iterations between checkpoints"},
                    {"--ckpt-time", "S", "a checkpoint's blocking time (seconds)"},
                    {"--restart", "S", "failure to training again (seconds, default 60)"},
                    {"--weibull", "K", "Weibull failures with shape K instead of exponential"},
                    {"--segments", "N", "checkpoint intervals per trial (default 2000)"},
                    {"--trials", "T", "independent runs (default 20)"},
                    {"--seed", "S", "seed (default 1)"},
                    {"--json", "", "print as JSON"}}},
       sim_ettr},
      {{.name = "sim spare",
        .brief = "SPARe's failures endured and all-reduce depth: Monte Carlo beside the closed forms",
        .synopsis = "sim spare --groups N --redundancy R [--trials T] [--seed S] [--json]",
        .summary = "SPARe: groups fail one at a time in random order until some shard type is wiped out. The "
                   "Monte Carlo's mean failures endured and mean all-reduce depth, beside the closed forms "
                   "mu(N, r) and the depth's counting lower bound.",
        .options = {{"--groups", "N", "data-parallel groups"},
                    {"--redundancy", "R", "shards per group"},
                    {"--trials", "T", "trials (default 1000)"},
                    {"--seed", "S", "seed (default 1)"},
                    {"--json", "", "print as JSON"}}},
       sim_spare},
      {{.name = "keygen",
        .operands = "NAME",
        .brief = "make a CURVE key pair (NAME.key, NAME.pub) for non-loopback endpoints",
        .synopsis = "keygen NAME",
        .summary = "Writes NAME.key (both keys, mode 0600) and NAME.pub (public key). The controller uses its .key "
                   "as security.server_key; clients list their public keys in security.allow as "
                   "'<public key> <role> <name>'.",
        .min_positional = 1,
        .max_positional = 1},
       cmd_keygen},
      {{.name = "help",
        .operands = "[COMMAND]",
        .brief = "this list, or a command's usage",
        .synopsis = "help [COMMAND...] [--list | --markdown]",
        .summary = "Lists the commands, or prints one command's usage (as COMMAND --help does).",
        .options = {{"--list", "", "every command's name, one a line (for scripts)"},
                    {"--markdown", "", "the reference of every command and option (docs/cli.md)"}},
        .max_positional = 2},
       cmd_help},
      {{.name = "version",
        .brief = "print the version and build features",
        .synopsis = "version",
        .summary = "Prints the version and whether this build has the CUDA path."},
       cmd_version},
  };
}

}  // namespace

const std::vector<CommandDef>& command_table() {
  static const std::vector<CommandDef> kTable = make_table();
  return kTable;
}

}  // namespace sal::cli
