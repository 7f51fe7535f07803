#include "replication/topic_config.h"

#include <gtest/gtest.h>

namespace samsa::replication {
namespace {

// Kafka's ThrottledReplicaListValidator: items (split on commas, trimmed) are empty or
// digits:digits, or the items joined are exactly "*"; the answer names the list as Kafka's
// ConfigDef parsed it.
TEST(TopicConfig, ThrottledReplicasValidateAsInKafka) {
  for (const char* key :
       {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}) {
    for (const char* ok :
         {"", " ", "*", " * ", "*,", "0:1", "0:1,1:2", " 0:1 , 12:345 ", "0:1,", "0:1,,2:3"})
      EXPECT_FALSE(validate_topic_config(key, ok).has_value()) << key << "=" << ok;
    for (const char* bad :
         {"x", "0", "0:", ":1", "-1:2", "0:-2", "0:1,*", "*,*", "0 :1", "0:1:2", "a:b", "+1:2"})
      EXPECT_TRUE(validate_topic_config(key, bad).has_value()) << key << "=" << bad;
  }
  EXPECT_EQ(validate_topic_config("follower.replication.throttled.replicas", "0:1, x"),
            "Invalid value [0:1, x] for configuration follower.replication.throttled.replicas: "
            "follower.replication.throttled.replicas must be the literal '*' or a list of "
            "replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId]"
            ",...");
}

// What each broker applies: every partition for "*", else the partitions of the entries that
// name it (Kafka's TopicConfigHandler.parseThrottledPartitions).
TEST(TopicConfig, ThrottledReplicasParsePerBroker) {
  const std::string v = "0:101, 1:102, 2:101,0:102, 7:101";
  const auto b101 = parse_throttled_replicas(v, 101);
  EXPECT_FALSE(b101.all);
  EXPECT_EQ(b101.partitions, (std::vector<std::int32_t>{0, 2, 7}));
  EXPECT_TRUE(b101.contains(2));
  EXPECT_FALSE(b101.contains(1));
  EXPECT_EQ(parse_throttled_replicas(v, 102).partitions, (std::vector<std::int32_t>{0, 1}));
  EXPECT_TRUE(parse_throttled_replicas(v, 103).partitions.empty());
  const auto all = parse_throttled_replicas(" * ", 5);
  EXPECT_TRUE(all.all);
  EXPECT_TRUE(all.contains(12345));
  EXPECT_FALSE(parse_throttled_replicas("", 5).contains(0));
  EXPECT_FALSE(parse_throttled_replicas("nonsense", 5).contains(0)) << "invalid: nothing";
}

}  // namespace
}  // namespace samsa::replication
