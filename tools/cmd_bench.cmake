# `tollgate bench redis|overgrant` talks to Redis with hiredis directly for the
# multicmd and watch strategies.
find_path(TOLLGATE_HIREDIS_INCLUDE hiredis/hiredis.h REQUIRED)
find_library(TOLLGATE_HIREDIS_LIB hiredis REQUIRED)
target_include_directories(tollgate_cli PRIVATE ${TOLLGATE_HIREDIS_INCLUDE})
target_link_libraries(tollgate_cli PRIVATE ${TOLLGATE_HIREDIS_LIB})
