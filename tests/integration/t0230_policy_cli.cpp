// t0230_policy_cli.cpp — `salamander policy ...` as a policy author and a script use it: check
// exits non-zero with the reason, plan --json writes a plan file the library reads back valid,
// recovery reads it and says how it computed, plan --frontier shows the trade and the default's
// choice, spare and window answer in JSON.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "plan/validate.h"
#include "support/mesh_harness.h"

using namespace sal;
using namespace sal::test;

namespace {

struct Cli {
  std::string dir = temp_dir("pcli");
  int n = 0;
  // Runs salamander with args; returns (exit code, output).
  std::pair<int, std::string> run(std::vector<std::string> args) {
    args.insert(args.begin(), bin());
    Proc p = spawn(args, dir + "/out" + std::to_string(n++));
    int rc = p.wait(20000);
    return {rc, p.output()};
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  }
};

}  // namespace

TEST_CASE("t0230-policy-check: a good policy passes, a broken one fails with the reason") {
  Cli c;
  auto [ok_rc, ok_out] = c.run({"policy", "check", std::string(SAL_SOURCE_DIR) + "/policies/allocation/lazarus.lua"});
  CHECK(ok_rc == 0);
  CHECK(ok_out.find("allocation policy 'lazarus'") != std::string::npos);
  auto bad = c.write("bad.lua", "return { api = 1, kind = 'placement', name = 'b', doc = 'd',\n"
                                "  decide = function(ctx) return {} end,\n"
                                "  selftest = function(t) t.ok(false, 'always fails') end }\n");
  auto [bad_rc, bad_out] = c.run({"policy", "check", bad, "--json"});
  CHECK(bad_rc == 1);
  auto j = nlohmann::json::parse(bad_out);
  CHECK(j["ok"] == false);
  CHECK(j["error"].get<std::string>().find("always fails") != std::string::npos);
}

TEST_CASE("t0233-policy-check-decides: every shipped policy decides validly, and one that breaks a rule fails check") {
  Cli c;
  for (const char* kind : {"allocation", "placement", "checkpoint", "redundancy", "health"})
    for (const auto& entry : std::filesystem::directory_iterator(std::string(SAL_SOURCE_DIR) + "/policies/" + kind)) {
      CAPTURE(entry.path().string());
      auto [rc, out] = c.run({"policy", "check", entry.path().string()});
      CHECK(rc == 0);
      CHECK(out.find("decide valid on") != std::string::npos);
    }
  // No selftest, a well-formed answer, and every slot given to expert 1: experts 2..8 lose every
  // replica, which only decide on a real context can show.
  auto greedy = c.write("greedy.lua",
                        "return { api = 1, kind = 'placement', name = 'greedy', doc = 'all on expert 1',\n"
                        "  decide = function(ctx)\n"
                        "    local p = {}\n"
                        "    for l = 1, ctx.layers do\n"
                        "      p[l] = {}\n"
                        "      for n = 1, ctx.nodes do\n"
                        "        p[l][n] = {}\n"
                        "        for s = 1, ctx.slots do p[l][n][s] = 1 end\n"
                        "      end\n"
                        "    end\n"
                        "    return { placement = p }\n"
                        "  end }\n");
  auto [rc, out] = c.run({"policy", "check", greedy});
  CHECK(rc == 1);
  CHECK(out.find("decide on a synthetic context") != std::string::npos);
  CHECK(out.find("greedy proposed an invalid placement") != std::string::npos);
}

