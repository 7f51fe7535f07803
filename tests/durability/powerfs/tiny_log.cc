// tiny_log: the smallest honest append-only log, with log_torture's command line, used to prove
// powerfs and the power-loss driver independently of the storage engine.
//
//   tiny_log write --dir D [--seed S] [--segment-bytes N] [--no-fsync] [--no-dir-fsync]
//                  [--max-batches M]
//                  [--producers K]   (accepted, ignored: one group in flight at a time)
//   tiny_log check --dir D --acks FILE [--seed S]
//
// Segments D/<20-digit first index>.seg hold records
//   magic u32 | payload length u32 | index u64 | crc32c(index, payload) u32 | payload
// (big-endian). Record i's payload is a pure function of (seed, i). The writer appends groups of
// records with one io_uring WRITEV linked to an FDATASYNC and prints `ACK i i i` for each
// record once the sync completed (with --no-fsync: once the write completed).
#include <dirent.h>
#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/crc32c.h"

namespace samsa::powerfs::tiny {
namespace {

constexpr std::uint32_t kMagic = 0x54494e59;  // "TINY"
constexpr std::size_t kHeader = 20;

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string payload(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t s = mix(seed * 0x100000001b3ull ^ mix(i));
  std::string p(100 + s % 3997, '\0');
  for (char& c : p) {
    s = mix(s);
    c = static_cast<char>(s);
  }
  return p;
}

std::uint32_t record_crc(std::uint64_t i, std::string_view p) {
  std::byte idx[8];
  store_be<std::uint64_t>(idx, i);
  return crc32c(crc32c(0, idx, 8), p.data(), p.size());
}

std::string record(std::uint64_t seed, std::uint64_t i) {
  std::string p = payload(seed, i);
  std::string r(kHeader, '\0');
  auto* h = reinterpret_cast<std::byte*>(r.data());
  store_be<std::uint32_t>(h, kMagic);
  store_be<std::uint32_t>(h + 4, static_cast<std::uint32_t>(p.size()));
  store_be<std::uint64_t>(h + 8, i);
  store_be<std::uint32_t>(h + 16, record_crc(i, p));
  return r + p;
}

std::string seg_name(std::uint64_t base) {
  char b[32];
  std::snprintf(b, sizeof b, "%020" PRIu64 ".seg", base);
  return b;
}

struct Segment {
  std::uint64_t base;
  std::string path;
};

std::vector<Segment> segments(const std::string& dir) {
  std::vector<Segment> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n.size() != 24 || !n.ends_with(".seg")) continue;
    out.push_back({std::strtoull(e->d_name, nullptr, 10), dir + "/" + e->d_name});
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.base < b.base; });
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The longest valid prefix of the log: records 0..count-1, contiguous, byte-identical to what
// the writer generates. `stop_seg`/`stop_pos` locate the first byte that is not part of it.
struct Scan {
  std::uint64_t count = 0;
  std::size_t stop_seg = 0;
  std::uint64_t stop_pos = 0;
  std::uint64_t tail_bytes = 0;  // bytes at and after the stop point, in every segment
  std::string why;               // why the scan stopped, if before the end of everything
};

