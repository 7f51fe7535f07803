#include "base/thread.h"

#include <pthread.h>

#include <string>

namespace samsa {

void set_thread_name(std::string_view name) {
  std::string n(name.substr(0, 15));
  pthread_setname_np(pthread_self(), n.c_str());
}

}  // namespace samsa
