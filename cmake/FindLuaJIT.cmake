# FindLuaJIT: locates LuaJIT 2.1 (Debian's libluajit-5.1-dev or OpenResty's libluajit2-5.1-dev,
# which share headers and soname) and defines the imported target LuaJIT::LuaJIT.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_LUAJIT QUIET luajit)
endif()
find_path(LUAJIT_INCLUDE_DIR luajit.h
  HINTS ${PC_LUAJIT_INCLUDE_DIRS}
  PATH_SUFFIXES luajit-2.1)
find_library(LUAJIT_LIBRARY NAMES luajit-5.1 HINTS ${PC_LUAJIT_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LuaJIT REQUIRED_VARS LUAJIT_LIBRARY LUAJIT_INCLUDE_DIR)
if(LuaJIT_FOUND AND NOT TARGET LuaJIT::LuaJIT)
  add_library(LuaJIT::LuaJIT UNKNOWN IMPORTED)
  set_target_properties(LuaJIT::LuaJIT PROPERTIES
    IMPORTED_LOCATION "${LUAJIT_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${LUAJIT_INCLUDE_DIR}")
endif()