Scan scan(const std::vector<Segment>& segs, std::uint64_t seed) {
  Scan s;
  bool stopped = false;
  for (std::size_t k = 0; k < segs.size(); ++k) {
    std::string data = slurp(segs[k].path);
    if (stopped) {
      s.tail_bytes += data.size();
      continue;
    }
    s.stop_seg = k;
    std::size_t pos = 0;
    if (segs[k].base != s.count) {
      stopped = true;
      s.why = "segment " + segs[k].path + " starts at " + std::to_string(segs[k].base) +
              ", expected " + std::to_string(s.count);
    }
    while (!stopped && pos < data.size()) {
      auto* h = reinterpret_cast<const std::byte*>(data.data() + pos);
      std::string err;
      if (data.size() - pos < kHeader) {
        err = "short header";
      } else if (load_be<std::uint32_t>(h) != kMagic) {
        err = "bad magic";
      } else {
        std::uint32_t len = load_be<std::uint32_t>(h + 4);
        std::uint64_t idx = load_be<std::uint64_t>(h + 8);
        if (data.size() - pos - kHeader < len) {
          err = "short payload";
        } else if (idx != s.count) {
          err = "index " + std::to_string(idx) + ", expected " + std::to_string(s.count);
        } else if (data.compare(pos, kHeader + len, record(seed, idx)) != 0) {
          err = "content differs from record " + std::to_string(idx);
        } else {
          pos += kHeader + len;
          ++s.count;
          continue;
        }
      }
      stopped = true;
      s.why = err + " at " + segs[k].path + ":" + std::to_string(pos);
    }
    s.stop_pos = pos;
    s.tail_bytes += data.size() - pos;
  }
  if (!stopped) s.stop_seg = segs.empty() ? 0 : segs.size() - 1;
  return s;
}

bool sync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

int die(const char* what) {
  std::fprintf(stderr, "tiny_log: %s: %s\n", what, std::strerror(errno));
  return 1;
}

struct Options {
  std::string dir, acks;
  std::uint64_t seed = 1;
  std::uint64_t segment_bytes = 1 << 20;
  std::uint64_t max_batches = 0;
  bool fsync = true;
  bool dir_fsync = true;  // fsync the directory after creating a segment
};

