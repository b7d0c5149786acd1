# FindMsgpackCxx: msgpack-cxx is header-only. Debian's CMake config drags in all of Boost, which we
# do not use, so we locate the header ourselves and build with MSGPACK_NO_BOOST.
find_path(MSGPACK_INCLUDE_DIR msgpack.hpp)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MsgpackCxx REQUIRED_VARS MSGPACK_INCLUDE_DIR)
if(MsgpackCxx_FOUND AND NOT TARGET Msgpack::Msgpack)
  add_library(Msgpack::Msgpack INTERFACE IMPORTED)
  set_target_properties(Msgpack::Msgpack PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${MSGPACK_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS "MSGPACK_NO_BOOST;MSGPACK_DEFAULT_API_VERSION=3")
endif()