TEST_CASE("t0231-policy-plan-recovery: plan --json is a valid plan file that recovery reads") {
  Cli c;
  auto loads = c.write("loads.csv", "10,70,0,20,5,5\n1,1,1,1,1,1\n");
  auto [rc, out] = c.run({"policy", "plan", "--loads", loads, "--nodes", "6", "--slots", "2", "--min-replicas", "2",
                          "--placement", "spread", "--json"});
  REQUIRE(rc == 0);
  auto plan = plan::plan_from_json(nlohmann::json::parse(out));
  REQUIRE(plan.ok());
  CHECK(plan->layers.size() == 2);
  CHECK(plan::check_plan(*plan).ok());
  auto file = c.write("plan.json", out);
  auto [rrc, rout] = c.run({"policy", "recovery", "--plan", file, "--failures", "1", "--json"});
  REQUIRE(rrc == 0);
  auto r = nlohmann::json::parse(rout);
  CHECK(r["failures"] == 1);
  CHECK(r["layers"].size() == 2);
  CHECK(r["joint"].get<double>() == doctest::Approx(1.0));  // f = 2 on distinct nodes: one failure is survivable
  CHECK(r["method"] == "exact");
  CHECK(r["over"] == "nodes");
  // a plan with domains is counted over its hosts: both replicas of each expert on one host of two
  // workers survive any worker loss but no host loss
  auto hosted = c.write("hosted.json", R"({"layers": [{"replicas": [2, 2], "placement": [[0], [0], [1], [1]]}],
                                           "domains": [0, 0, 1, 1]})");
  auto [hrc, hout] = c.run({"policy", "recovery", "--plan", hosted, "--failures", "1", "--json"});
  REQUIRE(hrc == 0);
  auto h = nlohmann::json::parse(hout);
  CHECK(h["over"] == "hosts");
  CHECK(h["hosts"] == 2);
  CHECK(h["joint"].get<double>() == 0.0);
  auto [trc, tout] = c.run({"policy", "recovery", "--plan", hosted, "--failures", "1"});
  CHECK(tout.find("random host failures; 4 positions on 2 hosts") != std::string::npos);
  auto [crc, cout] = c.run({"policy", "recovery", "--compare", "spread,compact", "--loads", loads, "--nodes", "6",
                            "--slots", "2", "--json"});
  REQUIRE(crc == 0);
  CHECK(nlohmann::json::parse(cout)["placements"]["compact"].size() == 7);
  auto [erc, eout] = c.run({"policy", "plan", "--loads", loads, "--nodes", "2", "--slots", "2"});
  CHECK(erc == 1);  // 4 slots cannot hold 6 experts: said before any policy runs
  CHECK_MESSAGE(eout.find("policy plan: 2 nodes x 2 slots cannot hold 6 experts once each") != std::string::npos, eout);
}

TEST_CASE("t0234-policy-plan-frontier: the frontier of balance against recovery, and the default's choice") {
  Cli c;
  // 8 experts, one drawn far more often: 8 nodes x 4 slots give it replicas and the rest the floor
  auto loads = c.write("skew.csv", "900,20,30,40,50,60,70,80\n900,80,70,60,50,40,30,20\n");
  auto [rc, out] = c.run({"policy", "plan", "--loads", loads, "--nodes", "8", "--slots", "4", "--frontier", "--json"});
  REQUIRE(rc == 0);
  auto j = nlohmann::json::parse(out);
  CHECK(j["placement"] == "goodput");
  REQUIRE(j["points"].size() >= 2);
  bool mro = false, on = false;
  double last = 0;
  for (const auto& p : j["points"]) {
    mro = mro || p["name"] == "mro";
    on = on || p["frontier"] == true;
    CHECK(p["balance"].get<double>() >= last - 1e-9);  // by balance
    last = p["balance"].get<double>();
    CHECK(p["p"][0] == 1.0);
    if (p["frontier"] == false) CHECK(p["beaten_by"].is_string());
  }
  CHECK(mro);
  CHECK(on);
  CHECK(j["choice"]["point"].is_string());
  CHECK(j["note"].get<std::string>().find("expected goodput") != std::string::npos);
  // a stated failure rate goes into the choice; a bad one is refused naming the option
  auto [src, sout] = c.run({"policy", "plan", "--loads", loads, "--nodes", "8", "--slots", "4", "--frontier", "--json",
                            "--node-mtbf-h", "10", "--correlated", "0.5"});
  REQUIRE(src == 0);
  CHECK(nlohmann::json::parse(sout)["choice"]["failures"]["source"] == "stated (--node-mtbf-h): one failure per node every 10 h");
  auto [brc, bout] = c.run({"policy", "plan", "--loads", loads, "--nodes", "8", "--slots", "4", "--correlated", "2"});
  CHECK(brc != 0);
  CHECK(bout.find("--correlated") != std::string::npos);

  // recorded steps (one file a step, in their names' order): judged one by one, the loads their mean;
  // stepwise is told them as ctx.steps
  std::filesystem::create_directories(c.dir + "/steps");
  c.write("steps/table_iter1_rank0.log", "0:[[500, 20, 20, 20, 20, 20, 20, 20]]\n1:[[20, 500, 20, 20, 20, 20, 20, 20]]\n");
  c.write("steps/table_iter2_rank0.log", "0:[[20, 500, 20, 20, 20, 20, 20, 20]]\n1:[[20, 20, 500, 20, 20, 20, 20, 20]]\n");
  auto steps = c.write("steps/table_iter10_rank0.log", "0:[[20, 20, 500, 20, 20, 20, 20, 20]]\n1:[[500, 20, 20, 20, 20, 20, 20, 20]]\n");
  const std::string dir = steps.substr(0, steps.rfind('/'));
  auto [trc, tout] = c.run({"policy", "plan", "--steps", dir, "--nodes", "8", "--slots", "4", "--placement", "stepwise",
                            "--frontier", "--json"});
  REQUIRE(trc == 0);
  auto t = nlohmann::json::parse(tout);
  CHECK(t["steps"] == 3);
  CHECK(t["choice"]["steps"] == 3);
  bool chain = false;
  for (const auto& p : t["points"]) {
    chain = chain || p["name"] == "chain";
    CHECK(p["load_balance"].get<double>() >= 1.0);
  }
  CHECK(chain);
  // files that disagree on their shape are refused, naming both
  c.write("steps/table_iter11_rank0.log", "0:[[1, 2]]\n");
  auto [wrc, wout] = c.run({"policy", "plan", "--steps", dir, "--nodes", "8", "--slots", "4"});
  CHECK(wrc != 0);
  CHECK(wout.find("table_iter11_rank0.log has 1 layers of 2 experts") != std::string::npos);
}

