#include "replication/quorum/file_snapshot_store.h"

#include <gtest/gtest.h>

#include <fstream>

#include "replication/quorum/snapshot_file.h"
#include "tests/support/io_testing.h"

namespace samsa::replication::quorum {
namespace {

using io::testing::TempDir;

std::vector<MetadataRecord> image(int n) {
  std::vector<MetadataRecord> out;
  for (int i = 0; i < n; ++i) {
    Uuid id{};
    id[0] = static_cast<std::uint8_t>(i);
    id[1] = static_cast<std::uint8_t>(i >> 8);
    if (i % 2 == 0) {
      out.push_back(TopicRecord{"t" + std::to_string(i), id});
    } else {
      out.push_back(ConfigRecord{ConfigResource::topic, "t" + std::to_string(i - 1), "k",
                                 std::string(500, 'v')});
    }
  }
  return out;
}

std::vector<std::vector<std::byte>> encoded(const std::vector<MetadataRecord>& rs) {
  std::vector<std::vector<std::byte>> out;
  for (const auto& r : rs)
    out.push_back(encode_record(r));
  return out;
}

std::vector<std::string> names_in(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& de : std::filesystem::directory_iterator(dir))
    out.push_back(de.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// What the install callback saw.
struct Installs {
  int calls = 0;
  SnapshotId id;
  std::vector<MetadataRecord> records;
  bool answer = true;
  FileSnapshotStore::InstallFn fn() {
    return [this](const SnapshotId& i, std::vector<MetadataRecord> rs) {
      ++calls;
      id = i;
      records = std::move(rs);
      return answer;
    };
  }
};

// A leader's store holding one snapshot of `recs` at id.
std::unique_ptr<FileSnapshotStore> leader_with(const TempDir& d, const SnapshotId& id,
                                               const std::vector<MetadataRecord>& recs) {
  auto bytes = encode_snapshot(recs, id, 99);
  EXPECT_TRUE(write_snapshot_file(d.path(), id, bytes));
  auto s = FileSnapshotStore::open(d.path(), [](const SnapshotId&, std::vector<MetadataRecord>) {
    ADD_FAILURE() << "a leader installs nothing";
    return false;
  });
  EXPECT_TRUE(s) << s.error().detail;
  return std::move(*s);
}

// The follower's side of a FetchSnapshot exchange, chunk by chunk, with `damage` applied to
// each chunk before it is written.
template <class Damage>
bool transfer(const FileSnapshotStore& from, FileSnapshotStore& to, const SnapshotId& id,
              std::int64_t chunk, Damage damage) {
  to.begin(id);
  const std::int64_t size = from.size(id);
  for (std::int64_t pos = 0; pos < size;) {
    auto bytes = from.read(id, pos, chunk);
    if (bytes.empty()) return false;
    pos += static_cast<std::int64_t>(bytes.size());
    if (!damage(pos, bytes)) break;
    to.write(bytes);
  }
  return to.finish();
}

TEST(QuorumFileSnapshotStore, OpenIndexesSnapshotsAndRemovesStrayParts) {
  TempDir d;
  const auto recs = image(10);
  auto bytes = encode_snapshot(recs, {10, 2}, 1);
  ASSERT_TRUE(write_snapshot_file(d.path(), {10, 2}, bytes));
  ASSERT_TRUE(write_snapshot_file(d.path(), {5, 1}, encode_snapshot(image(5), {5, 1}, 1)));
  std::ofstream(d / "00000000000000000020-0000000003.checkpoint.part") << "half";
  std::ofstream(d / "quorum-state") << "{}";
  auto s = FileSnapshotStore::open(d.path(), nullptr);
  ASSERT_TRUE(s) << s.error().detail;
  EXPECT_EQ((*s)->latest(), (SnapshotId{10, 2}));
  EXPECT_EQ((*s)->size({10, 2}), static_cast<std::int64_t>(bytes.size()));
  EXPECT_EQ((*s)->size({20, 3}), -1);
  EXPECT_EQ(names_in(d.path()), (std::vector<std::string>{
                                    "00000000000000000005-0000000001.checkpoint",
                                    "00000000000000000010-0000000002.checkpoint", "quorum-state"}));
  // Reads: any range, clipped at the end; nothing past it, for a snapshot not held, or with
  // nonsense arguments.
  EXPECT_EQ((*s)->read({10, 2}, 0, 1 << 30), bytes);
  auto mid = (*s)->read({10, 2}, 100, 50);
  EXPECT_EQ(mid, std::vector<std::byte>(bytes.begin() + 100, bytes.begin() + 150));
  EXPECT_EQ((*s)->read({10, 2}, static_cast<std::int64_t>(bytes.size()) - 3, 50).size(), 3u);
  EXPECT_TRUE((*s)->read({10, 2}, static_cast<std::int64_t>(bytes.size()), 50).empty());
  EXPECT_TRUE((*s)->read({20, 3}, 0, 50).empty());
  EXPECT_TRUE((*s)->read({10, 2}, -1, 50).empty());
  EXPECT_TRUE((*s)->read({10, 2}, 0, 0).empty());

  auto n = (*s)->delete_before({10, 2});
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ((*s)->size({5, 1}), -1);
  EXPECT_EQ((*s)->latest(), (SnapshotId{10, 2}));
  // A snapshot the driver wrote itself, announced.
  ASSERT_TRUE(write_snapshot_file(d.path(), {30, 4}, encode_snapshot(image(30), {30, 4}, 1)));
  ASSERT_TRUE((*s)->add({30, 4}));
  EXPECT_EQ((*s)->latest(), (SnapshotId{30, 4}));
  EXPECT_FALSE((*s)->add({40, 4}));  // no such file
  // Without an install callback a received snapshot is only stored.
  const auto more = encode_snapshot(image(50), {50, 5}, 1);
  (*s)->begin({50, 5});
  (*s)->write(more);
  EXPECT_TRUE((*s)->finish()) << (*s)->last_error();
  EXPECT_EQ((*s)->latest(), (SnapshotId{50, 5}));
}

TEST(QuorumFileSnapshotStore, ReceivesASnapshotInChunksAndInstallsItOnce) {
  TempDir leader_dir, follower_dir;
  const SnapshotId id{2000, 7};
  const auto recs = image(2000);
  auto leader = leader_with(leader_dir, id, recs);
  Installs installs;
  auto follower = FileSnapshotStore::open(follower_dir.path(), installs.fn());
  ASSERT_TRUE(follower) << follower.error().detail;
  ASSERT_TRUE(transfer(*leader, **follower, id, 64 * 1024 + 13,
                       [](std::int64_t, std::vector<std::byte>&) { return true; }))
      << (*follower)->last_error();
  EXPECT_EQ(installs.calls, 1);
  EXPECT_EQ(installs.id, id);
  EXPECT_EQ(encoded(installs.records), encoded(recs));
  EXPECT_EQ((*follower)->latest(), id);
  EXPECT_EQ((*follower)->size(id), leader->size(id));
  EXPECT_EQ(names_in(follower_dir.path()),
            std::vector<std::string>{"00000000000000002000-0000000007.checkpoint"});
  // The follower can now serve it itself, byte for byte.
  EXPECT_EQ((*follower)->read(id, 0, 1 << 30), leader->read(id, 0, 1 << 30));
}

TEST(QuorumFileSnapshotStore, CorruptedTransferIsRefusedAndLeavesNothing) {
  TempDir leader_dir, follower_dir;
  const SnapshotId id{500, 3};
  auto leader = leader_with(leader_dir, id, image(500));
  Installs installs;
  auto follower = FileSnapshotStore::open(follower_dir.path(), installs.fn());
  ASSERT_TRUE(follower);
  // One bit flipped in the second chunk.
  EXPECT_FALSE(transfer(*leader, **follower, id, 4096, [](std::int64_t pos, auto& b) {
    if (pos == 8192) b[100] ^= std::byte{0x04};
    return true;
  }));
  EXPECT_NE((*follower)->last_error().find("failed its checks"), std::string::npos)
      << (*follower)->last_error();
  EXPECT_NE((*follower)->last_error().find("CRC32C mismatch"), std::string::npos)
      << (*follower)->last_error();
  EXPECT_EQ(installs.calls, 0);
  EXPECT_FALSE((*follower)->latest());
  EXPECT_TRUE(names_in(follower_dir.path()).empty());

  // The last chunk never came: no footer.
  EXPECT_FALSE(transfer(*leader, **follower, id, 4096,
                        [&](std::int64_t pos, auto&) { return pos < leader->size(id); }));
  EXPECT_NE((*follower)->last_error().find("truncated"), std::string::npos)
      << (*follower)->last_error();
  EXPECT_EQ(installs.calls, 0);
  EXPECT_TRUE(names_in(follower_dir.path()).empty());

  // Then a good transfer goes through.
  EXPECT_TRUE(transfer(*leader, **follower, id, 4096, [](std::int64_t, auto&) { return true; }));
  EXPECT_EQ(installs.calls, 1);
}

TEST(QuorumFileSnapshotStore, BeginAbandonsTheTransferInProgress) {
  TempDir d;
  Installs installs;
  auto s = FileSnapshotStore::open(d.path(), installs.fn());
  ASSERT_TRUE(s);
  const auto first = encode_snapshot(image(4), {4, 1}, 1);
  (*s)->begin({4, 1});
  (*s)->write(std::span(first).first(10));
  EXPECT_EQ(names_in(d.path()),
            std::vector<std::string>{"00000000000000000004-0000000001.checkpoint.part"});
  // The leader moved on to a newer snapshot: the old part goes.
  const auto second = encode_snapshot(image(6), {6, 2}, 1);
  (*s)->begin({6, 2});
  (*s)->write(second);
  EXPECT_EQ(names_in(d.path()),
            std::vector<std::string>{"00000000000000000006-0000000002.checkpoint.part"});
  ASSERT_TRUE((*s)->finish()) << (*s)->last_error();
  EXPECT_EQ(installs.calls, 1);
  EXPECT_EQ(installs.id, (SnapshotId{6, 2}));
  EXPECT_FALSE((*s)->finish()) << "finish without begin";
  // Closing the store mid-transfer leaves no part file.
  (*s)->begin({8, 2});
  (*s)->write(second);
  s->reset();
  EXPECT_EQ(names_in(d.path()),
            std::vector<std::string>{"00000000000000000006-0000000002.checkpoint"});
}

TEST(QuorumFileSnapshotStore, InstallRefusedKeepsTheWholeFileButFinishFails) {
  TempDir leader_dir, follower_dir;
  const SnapshotId id{50, 2};
  auto leader = leader_with(leader_dir, id, image(50));
  Installs installs;
  installs.answer = false;
  auto follower = FileSnapshotStore::open(follower_dir.path(), installs.fn());
  ASSERT_TRUE(follower);
  EXPECT_FALSE(transfer(*leader, **follower, id, 1000, [](std::int64_t, auto&) { return true; }));
  EXPECT_EQ(installs.calls, 1);
  EXPECT_NE((*follower)->last_error().find("not installed"), std::string::npos);
  EXPECT_EQ(names_in(follower_dir.path()),
            std::vector<std::string>{"00000000000000000050-0000000002.checkpoint"});
}

}  // namespace
}  // namespace samsa::replication::quorum
