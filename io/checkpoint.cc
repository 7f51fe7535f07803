#include "io/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace samsa::io {

Error sys_error(const char* what, const std::filesystem::path& p, int err) {
  return Error{Errc::io_error, std::string(what) + " " + p.string() + ": " + std::strerror(err) +
                                   " (errno " + std::to_string(err) + ")"};
}

Result<void> fsync_dir(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(sys_error("open directory", dir, errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return std::unexpected(sys_error("fsync directory", dir, err));
  return {};
}

namespace {

std::filesystem::path dir_of(const std::filesystem::path& p) {
  auto d = p.parent_path();
  return d.empty() ? std::filesystem::path(".") : d;
}

}  // namespace

Result<bool> create_directories_durably(const std::filesystem::path& dir) {
  // "a/b/" names "a/b".
  if (!dir.has_filename() && dir.has_relative_path()) {
    return create_directories_durably(dir.parent_path());
  }
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return false;
  // Missing parents first, from the top: each new entry is synced into an existing directory.
  if (auto parent = dir.parent_path(); !parent.empty() && parent != dir) {
    if (auto r = create_directories_durably(parent); !r) return std::unexpected(r.error());
  }
  if (::mkdir(dir.c_str(), 0755) != 0) {
    int err = errno;
    if (err == EEXIST) {
      if (std::filesystem::is_directory(dir, ec)) return false;  // made meanwhile
      err = ENOTDIR;                                             // a file is in the way
    }
    return std::unexpected(sys_error("create directory", dir, err));
  }
  if (auto r = fsync_dir(dir_of(dir)); !r) return std::unexpected(r.error());
  return true;
}

Result<bool> make_directory(const std::filesystem::path& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0) return true;
  int err = errno;
  std::error_code ec;
  if (err == EEXIST && std::filesystem::is_directory(dir, ec)) return false;
  return std::unexpected(sys_error("create directory", dir, err == EEXIST ? ENOTDIR : err));
}

Result<void> rename_durably(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    int err = errno;
    return std::unexpected(sys_error("rename", from, err));
  }
  if (auto r = fsync_dir(dir_of(to)); !r) return r;
  if (dir_of(from) != dir_of(to)) return fsync_dir(dir_of(from));
  return {};
}

Result<void> remove_durably(const std::filesystem::path& file) {
  if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
    int err = errno;
    return std::unexpected(sys_error("remove", file, err));
  }
  return fsync_dir(dir_of(file));
}

Result<void> write_file_atomically(const std::filesystem::path& file, std::string_view data,
                                   bool sync) {
  std::filesystem::path tmp = file;
  tmp += ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::unexpected(sys_error("create", tmp, errno));
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return std::unexpected(sys_error("write", tmp, err));
    }
    done += static_cast<std::size_t>(n);
  }
  if (sync && ::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return std::unexpected(sys_error("fsync", tmp, err));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    int err = errno;
    return std::unexpected(sys_error("rename into place", tmp, err));
  }
  return sync ? fsync_dir(dir_of(file)) : Result<void>{};
}

Result<std::vector<std::vector<std::string>>> read_checkpoint(const std::filesystem::path& file,
                                                              std::size_t fields_per_line) {
  std::ifstream in(file);
  if (!in) {
    if (!std::filesystem::exists(file)) {
      return std::unexpected(Error{Errc::not_found, file.string() + " does not exist"});
    }
    return std::unexpected(sys_error("open", file, errno));
  }
  auto bad = [&](int line, const std::string& what) {
    return std::unexpected(
        Error{Errc::io_error, file.string() + " line " + std::to_string(line) + ": " + what});
  };
  std::string line;
  if (!std::getline(in, line)) return bad(1, "missing version line");
  if (line != "0") return bad(1, "version is \"" + line + "\", expected \"0\"");
  if (!std::getline(in, line)) return bad(2, "missing entry count");
  std::size_t count = 0;
  try {
    std::size_t used = 0;
    long long c = std::stoll(line, &used);
    if (used != line.size() || c < 0) return bad(2, "bad entry count \"" + line + "\"");
    count = static_cast<std::size_t>(c);
  } catch (...) {
    return bad(2, "bad entry count \"" + line + "\"");
  }
  std::vector<std::vector<std::string>> out;
  for (std::size_t i = 0; i < count; ++i) {
    if (!std::getline(in, line)) {
      return bad(static_cast<int>(3 + i), "file ends after " + std::to_string(i) + " of " +
                                              std::to_string(count) + " entries");
    }
    std::istringstream ls(line);
    std::vector<std::string> fields;
    std::string f;
    while (ls >> f)
      fields.push_back(f);
    if (fields.size() != fields_per_line) {
      return bad(static_cast<int>(3 + i),
                 "expected " + std::to_string(fields_per_line) + " fields in \"" + line + "\"");
    }
    out.push_back(std::move(fields));
  }
  while (std::getline(in, line)) {
    if (!line.empty()) return bad(static_cast<int>(3 + count), "more entries than the count");
  }
  return out;
}

Result<void> write_checkpoint(const std::filesystem::path& file,
                              const std::vector<std::vector<std::string>>& entries) {
  std::string s = "0\n" + std::to_string(entries.size()) + "\n";
  for (const auto& e : entries) {
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (i) s += ' ';
      s += e[i];
    }
    s += '\n';
  }
  return write_file_atomically(file, s);
}

}  // namespace samsa::io
