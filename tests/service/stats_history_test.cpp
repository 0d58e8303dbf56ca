// StatsHistory over a clock the test sets: minutes, gaps and the ring's wrap.

#include <kcache/service/stats_history.h>

#include <gtest/gtest.h>

namespace kcache::service {
namespace {

constexpr std::int64_t kMinute = 60'000;
constexpr std::int64_t kT0 = 1'700'000'000'000 / kMinute * kMinute; // a minute's start

storage::CounterSnapshot counts(std::uint64_t hits, std::uint64_t misses = 0,
                                std::uint64_t bytes = 0) {
  storage::CounterSnapshot c;
  c.hits = hits;
  c.misses = misses;
  c.errors = misses / 2;
  c.puts = misses;
  c.bytes_read = bytes;
  return c;
}

TEST(StatsHistory, CountsEachMinutesDifferencesInThatMinute) {
  StatsHistory history(10);
  history.record(kT0, counts(5)); // the baseline: counted before the history began
  EXPECT_FALSE(history.due(kT0 + 59'999));
  EXPECT_TRUE(history.due(kT0 + kMinute));
  history.record(kT0 + kMinute, counts(8, 2, 100)); // 3 hits, 2 misses in minute 0
  const auto rows = history.series(kT0 + kMinute + 30'000, counts(9, 6, 150), 3);
  ASSERT_EQ(rows.size(), 3U);
  EXPECT_EQ(rows[0].minute, kT0 / kMinute - 1);
  EXPECT_EQ(rows[0].hits, 0U);
  EXPECT_EQ(rows[1].minute, kT0 / kMinute);
  EXPECT_EQ(rows[1].hits, 3U);
  EXPECT_EQ(rows[1].misses, 2U);
  EXPECT_EQ(rows[1].errors, 1U);
  EXPECT_EQ(rows[1].puts, 2U);
  EXPECT_EQ(rows[1].bytes_served, 100U);
  EXPECT_EQ(rows[2].hits, 1U); // the current minute, up to the series() call
  EXPECT_EQ(rows[2].misses, 4U);
  EXPECT_EQ(rows[2].bytes_served, 50U);
}

TEST(StatsHistory, MinutesWithoutRequestsAreZero) {
  StatsHistory history(10);
  history.record(kT0, counts(0));
  history.record(kT0 + 10'000, counts(4)); // same minute: adds up
  history.record(kT0 + 4 * kMinute, counts(4));
  const auto rows = history.series(kT0 + 4 * kMinute, counts(6), 5);
  ASSERT_EQ(rows.size(), 5U);
  EXPECT_EQ(rows[0].hits, 4U);
  EXPECT_EQ(rows[1].hits, 0U);
  EXPECT_EQ(rows[2].hits, 0U);
  EXPECT_EQ(rows[3].hits, 0U);
  EXPECT_EQ(rows[4].hits, 2U);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].minute, rows[i - 1].minute + 1);
  }
}

TEST(StatsHistory, TheRingWrapsAndForgetsWhatIsOlderThanItsReach) {
  StatsHistory history(4);
  history.record(kT0, counts(0));
  std::uint64_t hits = 0;
  for (std::int64_t m = 1; m <= 6; ++m) { // minute m-1 gets m hits
    hits += static_cast<std::uint64_t>(m);
    history.record(kT0 + m * kMinute, counts(hits));
  }
  // Minutes 0..6: the ring of 4 holds 3, 4, 5 and the current one (6).
  const auto rows = history.series(kT0 + 6 * kMinute, counts(hits), 100);
  ASSERT_EQ(rows.size(), 4U); // at most the ring's size
  EXPECT_EQ(rows[0].minute, kT0 / kMinute + 3);
  EXPECT_EQ(rows[0].hits, 4U);
  EXPECT_EQ(rows[1].hits, 5U);
  EXPECT_EQ(rows[2].hits, 6U);
  EXPECT_EQ(rows[3].hits, 0U);
  // A gap longer than the ring: every slot is stale, none is reused by mistake.
  const auto later = history.series(kT0 + 100 * kMinute, counts(hits + 7), 4);
  ASSERT_EQ(later.size(), 4U);
  EXPECT_EQ(later[0].hits, 0U);
  EXPECT_EQ(later[1].hits, 0U);
  EXPECT_EQ(later[2].hits, 0U);
  EXPECT_EQ(later[3].hits, 0U); // the 7 went to minute 6, the last record()
  EXPECT_EQ(later[3].minute, kT0 / kMinute + 100);
}

TEST(StatsHistory, CountersThatGoDownCountNothing) {
  StatsHistory history(4);
  history.record(kT0, counts(10));
  const auto rows = history.series(kT0 + 1000, counts(3), 1);
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0].hits, 0U);
}

TEST(StatsHistory, ItsMemoryIsFixed) {
  StatsHistory history;
  EXPECT_EQ(history.capacity(), 1440U);
  history.record(kT0, counts(0));
  for (std::int64_t m = 1; m < 5000; m += 7) {
    history.record(kT0 + m * kMinute, counts(static_cast<std::uint64_t>(m)));
  }
  EXPECT_EQ(history.capacity(), 1440U);
  EXPECT_EQ(history.series(kT0 + 5000 * kMinute, counts(5000), 1440).size(), 1440U);
}

} // namespace
} // namespace kcache::service
