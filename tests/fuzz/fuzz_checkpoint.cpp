// Fuzzes reading a checkpoint file (profiles/checkpoint_files.h), as `loom-cli resume`
// and a resuming rank read it: arbitrary bytes must give a checkpoint or an error value,
// never a crash or an allocation the file's size does not justify.
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "loom/store/checkpoint_files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  char path[] = "/tmp/loom-fuzz-checkpoint-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return 0;
  if (::write(fd, data, size) != static_cast<ssize_t>(size)) size = 0;
  ::close(fd);
  (void)loom::store::load_checkpoint_header(path);
  (void)loom::store::load_checkpoint(path);
  (void)loom::store::load_params(path);
  std::remove(path);
  return 0;
}
