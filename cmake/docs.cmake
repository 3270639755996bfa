# docs.cmake — the manual pages and shell completions, generated after the
# tool is linked by scripts/gen-man.sh from the tool's own --help texts and
# the public headers, so they cannot drift from what they describe, and
# installed by `make install`: man1 and the completions with the tool, man3
# with the headers. Not in sanitizer builds, whose tool may not run at
# build time (TSan needs a fixed address space).
if(NOT RESIL_BUILD_CLI OR NOT RESIL_SANITIZE STREQUAL "" OR RESIL_FUZZ)
  return()
endif()
set(RESIL_DOC_DIR ${PROJECT_BINARY_DIR}/doc)
# The completion tests read what this generates, so they run where it is.
if(TARGET cli_http_test_http_opts)
  target_compile_definitions(cli_http_test_http_opts PRIVATE RESIL_WITH_DOCS=1)
endif()
file(GLOB doc_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/resil/*.h)
add_custom_command(OUTPUT ${RESIL_DOC_DIR}/stamp
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${RESIL_DOC_DIR}/man1 ${RESIL_DOC_DIR}/man3
  COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/gen-man.sh $<TARGET_FILE:resil>
          ${PROJECT_SOURCE_DIR} ${RESIL_DOC_DIR}
  COMMAND ${CMAKE_COMMAND} -E touch ${RESIL_DOC_DIR}/stamp
  DEPENDS resil ${PROJECT_SOURCE_DIR}/scripts/gen-man.sh ${doc_headers}
  COMMENT "Manual pages and shell completions from the tool's help and the headers")
add_custom_target(resil_docs ALL DEPENDS ${RESIL_DOC_DIR}/stamp)
install(DIRECTORY ${RESIL_DOC_DIR}/man1 ${RESIL_DOC_DIR}/man3 DESTINATION ${CMAKE_INSTALL_MANDIR})
install(FILES ${RESIL_DOC_DIR}/completion/resil.bash
  DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME resil)
install(FILES ${RESIL_DOC_DIR}/completion/_resil
  DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
