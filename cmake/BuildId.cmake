# wallsim_build_id(TARGET NAMESPACE HEADER DIRS...): adds to TARGET a generated source defining
# NAMESPACE::build_id() (declared in HEADER): 16 hex digits of a SHA-256 over the paths and
# contents of every file under DIRS (relative to the project root), regenerated when one of them
# changes (cmake/build_id_script.cmake).
function(wallsim_build_id target namespace header)
  set(globs "")
  foreach(dir IN LISTS ARGN)
    list(APPEND globs ${PROJECT_SOURCE_DIR}/${dir}/*)
  endforeach()
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR} ${globs})
  list(SORT sources)
  list(JOIN sources "\n" source_list)
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/generated)
  file(WRITE ${gen}/build_id_sources.txt "${source_list}\n")
  list(TRANSFORM sources PREPEND ${PROJECT_SOURCE_DIR}/ OUTPUT_VARIABLE paths)
  add_custom_command(
    OUTPUT ${gen}/build_id.cpp
    COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -DLIST=${gen}/build_id_sources.txt
            -DOUT=${gen}/build_id.cpp -DNAMESPACE=${namespace} -DHEADER=${header}
            -P ${PROJECT_SOURCE_DIR}/cmake/build_id_script.cmake
    DEPENDS ${paths} ${PROJECT_SOURCE_DIR}/cmake/build_id_script.cmake
    COMMENT "${namespace} build id"
    VERBATIM)
  target_sources(${target} PRIVATE ${gen}/build_id.cpp)
endfunction()
