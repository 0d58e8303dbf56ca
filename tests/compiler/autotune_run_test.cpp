// run_search's rounds with a scripted bench (no worker, no clock in the
// assertions): successive halving, early discard of clearly slow variants,
// and a budget that runs out inside a round.

#include <kcache/compiler/autotune_run.h>
#include <kcache/compiler/autotune_spec.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace kcache::compiler {
namespace {

using nlohmann::json;

// Eight variants U=1..8; the strategy is spliced in.
std::string search_text(std::string_view strategy) {
  return std::string(R"({"params": {"U": {"range": [1, 8]}},
    "benchmark": {"args": [{"buffer": "x", "count": "4", "output": true}],
                  "reference": {"U": 1}, "warmup": 2, "repeats": 8},
    "strategy": )") +
         std::string(strategy) + "}";
}

struct Scripted {
  std::map<std::string, double> us; // a variant's time, every round
  std::vector<json> rounds;         // what each round asked: repeats, warm-up, variants
  std::size_t time_only = 1000;     // per round, the variants timed before "the budget ran out"
  std::set<std::string> wrong;      // variants whose outputs a check finds wrong

  BenchFn fn() {
    return [this](const BenchRequest& request, BenchPhase phase) {
      const json search = json::parse(request.search_json);
      json round{{"repeats", search["benchmark"]["repeats"]},
                 {"warmup", search["benchmark"]["warmup"]},
                 {"check", request.check},
                 {"winner_check", phase == BenchPhase::kWinnerCheck},
                 {"variants", json::array()}};
      std::vector<BenchResult> out;
      for (const BenchVariant& v : request.variants) {
        round["variants"].push_back(v.id);
        if (out.size() >= time_only) {
          out.push_back({v.id, kNotTimed, 0, 0, 0, "not timed: the budget ran out"});
        } else if (request.check && wrong.contains(v.id)) {
          out.push_back({v.id, "wrong", us.at(v.id), us.at(v.id), 1, "output differs"});
        } else {
          out.push_back({v.id, "ok", us.at(v.id), us.at(v.id), 0, ""});
        }
      }
      rounds.push_back(std::move(round));
      return out;
    };
  }
};

// A halving search over the scripted space, timed by `fn`.
TuningTable halving_with(const BenchFn& fn) {
  auto search = parse_autotune(search_text(R"({"kind": "halving"})"));
  EXPECT_TRUE(search.has_value()) << search.error();
  if (!search) {
    return {};
  }
  auto space = expand(*search);
  EXPECT_TRUE(space.has_value());
  if (!space) {
    return {};
  }
  std::vector<CompiledVariant> compiled;
  for (const Variant& v : space->variants) {
    compiled.push_back({v, std::string("binary"), ""});
  }
  BenchRequest base;
  base.search_json = search->json;
  return run_search(*search, *space, compiled, base, fn);
}

struct Searched {
  TuningTable table;
  std::map<std::string, const TuningRow*> row;
};

Searched search_with(std::string_view strategy, Scripted& bench) {
  auto search = parse_autotune(search_text(strategy));
  EXPECT_TRUE(search.has_value()) << search.error();
  auto space = expand(*search);
  EXPECT_TRUE(space.has_value());
  std::vector<CompiledVariant> compiled;
  for (const Variant& v : space->variants) {
    compiled.push_back({v, std::string("binary of ") + v.id, ""});
  }
  Searched s;
  BenchRequest base;
  base.search_json = search->json;
  s.table = run_search(*search, *space, compiled, base, bench.fn());
  for (const TuningRow& r : s.table.rows) {
    s.row[r.id] = &r;
  }
  return s;
}

// U=3 is the fastest; U=6 is made slow on purpose (10x), U=7 and U=8 are 2.5x.
Scripted one_slow() {
  Scripted b;
  b.us = {{"U=1", 130}, {"U=2", 120},  {"U=3", 100}, {"U=4", 110},
          {"U=5", 150}, {"U=6", 1000}, {"U=7", 250}, {"U=8", 260}};
  return b;
}

TEST(AutotuneRun, EarlyDiscardDropsTheSlowAndKeepsTheFastest) {
  Scripted bench = one_slow();
  const Searched s = search_with(R"({"kind": "halving"})", bench);
  ASSERT_TRUE(s.table.winner.has_value());
  EXPECT_EQ(*s.table.winner, "U=3");
  EXPECT_TRUE(s.table.stopped.empty());
  for (const char* slow : {"U=6", "U=7", "U=8"}) {
    const TuningRow& r = *s.row.at(slow);
    EXPECT_EQ(r.status, "discarded") << slow;
    EXPECT_EQ(r.rounds, 1) << slow << ": no run after the first round";
    EXPECT_NE(r.error.find("over 2x the best (100.0 us)"), std::string::npos) << r.error;
  }
  EXPECT_EQ(s.row.at("U=6")->error, "1000.0 us in round 1, over 2x the best (100.0 us)");
  // Five are close: halving keeps 2 of them, the finalists, timed with the
  // benchmark's repeats; the first round has one timed run and no warm-up.
  ASSERT_EQ(bench.rounds.size(), 2U);
  EXPECT_EQ(bench.rounds[0]["repeats"], 1);
  EXPECT_EQ(bench.rounds[0]["warmup"], 0);
  EXPECT_EQ(bench.rounds[0]["check"], false) << "only the finalists are checked";
  EXPECT_EQ(bench.rounds[0]["variants"].size(), 8U);
  EXPECT_EQ(bench.rounds[1]["repeats"], 8);
  EXPECT_EQ(bench.rounds[1]["warmup"], 2);
  EXPECT_EQ(bench.rounds[1]["check"], true);
  EXPECT_EQ(bench.rounds[1]["variants"], json::array({"U=3", "U=4"}));
  EXPECT_EQ(s.row.at("U=1")->status, "eliminated");
  EXPECT_EQ(s.row.at("U=4")->status, "eliminated") << "the finalist that lost";
  EXPECT_EQ(s.row.at("U=3")->status, "ok");
  EXPECT_EQ(s.table.timed_runs, 8U * 1 + 2U * 8);
}

// The fastest variant computes a wrong result: halving does not check it in
// the cheap first round, but it is a finalist, checked there, marked wrong,
// and the other finalist wins.
TEST(AutotuneRun, AWrongFastestVariantIsCaughtAmongTheFinalists) {
  Scripted bench = one_slow();
  bench.wrong = {"U=3"};
  const Searched s = search_with(R"({"kind": "halving"})", bench);
  ASSERT_TRUE(s.table.winner.has_value());
  EXPECT_EQ(*s.table.winner, "U=4");
  EXPECT_EQ(s.row.at("U=3")->status, "wrong");
  ASSERT_EQ(bench.rounds.size(), 2U);
  EXPECT_EQ(bench.rounds[1]["check"], true);
}

// The budget ends the search in round 1 and its fastest is wrong: the check
// of the would-be winner catches it and the next fastest is checked and wins.
TEST(AutotuneRun, ABudgetOutChecksTheWinnerAndFallsBackWhenItIsWrong) {
  Scripted bench = one_slow();
  bench.time_only = 4; // U=1..U=4 timed in round 1
  bench.wrong = {"U=3"};
  const Searched s = search_with(R"({"kind": "halving"})", bench);
  ASSERT_TRUE(s.table.winner.has_value());
  EXPECT_EQ(*s.table.winner, "U=4");
  EXPECT_EQ(s.row.at("U=3")->status, "wrong");
  ASSERT_EQ(bench.rounds.size(), 3U);
  EXPECT_EQ(bench.rounds[1]["variants"], json::array({"U=3"}));
  EXPECT_EQ(bench.rounds[2]["variants"], json::array({"U=4"}));
}

// The budget ran out and the service's deadline leaves no time to check the
// would-be winner: nothing unchecked wins, and the table says why.
TEST(AutotuneRun, NoTimeLeftToCheckMeansNoWinner) {
  Scripted bench = one_slow();
  std::size_t calls = 0;
  BenchFn fn = [&](const BenchRequest& request, BenchPhase phase) {
    bench.time_only = calls++ == 0 ? 4 : 0;
    return bench.fn()(request, phase);
  };
  const TuningTable t = halving_with(fn);
  EXPECT_FALSE(t.winner.has_value());
  EXPECT_NE(t.stopped.find("did not finish in its allowance"), std::string::npos) << t.stopped;
  EXPECT_EQ(calls, 2U) << "one check tried, not one per variant";
  ASSERT_EQ(bench.rounds.size(), 2U);
  EXPECT_EQ(bench.rounds[0]["winner_check"], false);
  EXPECT_EQ(bench.rounds[1]["winner_check"], true) << "the check is asked for as the winner's";
}

TEST(AutotuneRun, DiscardZeroAndAWarmupGiveTheOldHalving) {
  Scripted bench = one_slow();
  const Searched s = search_with(R"({"kind": "halving", "discard": 0, "first_warmup": 2})", bench);
  EXPECT_EQ(*s.table.winner, "U=3");
  for (const auto& [id, row] : s.row) {
    EXPECT_NE(row->status, "discarded") << id;
  }
  // 8 -> 4 -> 2 -> 1, repeats 1, 2, then the finalists' 8.
  ASSERT_EQ(bench.rounds.size(), 3U);
  EXPECT_EQ(bench.rounds[0]["warmup"], 2);
  EXPECT_EQ(bench.rounds[1]["repeats"], 2);
  EXPECT_EQ(bench.rounds[2]["repeats"], 8);
  EXPECT_EQ(bench.rounds[1]["check"], false);
  EXPECT_EQ(bench.rounds[2]["check"], true);
  EXPECT_EQ(s.row.at("U=6")->status, "eliminated");
}

TEST(AutotuneRun, ExhaustiveTimesEveryoneOnceWithTheBenchmarksSettings) {
  Scripted bench = one_slow();
  const Searched s = search_with(R"({"kind": "exhaustive"})", bench);
  EXPECT_EQ(*s.table.winner, "U=3");
  ASSERT_EQ(bench.rounds.size(), 1U);
  EXPECT_EQ(bench.rounds[0]["repeats"], 8);
  EXPECT_EQ(bench.rounds[0]["warmup"], 2);
  EXPECT_EQ(s.row.at("U=6")->status, "ok");
}

// The bench stops inside the first round (the service kills its worker when
// the budget runs out): the search ends there with the best measured, and
// the table says which variants were not timed and why.
TEST(AutotuneRun, ABudgetOutInsideARoundStopsTheSearchAndSaysSo) {
  Scripted bench = one_slow();
  bench.time_only = 4; // U=1..U=4 timed
  const Searched s = search_with(R"({"kind": "halving"})", bench);
  // No round after the budget ran out, but the winner (unchecked: round 1
  // was not the finalists') gets its check, alone.
  ASSERT_EQ(bench.rounds.size(), 2U);
  EXPECT_EQ(bench.rounds[0]["check"], false);
  EXPECT_EQ(bench.rounds[1]["check"], true);
  EXPECT_EQ(bench.rounds[1]["variants"], json::array({"U=3"}));
  ASSERT_TRUE(s.table.winner.has_value());
  EXPECT_EQ(*s.table.winner, "U=3");
  EXPECT_NE(s.table.stopped.find("ran out in round 1"), std::string::npos) << s.table.stopped;
  for (const char* untimed : {"U=5", "U=6", "U=7", "U=8"}) {
    EXPECT_EQ(s.row.at(untimed)->status, kNotTimed) << untimed;
    EXPECT_EQ(s.row.at(untimed)->error, "not timed: the budget ran out");
    EXPECT_EQ(s.row.at(untimed)->rounds, 0);
  }
  EXPECT_EQ(s.table.benchmarked, 4U);

  // The table keeps it through JSON (kcache show, the published record).
  const auto back = tuning_table_from_json(tuning_table_json(s.table));
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(back->stopped, s.table.stopped);
}

// Cut in a later round: a survivor not timed there keeps its earlier time
// and can still win.
TEST(AutotuneRun, ABudgetOutInALaterRoundKeepsTheSurvivorsTimes) {
  Scripted bench = one_slow();
  bench.us["U=4"] = 101;
  // Round 1 times all; round 2 (U=3, U=4) times only U=4.
  std::size_t calls = 0;
  BenchFn fn = [&](const BenchRequest& request, BenchPhase phase) {
    bench.time_only = calls++ == 0 ? 1000 : 1;
    std::vector<BenchVariant> reversed(request.variants.rbegin(), request.variants.rend());
    BenchRequest r = request;
    r.variants = reversed; // U=4 first
    std::vector<BenchResult> out = bench.fn()(r, phase);
    return std::vector<BenchResult>(out.rbegin(), out.rend());
  };
  const TuningTable t = halving_with(fn);
  EXPECT_EQ(t.winner, "U=3") << "U=3 keeps its first round's 100 us";
  EXPECT_NE(t.stopped.find("round 2"), std::string::npos) << t.stopped;
  for (const TuningRow& r : t.rows) {
    if (r.id == "U=3") {
      EXPECT_EQ(r.status, "ok");
      EXPECT_EQ(r.rounds, 1);
      EXPECT_EQ(r.error, "not timed: the budget ran out");
    }
  }
}

TEST(AutotuneRun, DiscardMustBeAFactorOverOne) {
  for (const char* bad :
       {R"({"kind": "halving", "discard": 1})", R"({"kind": "halving", "discard": -2})",
        R"({"kind": "halving", "discard": 0.5})"}) {
    auto s = parse_autotune(search_text(bad));
    ASSERT_FALSE(s.has_value()) << bad;
    EXPECT_NE(s.error().find("discard is 0 (off) or a factor > 1"), std::string::npos) << s.error();
  }
  auto s = parse_autotune(search_text(R"({"kind": "halving", "discard": 1.5, "first_warmup": 1})"));
  ASSERT_TRUE(s.has_value()) << s.error();
  EXPECT_EQ(s->strategy.discard, 1.5);
  EXPECT_EQ(s->strategy.first_warmup, 1);
}

} // namespace
} // namespace kcache::compiler
