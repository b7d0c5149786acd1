# embed.cmake — turns scripts/jobs/quickstart.lua into a C++ source so `salamander run` works with
# no job file at all. Run at build time (cmake -P) whenever the job file changes.
file(READ "${SRC}" CONTENT)
file(WRITE "${DST}" "// Generated from scripts/jobs/quickstart.lua by engine/job/embed.cmake; do not edit.\n#include \"job/config.h\"\nnamespace sal::job {\nconst std::string& embedded_default_text() {\n  static const std::string kText = R\"SALJOB(${CONTENT})SALJOB\";\n  return kText;\n}\n}  // namespace sal::job\n")
