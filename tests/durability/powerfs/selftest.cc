// Self-test of powerfs: the data model against a plain byte-vector model, then the real file
// system mounted in a temporary directory, driven by syscalls and io_uring, cut, unmounted, and
// checked on the backing directory.
#include <dirent.h>
#include <fcntl.h>
#include <liburing.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/durability/powerfs/overlay.h"

extern char** environ;

namespace samsa::powerfs {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
}

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (auto& c : s)
    c = static_cast<char>('A' + rng() % 26);
  return s;
}

// Reads a file through any fd with pread until EOF.
std::string read_fd(int fd) {
  std::string out;
  char buf[65536];
  for (off_t off = 0;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    off += n;
  }
  return out;
}

// ---- the data model alone --------------------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "powerfs-test-XXXXXX").string();
    if (::mkdtemp(t.data()) == nullptr) std::abort();
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

struct ModelOp {
  bool write;
  std::uint64_t off;  // or size
  std::string data;
};

void apply_model(std::string& m, const ModelOp& op, std::size_t len) {
  if (!op.write) {
    m.resize(op.off, '\0');
    return;
  }
  if (m.size() < op.off + len) m.resize(op.off + len, '\0');
  std::memcpy(m.data() + op.off, op.data.data(), len);
}

std::vector<ModelOp> random_ops(std::mt19937_64& rng, std::size_t n) {
  std::vector<ModelOp> ops;
  for (std::size_t i = 0; i < n; ++i) {
    if (rng() % 5 == 0) {
      ops.push_back({false, rng() % 9000, {}});
    } else {
      std::size_t len = 1 + rng() % 700;
      ops.push_back({true, rng() % 8000, pattern(len, static_cast<unsigned>(rng()))});
    }
  }
  return ops;
}

TEST(FileStateModel, ReadsSyncAndTornCutsMatchAByteModel) {
  TempDir dir;
  std::mt19937_64 rng(42);
  for (int round = 0; round < 60; ++round) {
    fs::path p = dir.path() / ("f" + std::to_string(round));
    std::string durable = pattern(rng() % 5000, static_cast<unsigned>(round));
    write_file(p, durable);
    int fd = ::open(p.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    FileState f(fd, durable.size());
    std::vector<ModelOp> ops = random_ops(rng, 1 + rng() % 40);
    std::string model = durable;
    for (const ModelOp& op : ops) {
      if (op.write) {
        f.write(op.data.data(), op.data.size(), op.off);
      } else {
        f.resize(op.off);
      }
      apply_model(model, op, op.data.size());
      ASSERT_EQ(f.size(), model.size());
      // A read at a random window, and the whole file.
      std::uint64_t off = rng() % (model.size() + 10);
      std::string win(rng() % 3000, '?');
      auto r = f.read(win.data(), win.size(), off);
      ASSERT_TRUE(r);
      std::string want = off < model.size() ? model.substr(off, win.size()) : std::string();
      ASSERT_EQ(win.substr(0, *r), want) << "round " << round;
    }
    // Backing untouched until the cut or the sync.
    ASSERT_EQ(read_file(p), durable);
    if (round % 3 == 0) {
      ASSERT_TRUE(f.sync(true));
      EXPECT_EQ(read_file(p), model);
      EXPECT_EQ(f.pending_ops(), 0u);
      continue;
    }
    const CutMode mode = round % 3 == 1 ? CutMode::kTorn : CutMode::kReorder;
    std::mt19937_64 cut_rng(round);
    auto r = f.cut(mode, cut_rng);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->kept_ops + r->dropped_ops + r->torn_writes, ops.size());
    if (mode == CutMode::kTorn) {
      // Exactly the first kept_ops ops, then maybe a prefix of the next write.
      std::string expect = durable;
      std::uint64_t kept_bytes = 0;
      for (std::size_t i = 0; i < r->kept_ops; ++i) {
        apply_model(expect, ops[i], ops[i].data.size());
        kept_bytes += ops[i].data.size();
      }
      if (r->torn_writes == 1) {
        const ModelOp& torn = ops[r->kept_ops];
        ASSERT_TRUE(torn.write);
        std::size_t len = r->kept_bytes - kept_bytes;
        ASSERT_GT(len, 0u);
        ASSERT_LT(len, torn.data.size());
        apply_model(expect, torn, len);
      } else {
        EXPECT_EQ(r->kept_bytes, kept_bytes);
      }
      EXPECT_EQ(read_file(p), expect) << "round " << round;
    }
    EXPECT_EQ(f.size(), read_file(p).size());
  }
}