TEST_CASE("t0235-policy-plan-current: a re-plan offline from the plan in force keeps what its nodes hold, and says how much moves") {
  Cli c;
  std::string before, after;
  for (int l = 0; l < 3; ++l) {
    for (int e = 0; e < 32; ++e) {
      before += (e ? "," : "") + std::to_string(e % 7 ? 10 + (e * 13 + l * 5) % 70 : 900);
      after += (e ? "," : "") + std::to_string(e % 7 ? 10 + (e * 17 + l * 3) % 70 : 900);
    }
    before += "\n", after += "\n";
  }
  auto first = c.write("before.csv", before), drifted = c.write("after.csv", after);
  auto [rc, plan] = c.run({"policy", "plan", "--loads", first, "--nodes", "16", "--slots", "8", "--json"});
  REQUIRE(rc == 0);
  auto in_force = c.write("in_force.json", plan);
  auto replan = [&](const std::string& nodes, const std::string& slots) {
    return c.run({"policy", "plan", "--loads", drifted, "--nodes", nodes, "--slots", slots, "--current", in_force});
  };
  auto [krc, kept] = replan("16", "8");
  REQUIRE_MESSAGE(krc == 0, kept);
  static const std::regex said("the placement in force kept, adjusted to the new replica counts and loads \\((\\d+) "
                               "replica\\(s\\) move, against (\\d+) for ");
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(kept, m, said), kept);
  CHECK(std::stoi(m[1]) < std::stoi(m[2]));
  // a node that joined holds nothing: its slots are filled
  auto [jrc, joined] = replan("17", "8");
  REQUIRE_MESSAGE(jrc == 0, joined);
  CHECK(joined.find("the placement in force kept") != std::string::npos);
  // fewer nodes than the plan in force: the operator gives the plan of those left
  auto [frc, fewer] = replan("15", "8");
  CHECK(frc == 2);
  CHECK_MESSAGE(fewer.find("--current: " + in_force + " has 16 nodes, more than --nodes 15") != std::string::npos,
                fewer);
  auto [src, slots] = replan("16", "9");
  CHECK(src == 2);
  CHECK_MESSAGE(slots.find("has 8 slots a node, --slots 9") != std::string::npos, slots);
  // what a move costs, in seconds: a fetch of 0.3 s and a minute to the next rebalance keep it; a
  // fetch of a millisecond and ten hours re-place
  auto weighed = [&](const std::string& fetch_s, const std::string& horizon_s) {
    return c.run({"policy", "plan", "--loads", drifted, "--nodes", "16", "--slots", "8", "--current", in_force,
                  "--fetch-s", fetch_s, "--horizon-s", horizon_s});
  };
  auto [grc, gpu] = weighed("0.3", "60");
  REQUIRE_MESSAGE(grc == 0, gpu);
  CHECK_MESSAGE(gpu.find("the placement in force kept") != std::string::npos, gpu);
  CHECK_MESSAGE(gpu.find("over the 60 s a placement stands, its extra fetches cost") != std::string::npos, gpu);
  CHECK(gpu.find("(--fetch-s and --horizon-s)") != std::string::npos);
  auto [crc, cheap] = weighed("0.001", "36000");
  REQUIRE_MESSAGE(crc == 0, cheap);
  CHECK_MESSAGE(cheap.find("the placement in force, adjusted, turned down") != std::string::npos, cheap);
  auto [hrc, half] = c.run({"policy", "plan", "--loads", drifted, "--nodes", "16", "--slots", "8", "--current",
                            in_force, "--fetch-s", "0.3"});
  CHECK(hrc == 2);
  CHECK(half.find("--fetch-s and --horizon-s go together") != std::string::npos);
  auto [nrc, none] = c.run({"policy", "plan", "--loads", drifted, "--nodes", "16", "--slots", "8", "--fetch-s", "0.3",
                            "--horizon-s", "60"});
  CHECK(nrc == 2);
  CHECK(none.find("they need --current") != std::string::npos);
  auto [zrc, zero] = weighed("0", "60");
  CHECK(zrc == 2);
  CHECK(zero.find("--fetch-s takes a number of seconds > 0") != std::string::npos);
}

