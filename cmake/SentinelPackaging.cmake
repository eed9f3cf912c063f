# Install layout of the shipped files and the Debian package (CPack). Included last by the
# top-level CMakeLists.txt. The helpers (sentinel_install_programs, sentinel_install_nccl_plugin,
# sentinel_install_data) live in SentinelHelpers.cmake: a new binary or plugin calls them from its
# own CMakeLists.txt.
#
#   <prefix>/bin/                   sentineld sentinelctl sentinel-run
#   <libdir>/                       libnccl-profiler-sentinel.so (NCCL_PROFILER_PLUGIN=sentinel)
#   <sysconfdir>/sentinel/          sentineld.conf (/etc/sentinel for prefix /usr)
#   <prefix>/lib/systemd/system/    sentineld.service (ExecStart = the installed sentineld)
#   <prefix>/share/sentinel/        prometheus/ grafana/ kubernetes/ schemas/
#
# The .deb is built from a tree configured with -DCMAKE_INSTALL_PREFIX=/usr, so that the paths
# baked in at configure time (multiarch libdir, /etc) are the system ones (README "Install").

if(TARGET sentinel_nccl_profiler)
  sentinel_install_nccl_plugin(sentinel_nccl_profiler)
endif()
foreach(_prog sentineld sentinelctl)
  if(TARGET ${_prog})
    sentinel_install_programs(${_prog})
  endif()
endforeach()
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/sentinel-run DESTINATION ${CMAKE_INSTALL_BINDIR}
        COMPONENT sentinel)

# The config: the example, as shipped. /etc/sentinel for prefix /usr (GNUInstallDirs' rule);
# <prefix>/etc/sentinel otherwise, relative so that `cmake --install --prefix` relocates it.
set(SENTINEL_INSTALL_CONFIG ${CMAKE_INSTALL_FULL_SYSCONFDIR}/sentinel/sentineld.conf)
if(IS_ABSOLUTE "${CMAKE_INSTALL_SYSCONFDIR}" OR CMAKE_INSTALL_FULL_SYSCONFDIR MATCHES "^/etc")
  set(_confdir ${CMAKE_INSTALL_FULL_SYSCONFDIR}/sentinel)
else()
  set(_confdir ${CMAKE_INSTALL_SYSCONFDIR}/sentinel)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/examples/sentineld.conf DESTINATION ${_confdir}
        COMPONENT sentinel)

# The unit: the example with ExecStart pointing at the installed binary and config.
set(_unit_src ${PROJECT_SOURCE_DIR}/examples/systemd/sentineld.service)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_unit_src})
file(READ ${_unit_src} _unit)
string(REGEX REPLACE "\nExecStart=[^\n]*"
       "\nExecStart=${CMAKE_INSTALL_FULL_BINDIR}/sentineld --config ${SENTINEL_INSTALL_CONFIG}"
       _unit "${_unit}")
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/install/sentineld.service CONTENT "${_unit}" @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/install/sentineld.service DESTINATION lib/systemd/system
        COMPONENT sentinel)

sentinel_install_data(FILES ${PROJECT_SOURCE_DIR}/examples/prometheus/sentinel_rules.yml
                      DESTINATION prometheus)
if(EXISTS ${PROJECT_SOURCE_DIR}/examples/grafana/sentinel-dashboard.json)
  sentinel_install_data(FILES ${PROJECT_SOURCE_DIR}/examples/grafana/sentinel-dashboard.json
                        DESTINATION grafana)
endif()
if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/examples/kubernetes)
  sentinel_install_data(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/kubernetes/ DESTINATION kubernetes)
endif()
file(GLOB _schemas ${PROJECT_SOURCE_DIR}/schemas/api/*.schema.json)
sentinel_install_data(FILES ${_schemas} ${PROJECT_SOURCE_DIR}/schemas/flight_record.schema.json
                      DESTINATION schemas)

# --- Debian package: cpack -G DEB in a tree configured with -DCMAKE_INSTALL_PREFIX=/usr ---
set(CPACK_PACKAGE_NAME nccl-sentinel)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "nccl-sentinel maintainers <nccl-sentinel@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "NCCL runtime guard: profiler plugin, node-local collector sentineld, sentinelctl")
set(CPACK_PACKAGE_DESCRIPTION
    "A profiler plugin that NCCL loads by name (NCCL_PROFILER_PLUGIN=sentinel), which fails\n\
 wrong-transport communicator inits and streams per-rank collective timing to sentineld, a\n\
 node-local collector exporting straggler/hang alerts, Prometheus metrics and Perfetto traces.")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_SET_DESTDIR ON)  # /etc/sentinel is an absolute destination: stage it under DESTDIR
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Real runtime dependencies from the binaries (dpkg-shlibdeps), plus what the scripts call.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "systemd")
# The config under /etc is a conffile: dpkg keeps the operator's edits on upgrade.
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/deb/conffiles CONTENT "${SENTINEL_INSTALL_CONFIG}\n")
foreach(_script postinst prerm postrm)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/deb/${_script} ${CMAKE_BINARY_DIR}/deb/${_script}
                 COPYONLY)
endforeach()
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_BINARY_DIR}/deb/conffiles ${CMAKE_BINARY_DIR}/deb/postinst ${CMAKE_BINARY_DIR}/deb/prerm
    ${CMAKE_BINARY_DIR}/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_GENERATOR DEB)
include(CPack)