TEST(FileStateModel, TornCutsVaryWithTheSeedAndRepeatWithIt) {
  TempDir dir;
  std::set<std::uint64_t> kept;
  std::uint64_t torn = 0;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    fs::path p = dir.path() / "f";
    write_file(p, "");
    std::uint64_t first = 0;
    for (int rep = 0; rep < 2; ++rep) {
      write_file(p, "");
      FileState f(::open(p.c_str(), O_RDWR), 0);
      std::string chunk = pattern(100, 1);
      for (int i = 0; i < 20; ++i)
        f.write(chunk.data(), chunk.size(), i * 100);
      std::mt19937_64 rng(seed);
      auto r = f.cut(CutMode::kTorn, rng);
      ASSERT_TRUE(r);
      if (rep == 0) {
        first = r->kept_bytes;
        kept.insert(first);
        torn += r->torn_writes;
      } else {
        EXPECT_EQ(r->kept_bytes, first) << "seed " << seed;
      }
    }
  }
  EXPECT_GT(kept.size(), 10u);
  EXPECT_GT(torn, 5u);
}

// ---- the mounted file system -----------------------------------------------------------------

const char* powerfs_bin() {
  const char* env = std::getenv("POWERFS_BIN");
  return env != nullptr ? env : POWERFS_BIN;
}

