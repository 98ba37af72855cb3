# Debian packages with CPack (`make package`; docs/operations.md, "Installing the package"):
#   tollgate          tollgated and the tollgate CLI in /usr/bin, /etc/tollgate (conffiles),
#                     the hardened systemd unit, the sysusers.d entry, man pages
#   libtollgate-dev   the static libraries, headers, CMake package and pkg-config file
# Two packages, because a server host needs none of the development files and a developer
# embedding the library needs no daemon. The libraries are static, so there is no shared
# runtime library package. Files: deploy/debian, deploy/systemd, deploy/man.
#
# The install rules of the libraries and headers are in component "dev", those of the
# binaries in "server" (CMAKE_INSTALL_DEFAULT_COMPONENT_NAME, set around add_subdirectory in
# the top-level CMakeLists.txt). The rules below write absolute paths (/etc, /lib); they are
# EXCLUDE_FROM_ALL, so `make install PREFIX=...` never touches them, only the package does.
set(_deb ${PROJECT_SOURCE_DIR}/deploy/debian)
set(_gen ${CMAKE_CURRENT_BINARY_DIR}/deb)
file(MAKE_DIRECTORY ${_gen})

# The changelog's first entry must name the version being packaged (a test checks it too).
file(STRINGS ${_deb}/changelog _changelog_top LIMIT_COUNT 1)
set(TOLLGATE_DEB_RELEASE 1)
set(_deb_version "${PROJECT_VERSION}-${TOLLGATE_DEB_RELEASE}")
if(NOT _changelog_top MATCHES "^tollgate \\(${_deb_version}\\) ")
  message(FATAL_ERROR "deploy/debian/changelog: its first entry is '${_changelog_top}', "
                      "the package is ${_deb_version}: add an entry")
endif()

# Debian wants the changelog and man pages compressed with gzip -9n (no name, no timestamp).
find_program(TOLLGATE_GZIP gzip REQUIRED)
foreach(pair "changelog;changelog.Debian.gz" "../man/tollgated.1;tollgated.1.gz"
             "../man/tollgate.1;tollgate.1.gz")
  list(GET pair 0 _src)
  list(GET pair 1 _dst)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_deb}/${_src})
  execute_process(COMMAND ${TOLLGATE_GZIP} -9n -c ${_deb}/${_src}
                  OUTPUT_FILE ${_gen}/${_dst} COMMAND_ERROR_IS_FATAL ANY)
endforeach()

# Package "tollgate" (component server): everything but the binaries comes from here.
set(_opt COMPONENT server EXCLUDE_FROM_ALL)
install(FILES ${_deb}/tollgated.json DESTINATION /etc/tollgate ${_opt})
install(FILES ${PROJECT_SOURCE_DIR}/examples/policy.json DESTINATION /etc/tollgate ${_opt})
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/tollgated.service
              ${PROJECT_SOURCE_DIR}/deploy/systemd/tollgated.socket
              ${PROJECT_SOURCE_DIR}/deploy/systemd/tollgated-admin.socket
        DESTINATION /lib/systemd/system ${_opt})
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/tollgate.sysusers
        DESTINATION /usr/lib/sysusers.d RENAME tollgate.conf ${_opt})
install(FILES ${_gen}/tollgated.1.gz ${_gen}/tollgate.1.gz DESTINATION share/man/man1 ${_opt})
install(FILES ${_deb}/copyright ${_deb}/README.Debian ${_gen}/changelog.Debian.gz
        DESTINATION share/doc/tollgate ${_opt})
install(FILES ${_deb}/lintian-overrides DESTINATION share/lintian/overrides RENAME tollgate ${_opt})
install(FILES ${PROJECT_SOURCE_DIR}/examples/tollgated.json
        DESTINATION share/doc/tollgate/examples ${_opt})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/policies/
        DESTINATION share/doc/tollgate/examples/policies ${_opt})
# Package "libtollgate-dev" (component dev): its copyright and changelog, and static libraries
# without their debug sections (as Debian's dh_strip leaves them: 71 MB of DWARF otherwise).
install(FILES ${_deb}/copyright ${_gen}/changelog.Debian.gz
        DESTINATION share/doc/libtollgate-dev COMPONENT dev EXCLUDE_FROM_ALL)
install(FILES ${_deb}/lintian-overrides DESTINATION share/lintian/overrides
        RENAME libtollgate-dev COMPONENT dev EXCLUDE_FROM_ALL)
find_program(TOLLGATE_STRIP NAMES ${CMAKE_STRIP} strip REQUIRED)
install(CODE "
  file(GLOB _libs \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libtollgate_*.a\")
  foreach(_lib \${_libs})
    execute_process(COMMAND ${TOLLGATE_STRIP} --strip-debug --enable-deterministic-archives
                            --remove-section=.comment --remove-section=.note \${_lib}
                    COMMAND_ERROR_IS_FATAL ANY)
  endforeach()" COMPONENT dev EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tollgate)
set(CPACK_PACKAGE_VENDOR "the tollgate developers")
set(CPACK_PACKAGE_CONTACT "tollgate developers <tollgate@example.org>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${TOLLGATE_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME tollgate)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION net)
# procps: /bin/kill, the unit's ExecReload (not in a minimal Debian); the shared libraries
# are added by dpkg-shlibdeps.
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "procps")
# Each package's description: the first line is its synopsis; one string (a list would be
# joined with ';'). CPack 3.25 would put the project's DESCRIPTION in front as a shared
# synopsis unless the summary equals CPack's default, which it therefore does.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "tollgate built using CMake")
string(CONCAT CPACK_DEBIAN_SERVER_DESCRIPTION
    "exact rate limiting for APIs: the tollgated service and CLI\n"
    "tollgated decides whether a request may pass under a JSON policy of rate limits\n"
    "(token bucket, GCRA, sliding window, quotas), keeping state in local memory or\n"
    "in Redis or Redis Cluster. It answers nginx auth_request, a JSON decision API,\n"
    "Envoy's rate limit service (gRPC), or runs as a gateway in front of an HTTP\n"
    "upstream, and exports Prometheus metrics.\n"
    "\n"
    "This package runs it under a sandboxed systemd unit as the user tollgate.")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    ${_deb}/conffiles ${_deb}/postinst ${_deb}/prerm ${_deb}/postrm)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libtollgate-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# What the installed CMake package and the static libraries need to link (tollgateConfig.cmake,
# tollgate.pc): hiredis, RE2, OpenSSL; Boost for the redis store's Asio headers.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libhiredis-dev, libre2-dev, libssl-dev, libboost-dev")
string(CONCAT CPACK_DEBIAN_DEV_DESCRIPTION
    "exact rate limiting for APIs: C++ development files\n"
    "The tollgate library embeds exact rate limiting in a C++20 program: token\n"
    "bucket, GCRA, sliding window and quotas on local memory (nanoseconds per\n"
    "decision) or on Redis and Redis Cluster, with middleware for cpp-httplib and\n"
    "Boost.Beast.\n"
    "\n"
    "This package holds the static libraries, the headers, the CMake package\n"
    "(find_package(tollgate), target tollgate::tollgate) and a pkg-config file.")
include(CPack)
