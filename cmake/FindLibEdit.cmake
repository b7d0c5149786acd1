# FindLibEdit: locates BSD libedit (libedit-dev) for the REPL's line editing; defines LibEdit::LibEdit.
find_path(LIBEDIT_INCLUDE_DIR editline/readline.h)
find_library(LIBEDIT_LIBRARY NAMES edit)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibEdit REQUIRED_VARS LIBEDIT_LIBRARY LIBEDIT_INCLUDE_DIR)
if(LibEdit_FOUND AND NOT TARGET LibEdit::LibEdit)
  add_library(LibEdit::LibEdit UNKNOWN IMPORTED)
  set_target_properties(LibEdit::LibEdit PROPERTIES
    IMPORTED_LOCATION "${LIBEDIT_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${LIBEDIT_INCLUDE_DIR}")
endif()