bool fuse_available() {
  int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

int run(std::vector<std::string> argv) {
  std::vector<char*> a;
  for (auto& s : argv)
    a.push_back(s.data());
  a.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, a[0], nullptr, nullptr, a.data(), environ) != 0) return -1;
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class Mounted : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fuse_available()) GTEST_SKIP() << "/dev/fuse not usable here";
    backing_ = tmp_.path() / "backing";
    mnt_ = tmp_.path() / "mnt";
    sock_ = tmp_.path() / "ctl.sock";
    fs::create_directories(backing_);
    fs::create_directories(mnt_);
  }
  void TearDown() override {
    if (pid_ > 0) {
      run({"fusermount3", "-uz", mnt_.string()});
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  void mount(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {powerfs_bin(), backing_.string(), mnt_.string(),
                                     "--control",   sock_.string(),    "-f"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::vector<char*> a;
    for (auto& s : argv)
      a.push_back(s.data());
    a.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&pid_, a[0], nullptr, nullptr, a.data(), environ), 0);
    for (int i = 0; i < 1000; ++i) {
      if (ctl("ping") == "ok") return;
      int st;
      ASSERT_EQ(::waitpid(pid_, &st, WNOHANG), 0) << "powerfs exited during start";
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL() << "powerfs did not come up";
  }

  // Unmounts and waits for the daemon; returns its exit status.
  int unmount() {
    for (int i = 0; i < 200; ++i) {
      if (run({"fusermount3", "-u", mnt_.string()}) == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

  std::string ctl(const std::string& cmd) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, sock_.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      return "connect failed";
    }
    std::string line = cmd + "\n";
    ::send(fd, line.data(), line.size(), MSG_NOSIGNAL);
    std::string reply;
    char c;
    while (::recv(fd, &c, 1, 0) == 1 && c != '\n')
      reply += c;
    ::close(fd);
    return reply;
  }

  // One "key=value" figure of `stats`.
  std::uint64_t stat(const std::string& key) {
    std::string s = " " + ctl("stats") + " ";
    auto pos = s.find(" " + key + "=");
    if (pos == std::string::npos) return UINT64_MAX;
    return std::strtoull(s.c_str() + pos + key.size() + 2, nullptr, 10);
  }

  void cut(const std::string& how) {
    std::string r = ctl("cut " + how);
    ASSERT_TRUE(r.starts_with("ok cut")) << r;
  }

  fs::path m(const std::string& name) const { return mnt_ / name; }
  fs::path b(const std::string& name) const { return backing_ / name; }

  int open_m(const std::string& name, int flags) {
    return ::open(m(name).c_str(), flags | O_CLOEXEC, 0644);
  }

  void write_all(int fd, const std::string& data, off_t off) {
    ASSERT_EQ(::pwrite(fd, data.data(), data.size(), off), static_cast<ssize_t>(data.size()));
  }

  TempDir tmp_;
  fs::path backing_, mnt_, sock_;
  pid_t pid_ = -1;
};

TEST_F(Mounted, UnsyncedWritesAreVisibleThenLostOnCut) {
  mount();
  int fd = open_m("f", O_CREAT | O_WRONLY);
  ASSERT_GE(fd, 0);
  std::string data = pattern(10000, 7);
  write_all(fd, data, 0);
  ASSERT_EQ(::close(fd), 0);
  // Sizes and contents seen through the mount include the pending writes...
  EXPECT_EQ(fs::file_size(m("f")), data.size());
  EXPECT_EQ(read_file(m("f")), data);
  // ...the backing file does not.
  EXPECT_EQ(fs::file_size(b("f")), 0u);
  EXPECT_EQ(stat("pending_bytes"), data.size());
  EXPECT_EQ(stat("dirty_files"), 1u);
  cut("drop");
  EXPECT_EQ(unmount(), 0);
  ASSERT_TRUE(fs::exists(b("f")));  // creation is durable at once (see README)
  EXPECT_EQ(fs::file_size(b("f")), 0u);
}

TEST_F(Mounted, FdatasyncAndFsyncMakeWritesDurable) {
  mount();
  int fd = open_m("f", O_CREAT | O_RDWR);
  ASSERT_GE(fd, 0);
  std::string a = pattern(5000, 1), bb = pattern(3000, 2), c = pattern(700, 3);
  write_all(fd, a, 0);
  ASSERT_EQ(::fdatasync(fd), 0);
  write_all(fd, bb, a.size());
  ASSERT_EQ(::fsync(fd), 0);
  write_all(fd, c, a.size() + bb.size());  // never synced
  EXPECT_EQ(stat("fdatasyncs"), 1u);
  EXPECT_EQ(stat("fsyncs"), 1u);
  EXPECT_EQ(read_fd(fd), a + bb + c);
  cut("drop");
  // The dead disk refuses changes and syncs.
  errno = 0;
  EXPECT_EQ(::pwrite(fd, "x", 1, 0), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(::fsync(fd), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(open_m("new", O_CREAT | O_WRONLY), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(::mkdir(m("d").c_str(), 0755), -1);
  EXPECT_EQ(errno, EIO);
  // Reads serve what survived (direct I/O: no stale kernel cache).
  EXPECT_EQ(read_fd(fd), a + bb);
  EXPECT_TRUE(ctl("cut drop").starts_with("err"));
  ::close(fd);
  EXPECT_EQ(unmount(), 0);
  EXPECT_EQ(read_file(b("f")), a + bb);
}

TEST_F(Mounted, TornCutKeepsAPrefixOfTheWriteSequence) {
  // Appends of distinct chunks: whatever a torn cut keeps must be a byte prefix of the
  // unsynced stream, never less than what was synced.
  std::string synced = pattern(4096, 99);
  std::string stream;
  for (int i = 0; i < 64; ++i)
    stream += pattern(1000, 100 + i);
  std::map<std::uint64_t, std::size_t> len_by_seed;
  for (std::uint64_t seed : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 5}) {
    write_file(b("f"), "");
    mount();
    int fd = open_m("f", O_WRONLY | O_APPEND);
    ASSERT_GE(fd, 0);
    write_all(fd, synced, 0);
    ASSERT_EQ(::fdatasync(fd), 0);
    for (int i = 0; i < 64; ++i) {
      ASSERT_EQ(::write(fd, stream.data() + i * 1000, 1000), 1000);
    }
    ::close(fd);
    cut("torn " + std::to_string(seed));
    ASSERT_EQ(unmount(), 0);
    std::string got = read_file(b("f"));
    ASSERT_GE(got.size(), synced.size());
    ASSERT_EQ(got.substr(0, synced.size()), synced);
    std::size_t kept = got.size() - synced.size();
    ASSERT_EQ(got.substr(synced.size()), stream.substr(0, kept)) << "seed " << seed;
    if (len_by_seed.contains(seed)) {
      EXPECT_EQ(len_by_seed[seed], kept) << "a seed must reproduce its cut";
    }
    len_by_seed[seed] = kept;
  }
  std::size_t partial = 0, torn = 0;
  for (auto [seed, kept] : len_by_seed) {
    partial += kept > 0 && kept < stream.size();
    torn += kept % 1000 != 0;
  }
  EXPECT_GE(partial, 6u);
  EXPECT_GE(torn, 1u);
}

TEST_F(Mounted, ReorderCutKeepsASubsetOfWrites) {
  std::size_t holes = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    write_file(b("f"), "");
    mount();
    int fd = open_m("f", O_WRONLY);
    ASSERT_GE(fd, 0);
    for (int i = 0; i < 32; ++i)
      write_all(fd, pattern(512, 200 + i), i * 512);
    ::close(fd);
    cut("reorder " + std::to_string(seed));
    ASSERT_EQ(unmount(), 0);
    std::string got = read_file(b("f"));
    ASSERT_LE(got.size(), 32u * 512);
    bool missing = false;
    for (int i = 0; i < 32; ++i) {
      std::string want = pattern(512, 200 + i);
      std::string region = i * 512u < got.size() ? got.substr(i * 512, 512) : "";
      // Each region: a prefix of its write, then zeros (or the end of file).
      std::size_t k = 0;
      while (k < region.size() && region[k] == want[k])
        ++k;
      ASSERT_EQ(region.substr(k), std::string(region.size() - k, '\0')) << "chunk " << i;
      if (k == 0 && !region.empty()) missing = true;
    }
    holes += missing;
  }
  EXPECT_GE(holes, 1u) << "a reorder cut should leave a hole before a kept write";
}

TEST_F(Mounted, IoUringWritevAndLinkedFsyncBehaveLikeSyscalls) {
  mount();
  int fd = open_m("u", O_CREAT | O_RDWR);
  ASSERT_GE(fd, 0);
  io_uring ring;
  ASSERT_EQ(io_uring_queue_init(128, &ring, 0), 0);

  // 64 WRITEVs in flight at once (io_uring hands them to its workers, which write through FUSE
  // concurrently), then one WRITEV linked to an FDATASYNC.
  constexpr int kN = 64, kChunk = 16384;
  std::vector<std::string> chunks;
  for (int i = 0; i < kN; ++i)
    chunks.push_back(pattern(kChunk, 300 + i));
  std::vector<iovec> iov(2 * kN);
  for (int i = 0; i < kN; ++i) {
    iov[2 * i] = {chunks[i].data(), kChunk / 2};
    iov[2 * i + 1] = {chunks[i].data() + kChunk / 2, kChunk / 2};
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_writev(sqe, fd, &iov[2 * i], 2, static_cast<std::uint64_t>(i) * kChunk);
    sqe->user_data = i;
  }
  ASSERT_EQ(io_uring_submit(&ring), kN);
  for (int i = 0; i < kN; ++i) {
    io_uring_cqe* cqe;
    ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
    ASSERT_EQ(cqe->res, kChunk) << "write " << cqe->user_data;
    io_uring_cqe_seen(&ring, cqe);
  }
  EXPECT_EQ(stat("fdatasyncs"), 0u);
  std::string tail = pattern(3000, 400);
  iovec tiov[2] = {{tail.data(), 1000}, {tail.data() + 1000, 2000}};
  io_uring_sqe* w = io_uring_get_sqe(&ring);
  io_uring_prep_writev(w, fd, tiov, 2, static_cast<std::uint64_t>(kN) * kChunk);
  w->flags |= IOSQE_IO_LINK;
  io_uring_sqe* s = io_uring_get_sqe(&ring);
  io_uring_prep_fsync(s, fd, IORING_FSYNC_DATASYNC);
  ASSERT_EQ(io_uring_submit(&ring), 2);
  for (int i = 0; i < 2; ++i) {
    io_uring_cqe* cqe;
    ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
    ASSERT_GE(cqe->res, 0);
    io_uring_cqe_seen(&ring, cqe);
  }
  EXPECT_EQ(stat("fdatasyncs"), 1u);
  EXPECT_EQ(stat("pending_bytes"), 0u);

  // A WRITEV without sync after it: lost on the cut.
  std::string lost = pattern(5000, 401);
  iovec liov = {lost.data(), lost.size()};
  io_uring_sqe* l = io_uring_get_sqe(&ring);
  io_uring_prep_writev(l, fd, &liov, 1, static_cast<std::uint64_t>(kN) * kChunk + tail.size());
  ASSERT_EQ(io_uring_submit(&ring), 1);
  io_uring_cqe* cqe;
  ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
  ASSERT_EQ(cqe->res, static_cast<int>(lost.size()));
  io_uring_cqe_seen(&ring, cqe);
  EXPECT_EQ(stat("pending_bytes"), lost.size());
  io_uring_queue_exit(&ring);
  ::close(fd);

  cut("torn 3");
  ASSERT_EQ(unmount(), 0);
  std::string want;
  for (auto& c : chunks)
    want += c;
  want += tail;
  std::string got = read_file(b("u"));
  ASSERT_GE(got.size(), want.size());
  EXPECT_EQ(got.substr(0, want.size()), want);
  EXPECT_EQ(got.substr(want.size()), lost.substr(0, got.size() - want.size()));
}

TEST_F(Mounted, NamespaceChangesAreVisibleAndDurableAtOnce) {
  write_file(b("victim"), "old");
  write_file(b("gone"), "bye");
  fs::create_directories(b("emptydir"));
  mount();
  int fd = open_m("a", O_CREAT | O_WRONLY);
  ASSERT_GE(fd, 0);
  write_all(fd, "payload", 0);
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);
  ASSERT_EQ(::rename(m("a").c_str(), m("b").c_str()), 0);
  ASSERT_EQ(::rename(m("b").c_str(), m("victim").c_str()), 0);  // replaces a file
  ASSERT_EQ(::unlink(m("gone").c_str()), 0);
  ASSERT_EQ(::mkdir(m("d").c_str(), 0755), 0);
  ASSERT_EQ(::rmdir(m("emptydir").c_str()), 0);
  fd = open_m("d/inner", O_CREAT | O_WRONLY);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::set<std::string> names;
  for (auto& e : fs::directory_iterator(mnt_))
    names.insert(e.path().filename());
  EXPECT_EQ(names, (std::set<std::string>{"victim", "d"}));
  EXPECT_EQ(read_file(m("victim")), "payload");
  // fsync of a directory reaches the daemon.
  int dfd = ::open(mnt_.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dfd, 0);
  EXPECT_EQ(::fsync(dfd), 0);
  ::close(dfd);
  EXPECT_EQ(stat("fsyncdirs"), 1u);
  cut("drop");
  ASSERT_EQ(unmount(), 0);
  EXPECT_EQ(read_file(b("victim")), "payload");
  EXPECT_FALSE(fs::exists(b("a")));
  EXPECT_FALSE(fs::exists(b("b")));
  EXPECT_FALSE(fs::exists(b("gone")));
  EXPECT_FALSE(fs::exists(b("emptydir")));
  EXPECT_TRUE(fs::exists(b("d/inner")));
}

TEST_F(Mounted, TruncationIsPendingUntilSynced) {
  std::string durable = pattern(1000, 5);
  write_file(b("t1"), durable);
  write_file(b("t2"), durable);
  write_file(b("t3"), durable);
  mount();
  // By path, no fd.
  ASSERT_EQ(::truncate(m("t1").c_str(), 10), 0);
  EXPECT_EQ(fs::file_size(m("t1")), 10u);
  EXPECT_EQ(read_file(m("t1")), durable.substr(0, 10));
  // Through an fd, then grown again: the gap reads as zeros.
  int fd = open_m("t2", O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 10), 0);
  ASSERT_EQ(::ftruncate(fd, 2000), 0);
  EXPECT_EQ(read_fd(fd), durable.substr(0, 10) + std::string(1990, '\0'));
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);
  // O_TRUNC on open.
  fd = open_m("t3", O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fs::file_size(m("t3")), 0u);
  ::close(fd);
  cut("drop");
  ASSERT_EQ(unmount(), 0);
  EXPECT_EQ(read_file(b("t1")), durable);
  EXPECT_EQ(read_file(b("t2")), durable.substr(0, 10) + std::string(1990, '\0'));
  EXPECT_EQ(read_file(b("t3")), durable);
}

