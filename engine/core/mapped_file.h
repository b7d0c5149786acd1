// mapped_file.h — a whole file mapped read-only into memory (mmap, MAP_SHARED), for data too large
// to copy into every process: the token files a job trains on. Pages come from the page cache on
// first touch and are shared by every process of the machine that maps the same file; nothing is
// copied. The mapping sees the file as it was opened: replace a file by renaming a new one over it
// (what `salamander data prepare` does), never by truncating or rewriting it in place (a page
// beyond a shortened end faults the reader).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/result.h"

namespace sal {

class MappedFile {
 public:
  // The file at `path`, mapped whole; an empty file maps to size 0. Errors name the path and the
  // call that failed.
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(const unsigned char* data, size_t size) : data_(data), size_(size) {}
  const unsigned char* data_;
  size_t size_;
};

}  // namespace sal
