# Registers kiln-tests with ctest as one ctest test per GoogleTest suite: the sanitized tree's registration
# (tests/CMakeLists.txt; the optimised tree registers each test alone through gtest_discover_tests). An
# instrumented process takes about 0.3 s to start and end (ASan's allocator, LeakSanitizer's scan at exit), and
# 2000 of the suite's 2260 tests take less than that to run: one process per suite instead of per test saved
# about five of CI's sixty minutes. Each suite writes GoogleTest's XML report into XML_DIR, from which
# ci/tally.sh counts every test it ran (passed, failed, skipped), not the suites.
#
# Run with cmake -P after kiln-tests is built (POST_BUILD). Inputs:
#   TEST_EXECUTABLE  the test binary
#   CTEST_FILE       the ctest file written (tests/CMakeLists.txt includes it through TEST_INCLUDE_FILES)
#   XML_DIR          where each suite's report goes: <suite, '/' as '_'>.xml
#   EXCLUDE_FILE     tests/optimised-tree-only.txt: tests this tree does not run, one `Suite.Test  # why` a line
#   TIMEOUT          seconds a suite may run
foreach(var TEST_EXECUTABLE CTEST_FILE XML_DIR EXCLUDE_FILE TIMEOUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "gtest_suites.cmake: ${var} is not set")
  endif()
endforeach()

set(listing_file "${CTEST_FILE}.listing")
execute_process(COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests OUTPUT_FILE "${listing_file}" RESULT_VARIABLE rc
                ERROR_VARIABLE err TIMEOUT 120)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gtest_suites.cmake: ${TEST_EXECUTABLE} --gtest_list_tests failed (${rc}): ${err}")
endif()
# A suite is a line that is not indented: `Suite.`, `Prefix/Suite.` or `Typed/0.  # TypeParam = ...`.
file(STRINGS "${listing_file}" suite_lines REGEX "^[A-Za-z_][A-Za-z0-9_/]*\\.( .*)?$")
file(REMOVE "${listing_file}")

# The excluded tests, grouped by suite: each suite's filter leaves its own out.
file(STRINGS "${EXCLUDE_FILE}" exclude_lines REGEX "^[A-Za-z_]")
foreach(line IN LISTS exclude_lines)
  string(REGEX MATCH "^([A-Za-z0-9_/]+)\\.([A-Za-z0-9_/]+)" name "${line}")
  if(NOT name)
    message(FATAL_ERROR "${EXCLUDE_FILE}: `${line}` is not `Suite.Test  # why`")
  endif()
  set(excluded_suite "${CMAKE_MATCH_1}")
  # A name that no longer names a test is a stale entry: say so rather than leave nothing out.
  execute_process(COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests "--gtest_filter=${name}" OUTPUT_VARIABLE found
                  RESULT_VARIABLE rc TIMEOUT 120)
  if(NOT rc EQUAL 0 OR NOT found MATCHES "\n  ")
    message(FATAL_ERROR "${EXCLUDE_FILE}: ${name} is not one of ${TEST_EXECUTABLE}'s tests")
  endif()
  string(MAKE_C_IDENTIFIER "${excluded_suite}" key)
  list(APPEND excluded_in_${key} "${name}")
endforeach()

set(out "# Written by tests/gtest_suites.cmake from `${TEST_EXECUTABLE} --gtest_list_tests`.\n")
foreach(line IN LISTS suite_lines)
  string(REGEX REPLACE "\\..*$" "" suite "${line}")
  string(MAKE_C_IDENTIFIER "${suite}" key)
  set(filter "${suite}.*")
  if(DEFINED excluded_in_${key})
    list(JOIN excluded_in_${key} ":" negative)
    string(APPEND filter "-${negative}")
  endif()
  string(REPLACE "/" "_" xml_name "${suite}")
  string(APPEND out "add_test([==[${suite}]==] [==[${TEST_EXECUTABLE}]==] [==[--gtest_filter=${filter}]==] "
                    "[==[--gtest_output=xml:${XML_DIR}/${xml_name}.xml]==])\n"
                    "set_tests_properties([==[${suite}]==] PROPERTIES TIMEOUT ${TIMEOUT})\n")
endforeach()
file(MAKE_DIRECTORY "${XML_DIR}")
file(WRITE "${CTEST_FILE}.tmp" "${out}")
file(RENAME "${CTEST_FILE}.tmp" "${CTEST_FILE}")