TEST_F(Mounted, ReadsOverlayPendingWritesOnTheDurableContent) {
  std::string durable(4096, 'a');
  write_file(b("f"), durable);
  mount();
  int fd = open_m("f", O_RDWR);
  ASSERT_GE(fd, 0);
  std::string model = durable;
  auto w = [&](const std::string& s, off_t off) {
    write_all(fd, s, off);
    if (model.size() < off + s.size()) model.resize(off + s.size(), '\0');
    model.replace(off, s.size(), s);
  };
  w(std::string(100, 'b'), 1000);
  w(std::string(1000, 'c'), 4000);
  ASSERT_EQ(::ftruncate(fd, 4500), 0);
  model.resize(4500);
  w("d", 6000);
  struct stat st;
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 6001);
  EXPECT_EQ(read_fd(fd), model);
  char buf[64];
  ASSERT_EQ(::pread(fd, buf, sizeof buf, 1090), 64);
  EXPECT_EQ(std::string(buf, 64), model.substr(1090, 64));
  // Read-only private maps (how the engine loads index files) see the same bytes.
  int rfd = open_m("f", O_RDONLY);
  ASSERT_GE(rfd, 0);
  void* map = ::mmap(nullptr, model.size(), PROT_READ, MAP_PRIVATE, rfd, 0);
  ASSERT_NE(map, MAP_FAILED);
  EXPECT_EQ(std::string(static_cast<const char*>(map), model.size()), model);
  ::munmap(map, model.size());
  ::close(rfd);
  ::close(fd);
  EXPECT_EQ(unmount(), 0);  // a clean unmount writes everything back
  EXPECT_EQ(read_file(b("f")), model);
}

