# Embeds files into a generated C++ source at build time, with CMake alone (no
# xxd, no download): kcached serves the dashboard (service/ui/) from memory.
#
#   kcache_embed_files(OUTPUT <file.cpp> BASE <dir> FILES <file>...)
#
# The source defines kcache::service::embedded_ui_files() (service/src/ui_files.h):
# one row per file, named by its path under BASE. Re-generated when a file changes.

set(KCACHE_EMBED_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/embed_files.cmake")

function(kcache_embed_files)
  cmake_parse_arguments(EMBED "" "OUTPUT;BASE" "FILES" ${ARGN})
  add_custom_command(
    OUTPUT "${EMBED_OUTPUT}"
    COMMAND ${CMAKE_COMMAND} "-DOUTPUT=${EMBED_OUTPUT}" "-DBASE=${EMBED_BASE}"
            "-DFILES=${EMBED_FILES}" -P "${KCACHE_EMBED_SCRIPT}"
    DEPENDS ${EMBED_FILES} "${KCACHE_EMBED_SCRIPT}"
    COMMENT "Embedding ${EMBED_BASE}"
    VERBATIM)
endfunction()
