#include <kcache/protocol/json_text.h>
#include <kcache/protocol/record_head.h>

#include <gtest/gtest.h>

namespace kcache::protocol {
namespace {

TEST(RecordHead, WhatClientsWriteKcachedReadsBack) {
  RecordHead head{"trainer", {{"step", "7"}}, R"({"schema_version":1,"key":"kc1-x"})"};
  auto doc = to_json(head);
  ASSERT_TRUE(doc.has_value()) << doc.error();
  EXPECT_EQ(json_text(*doc), R"({"manifest":{"key":"kc1-x","schema_version":1},)"
                             R"("metadata":{"step":"7"},"producer":"trainer"})");
  auto back = record_head_from_json(*doc);
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(back->producer, "trainer");
  EXPECT_EQ(back->metadata, head.metadata);
  EXPECT_EQ(back->manifest_json, R"({"key":"kc1-x","schema_version":1})");
  EXPECT_FALSE(to_json(RecordHead{"p", {}, "{not json"}).has_value());
  EXPECT_EQ(json_text(*to_json(RecordHead{})), R"({"metadata":{},"producer":""})");
}

TEST(RecordHead, EveryPartIsOptionalAndNonStringMetadataKeepsItsJson) {
  auto empty = record_head_from_json(nlohmann::json::object());
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->producer.empty() && empty->metadata.empty() && empty->manifest_json.empty());
  auto mixed = record_head_from_json(
      nlohmann::json::parse(R"({"producer": null, "metadata": {"n": 3, "t": {"a": [1]}}})"));
  ASSERT_TRUE(mixed.has_value()) << mixed.error();
  EXPECT_EQ(mixed->metadata.at("n"), "3");
  EXPECT_EQ(mixed->metadata.at("t"), R"({"a":[1]})");
}

TEST(RecordHead, WrongTypesAreNamed) {
  EXPECT_EQ(record_head_from_json(nlohmann::json::parse(R"({"producer": 5})")).error(),
            "\"producer\" must be a string");
  EXPECT_EQ(record_head_from_json(nlohmann::json::parse(R"({"metadata": []})")).error(),
            "\"metadata\" must be an object");
  EXPECT_FALSE(record_head_from_json(nlohmann::json::array()).has_value());
}

} // namespace
} // namespace kcache::protocol
