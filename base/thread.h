#pragma once

#include <string_view>

namespace samsa {

// Names the calling thread (15 characters at most, as the kernel allows); shows in top, gdb,
// /proc and every log line.
void set_thread_name(std::string_view name);

}  // namespace samsa