TEST_F(Mounted, PendingDataOutlivesCloseAndDiesWithUnlink) {
  mount();
  int fd = open_m("keep", O_CREAT | O_WRONLY);
  ASSERT_GE(fd, 0);
  write_all(fd, "later synced", 0);
  ::close(fd);
  fd = open_m("keep", O_RDONLY);  // fsync through a read-only fd still syncs the file
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);

  fd = open_m("drop", O_CREAT | O_WRONLY);
  ASSERT_GE(fd, 0);
  write_all(fd, std::string(5000, 'z'), 0);
  ::close(fd);
  EXPECT_EQ(stat("dirty_files"), 1u);
  ASSERT_EQ(::unlink(m("drop").c_str()), 0);
  EXPECT_EQ(stat("dirty_files"), 0u);
  EXPECT_EQ(stat("pending_bytes"), 0u);
  fd = open_m("drop", O_CREAT | O_RDWR);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fs::file_size(m("drop")), 0u);
  // An unlinked file still open keeps working through its handle (fstat excepted, see
  // README).
  ASSERT_EQ(::unlink(m("drop").c_str()), 0);
  write_all(fd, "ghost", 0);
  char buf[8] = {};
  EXPECT_EQ(::pread(fd, buf, sizeof buf, 0), 5);
  EXPECT_STREQ(buf, "ghost");
  EXPECT_EQ(::fdatasync(fd), 0);
  ::close(fd);
  cut("drop");
  ASSERT_EQ(unmount(), 0);
  EXPECT_EQ(read_file(b("keep")), "later synced");
  EXPECT_FALSE(fs::exists(b("drop")));
}

