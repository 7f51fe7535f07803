// powerfs's FUSE operations (fuse_ops.cc), for run() to mount.
#pragma once

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 14)
#endif
#include <fuse3/fuse.h>

namespace samsa::powerfs::detail {

// The operations table; every operation serves the file system in g_fs.
fuse_operations make_ops();

}  // namespace samsa::powerfs::detail
