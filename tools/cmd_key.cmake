# `tollgate key` talks to tollgated's admin API over HTTP with Boost.Beast
# (header-only), compiled with tollgated's Asio configuration: every object of
# a binary that instantiates Asio must see the same one (src/redis/CMakeLists.txt).
find_package(Threads REQUIRED)
target_compile_definitions(tollgate_cli PRIVATE BOOST_ASIO_NO_DEPRECATED
  BOOST_BEAST_USE_STD_STRING_VIEW)
target_link_libraries(tollgate_cli PRIVATE Threads::Threads)