TEST_F(Mounted, FallocateLocksAndStatfsWork) {
  mount();
  int fd = open_m("f", O_CREAT | O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fallocate(fd, 0, 0, 8192), 0);
  EXPECT_EQ(fs::file_size(m("f")), 8192u);
  write_all(fd, std::string(8192, 'q'), 0);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 100), 0);
  std::string want = std::string(100, 'q') + std::string(100, '\0') + std::string(7992, 'q');
  EXPECT_EQ(read_fd(fd), want);
  // BSD locks are kept by the kernel: a second open file description conflicts.
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  int fd2 = open_m("f", O_RDONLY);
  ASSERT_GE(fd2, 0);
  EXPECT_EQ(::flock(fd2, LOCK_EX | LOCK_NB), -1);
  EXPECT_EQ(errno, EWOULDBLOCK);
  ::close(fd2);
  struct statvfs sv;
  EXPECT_EQ(::statvfs(mnt_.c_str(), &sv), 0);
  EXPECT_GT(sv.f_blocks, 0u);
  ::close(fd);
  cut("drop");
  ASSERT_EQ(unmount(), 0);
  EXPECT_EQ(fs::file_size(b("f")), 0u);
}

TEST_F(Mounted, DirsyncModeLosesNewEntriesUntilTheirDirectoryIsSynced) {
  write_file(b("victim"), "old");
  mount({"--entries", "dirsync"});
  auto create = [&](const std::string& name, bool sync) {
    int fd = open_m(name, O_CREAT | O_WRONLY);
    ASSERT_GE(fd, 0);
    write_all(fd, name, 0);
    if (sync) {
      ASSERT_EQ(::fsync(fd), 0);
    }
    ::close(fd);
  };
  auto sync_dir = [&](const fs::path& dir) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fsync(fd), 0);
    ::close(fd);
  };
  create("early", true);
  sync_dir(mnt_);        // commits "early"
  create("late", true);  // fsync of the file alone does not commit its name
  ASSERT_EQ(::mkdir(m("d").c_str(), 0755), 0);
  create("d/inner", true);
  {
    // Commits "inner" in d (through io_uring, as the engine does), but d itself is still new.
    int dfd = ::open(m("d").c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(dfd, 0);
    io_uring ring;
    ASSERT_EQ(io_uring_queue_init(4, &ring, 0), 0);
    io_uring_prep_fsync(io_uring_get_sqe(&ring), dfd, 0);
    ASSERT_EQ(io_uring_submit(&ring), 1);
    io_uring_cqe* cqe;
    ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
    EXPECT_EQ(cqe->res, 0);
    io_uring_cqe_seen(&ring, cqe);
    io_uring_queue_exit(&ring);
    ::close(dfd);
  }
  create("tmp", true);
  ASSERT_EQ(::rename(m("tmp").c_str(), m("moved").c_str()), 0);  // still new under its new name
  create("tmp2", true);
  ASSERT_EQ(::rename(m("tmp2").c_str(), m("victim").c_str()), 0);  // replaced: for good
  EXPECT_EQ(stat("fresh_entries"), 3u);                            // late, d, moved
  EXPECT_EQ(stat("fsyncdirs"), 2u);
  cut("drop");
  ASSERT_EQ(unmount(), 0);
  EXPECT_EQ(read_file(b("early")), "early");
  EXPECT_FALSE(fs::exists(b("late")));
  EXPECT_FALSE(fs::exists(b("d")));
  EXPECT_FALSE(fs::exists(b("moved")));
  EXPECT_FALSE(fs::exists(b("tmp")));
  EXPECT_EQ(read_file(b("victim")), "tmp2");
}

