# FindSentencePiece: locates Google's sentencepiece (Debian's libsentencepiece-dev: the tokenizer of
# `salamander data prepare` and `salamander sample`); defines SentencePiece::SentencePiece, the
# processor and the trainer libraries. Optional: without it the build has no tokenizer and says so.
find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
find_library(SENTENCEPIECE_LIBRARY NAMES sentencepiece)
find_library(SENTENCEPIECE_TRAIN_LIBRARY NAMES sentencepiece_train)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(SentencePiece
  REQUIRED_VARS SENTENCEPIECE_LIBRARY SENTENCEPIECE_TRAIN_LIBRARY SENTENCEPIECE_INCLUDE_DIR)
if(SentencePiece_FOUND AND NOT TARGET SentencePiece::SentencePiece)
  add_library(SentencePiece::SentencePiece INTERFACE IMPORTED)
  set_target_properties(SentencePiece::SentencePiece PROPERTIES
    INTERFACE_LINK_LIBRARIES "${SENTENCEPIECE_TRAIN_LIBRARY};${SENTENCEPIECE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${SENTENCEPIECE_INCLUDE_DIR}")
endif()