int write_main(const Options& o) {
  ::mkdir(o.dir.c_str(), 0755);
  std::vector<Segment> segs = segments(o.dir);
  Scan s = scan(segs, o.seed);
  // Recovery: cut the log back to its valid prefix and make that durable before appending.
  for (std::size_t k = segs.size(); k-- > 0;) {
    bool drop = k > s.stop_seg || (k == s.stop_seg && s.stop_pos == 0 && segs[k].base != s.count);
    if (drop) {
      if (::unlink(segs[k].path.c_str()) != 0) return die("unlink");
      segs.pop_back();
    }
  }
  if (o.fsync && !sync_dir(o.dir)) return die("fsync dir");
  int fd = -1;
  std::uint64_t size = 0;
  if (!segs.empty()) {
    fd = ::open(segs.back().path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return die("open segment");
    struct stat st;
    if (::fstat(fd, &st) != 0) return die("fstat");
    size = segs.size() - 1 == s.stop_seg ? s.stop_pos : static_cast<std::uint64_t>(st.st_size);
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return die("ftruncate");
    if (o.fsync && ::fdatasync(fd) != 0) return die("fdatasync");
  }
  io_uring ring;
  if (io_uring_queue_init(8, &ring, 0) != 0) return die("io_uring_queue_init");
  std::uint64_t next = s.count;
  std::uint64_t rng = mix(o.seed ^ next);
  for (std::uint64_t groups = 0; o.max_batches == 0 || next < s.count + o.max_batches; ++groups) {
    if (fd < 0 || size >= o.segment_bytes) {
      if (fd >= 0) ::close(fd);
      fd = ::open((o.dir + "/" + seg_name(next)).c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC,
                  0644);
      if (fd < 0) return die("create segment");
      size = 0;
      if (o.fsync && o.dir_fsync && !sync_dir(o.dir)) return die("fsync dir");
    }
    rng = mix(rng);
    std::uint64_t n = 1 + rng % 8;
    if (o.max_batches != 0) n = std::min(n, s.count + o.max_batches - next);
    std::vector<std::string> recs;
    std::vector<iovec> iov;
    std::uint64_t total = 0;
    for (std::uint64_t j = 0; j < n; ++j)
      recs.push_back(record(o.seed, next + j));
    for (auto& r : recs) {
      iov.push_back({r.data(), r.size()});
      total += r.size();
    }
    io_uring_sqe* w = io_uring_get_sqe(&ring);
    io_uring_prep_writev(w, fd, iov.data(), static_cast<unsigned>(iov.size()), size);
    int expect = 1;
    if (o.fsync) {
      w->flags |= IOSQE_IO_LINK;
      io_uring_prep_fsync(io_uring_get_sqe(&ring), fd, IORING_FSYNC_DATASYNC);
      expect = 2;
    }
    if (io_uring_submit(&ring) != expect) return die("io_uring_submit");
    for (int c = 0; c < expect; ++c) {
      io_uring_cqe* cqe;
      int rc = io_uring_wait_cqe(&ring, &cqe);
      if (rc != 0) {
        errno = -rc;
        return die("io_uring_wait_cqe");
      }
      int res = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      if (res < 0) {
        errno = -res;
        return die("write/fsync");
      }
      if (c == 0 && static_cast<std::uint64_t>(res) != total) {
        std::fprintf(stderr, "tiny_log: short write\n");
        return 1;
      }
    }
    size += total;
    std::string acks;
    for (std::uint64_t j = 0; j < n; ++j) {
      std::string id = std::to_string(next + j);
      acks += "ACK " + id + " " + id + " " + id + "\n";
    }
    if (::write(STDOUT_FILENO, acks.data(), acks.size()) != static_cast<ssize_t>(acks.size())) {
      return die("write stdout");
    }
    next += n;
  }
  io_uring_queue_exit(&ring);
  if (fd >= 0) ::close(fd);
  return 0;
}

int check_main(const Options& o) {
  std::ifstream in(o.acks);
  if (!in) return die("open acks");
  std::set<std::uint64_t> acked;
  std::string line;
  while (std::getline(in, line)) {
    std::uint64_t i, b, l;
    if (std::sscanf(line.c_str(), "ACK %" SCNu64 " %" SCNu64 " %" SCNu64, &i, &b, &l) == 3) {
      acked.insert(i);
    }
  }
  Scan s = scan(segments(o.dir), o.seed);
  std::uint64_t lost = 0;
  for (std::uint64_t i : acked)
    lost += i >= s.count;
  if (lost == 0) {
    std::printf("OK batches=%" PRIu64 " acked=%zu lost=0 tail_bytes=%" PRIu64 "\n", s.count,
                acked.size(), s.tail_bytes);
    return 0;
  }
  std::printf("FAIL batches=%" PRIu64 " acked=%zu lost=%" PRIu64 " first_lost=%" PRIu64
              " tail_bytes=%" PRIu64 " stop: %s\n",
              s.count, acked.size(), lost, *acked.lower_bound(s.count), s.tail_bytes,
              s.why.c_str());
  return 1;
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tiny_log write|check --dir D [options]\n");
    return 2;
  }
  std::string_view cmd = argv[1];
  Options o;
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--no-fsync") {
      o.fsync = false;
      continue;
    }
    if (a == "--no-dir-fsync") {
      o.dir_fsync = false;
      continue;
    }
    if (v == nullptr) {
      std::fprintf(stderr, "tiny_log: %s needs a value\n", argv[i]);
      return 2;
    }
    ++i;
    if (a == "--dir") {
      o.dir = v;
    } else if (a == "--acks") {
      o.acks = v;
    } else if (a == "--seed") {
      o.seed = std::strtoull(v, nullptr, 10);
    } else if (a == "--segment-bytes") {
      o.segment_bytes = std::strtoull(v, nullptr, 10);
    } else if (a == "--max-batches") {
      o.max_batches = std::strtoull(v, nullptr, 10);
    } else if (a != "--producers") {
      std::fprintf(stderr, "tiny_log: unknown option %s\n", argv[i - 1]);
      return 2;
    }
  }
  if (o.dir.empty()) return 2;
  if (cmd == "write") return write_main(o);
  if (cmd == "check" && !o.acks.empty()) return check_main(o);
  return 2;
}

}  // namespace
}  // namespace samsa::powerfs::tiny

int main(int argc, char** argv) {
  return samsa::powerfs::tiny::run(argc, argv);
}