TEST_F(Mounted, FsyncModeCommitsANewEntryWithItsFile) {
  mount({"--entries", "fsync"});
  int fd = open_m("synced", O_CREAT | O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fdatasync(fd), 0);
  ::close(fd);
  fd = open_m("unsynced", O_CREAT | O_WRONLY);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(stat("fresh_entries"), 1u);
  cut("torn 1");
  ASSERT_EQ(unmount(), 0);
  EXPECT_TRUE(fs::exists(b("synced")));
  EXPECT_FALSE(fs::exists(b("unsynced")));
}

TEST_F(Mounted, ControlCommandsAnswerAndRejectNonsense) {
  mount();
  EXPECT_EQ(ctl("ping"), "ok");
  EXPECT_TRUE(ctl("stats").starts_with("ok pending_bytes=0 "));
  EXPECT_TRUE(ctl("cut").starts_with("err"));
  EXPECT_TRUE(ctl("cut torn").starts_with("err"));
  EXPECT_TRUE(ctl("cut torn x1").starts_with("err"));
  EXPECT_TRUE(ctl("cut sideways 1").starts_with("err"));
  EXPECT_TRUE(ctl("explode").starts_with("err"));
  EXPECT_EQ(stat("cut"), 0u);
  // The command-line client speaks the same protocol.
  EXPECT_EQ(run({powerfs_bin(), "ctl", sock_.string(), "stats"}), 0);
  EXPECT_EQ(run({powerfs_bin(), "ctl", sock_.string(), "cut", "drop"}), 0);
  EXPECT_EQ(stat("cut"), 1u);
  EXPECT_EQ(run({powerfs_bin(), "ctl", sock_.string(), "cut", "drop"}), 1);
  EXPECT_EQ(unmount(), 0);
}

}  // namespace
}  // namespace samsa::powerfs
