// powerfs control socket (control.cc): the server thread run() starts, and `powerfs ctl`.
#pragma once

#include <string>

#include "tests/durability/powerfs/fs_state.h"

namespace samsa::powerfs::detail {

// The body of the `powerfs-ctl` thread: serves listen_fd until wake_fd becomes readable.
void control_loop(Fs& fs, int listen_fd, int wake_fd);

// A listening Unix socket at `path` (an old one there is removed), or -1 after a message.
int listen_unix(const std::string& path);

// `powerfs ctl SOCKET COMMAND...`: sends one command, prints the reply; 0 if it starts with ok.
int ctl_main(int argc, char** argv);

}  // namespace samsa::powerfs::detail
