# `tollgate check-config --server FILE` runs tollgated's own startup checks
# (server/startup_check.h), so it needs tollgated's library when it is built.
if(TARGET tollgated_lib)
  target_link_libraries(tollgate_cli PRIVATE tollgated_lib)
  target_compile_definitions(tollgate_cli PRIVATE TOLLGATE_CLI_HAVE_SERVER=1)
endif()
