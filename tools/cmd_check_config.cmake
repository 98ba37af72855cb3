# `tollgate check-config --server FILE` runs tollgated's own startup checks
# (server/startup_check.h) on a tollgated config: it links tollgated's config
# library (the config reader and tollgate::Runtime's checks), never tollgated_lib.
if(TARGET tollgated_config)
  target_link_libraries(tollgate_cli PRIVATE tollgated_config)
  target_include_directories(tollgate_cli PRIVATE ${PROJECT_SOURCE_DIR})  # "server/startup_check.h"
  target_compile_definitions(tollgate_cli PRIVATE TOLLGATE_CLI_HAVE_SERVER=1)
endif()
