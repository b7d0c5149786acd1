// mapped_file.cpp — see mapped_file.h.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sal {

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail("cannot open ", path, ": ", std::strerror(errno));
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return fail("cannot stat ", path, ": ", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(path, " is not a regular file");
  }
  const size_t size = size_t(st.st_size);
  void* at = nullptr;
  if (size > 0) {
    at = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (at == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return fail("cannot map ", path, " (", size, " bytes): ", std::strerror(e));
    }
  }
  ::close(fd);  // the mapping keeps the file
  return std::shared_ptr<const MappedFile>(new MappedFile(static_cast<const unsigned char*>(at), size));
}

MappedFile::~MappedFile() {
  if (size_ > 0) munmap(const_cast<unsigned char*>(data_), size_);
}

}  // namespace sal