TEST_CASE("t0232-policy-spare-window: SPARe layouts and MoEtion windows in JSON") {
  Cli c;
  auto [rc, out] = c.run({"policy", "spare", "--groups", "13", "--redundancy", "4", "--json"});
  REQUIRE(rc == 0);
  auto s = nlohmann::json::parse(out);
  CHECK(s["hosts"].size() == 13);
  CHECK(s["max_common_hosts"] == 1);
  CHECK(s["mean_failures_endured"].get<double>() > 1);
  auto [zrc, zout] = c.run({"policy", "spare", "--groups", "0"});  // the value given is named, not "required"
  CHECK(zrc == 2);
  CHECK_MESSAGE(zout.find("--groups: 0 is outside [1, ") != std::string::npos, zout);
  auto [trc, tout] = c.run({"policy", "spare", "--groups", "200", "--failures", "20", "--save", "0.1", "--mtbf", "10",
                            "--restart", "1", "--json"});
  REQUIRE(trc == 0);
  auto t = nlohmann::json::parse(tout);
  CHECK(t["optimal_redundancy"] == 8);  // floor(log2 200 + 0.833)
  CHECK(t["min_depth"] == 2);           // ceil(200 / 180)
  CHECK(t["optimal_checkpoint_period"].get<double>() == doctest::Approx(0.1 + std::sqrt(0.01 + 0.2 * 11)));
  auto profile = c.write("profile.json",
                         R"({"iteration_s": 0.5, "bandwidth": 2000, "operators": [
      {"name": "e1", "kind": "expert", "full_bytes": 300, "compute_bytes": 100, "popularity": 5},
      {"name": "e2", "kind": "expert", "full_bytes": 300, "compute_bytes": 100, "popularity": 1},
      {"name": "dense", "kind": "dense", "full_bytes": 600, "compute_bytes": 200, "popularity": 0}]})");
  auto [wrc, wout] = c.run({"policy", "window", "--profile", profile, "--json"});
  REQUIRE(wrc == 0);
  auto w = nlohmann::json::parse(wout);
  CHECK(w["window"].get<int>() >= 1);
  CHECK(w["schedule"][0][0] == "e2");  // least popular first
  auto [brc, bout] = c.run({"policy", "window", "--profile", c.write("p2.json", "{}")});
  CHECK(brc == 1);
  CHECK(bout.find("expected {\"iteration_s\"") != std::string::npos);
}
