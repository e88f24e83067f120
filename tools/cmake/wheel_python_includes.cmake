# Injected with -DCMAKE_PROJECT_INCLUDE=... by tools/build_interfaces.sh when building
# interface packages against the ROS 2 wheels from PyPI.
#
# Why: the wheels' exported `<pkg>__rosidl_generator_py` CMake targets carry the include
# directories of the machine the wheels were built on (/opt/python/cp311-cp311/include/python3.11
# and its numpy). CMake's generate step rejects imported targets whose include directories do not
# exist, although nothing needs them beyond Python's and NumPy's headers, which this machine has.
#
# What: at the end of configuring (deferred, after every find_package), each missing include
# directory of an imported target is replaced by this interpreter's Python or NumPy include
# directory. Any other missing directory is a real error and stops the build, naming it.
find_package(Python3 REQUIRED COMPONENTS Interpreter Development NumPy)

function(_mjmr_fix_wheel_python_includes)
  get_directory_property(_targets DIRECTORY "${CMAKE_SOURCE_DIR}" IMPORTED_TARGETS)
  foreach(_target IN LISTS _targets)
    get_target_property(_dirs ${_target} INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT _dirs)
      continue()
    endif()
    set(_fixed "")
    set(_changed FALSE)
    foreach(_dir IN LISTS _dirs)
      if(EXISTS "${_dir}" OR _dir MATCHES "^\\$<")
        list(APPEND _fixed "${_dir}")
      elseif(_dir MATCHES "numpy")
        list(APPEND _fixed ${Python3_NumPy_INCLUDE_DIRS})
        set(_changed TRUE)
      elseif(_dir MATCHES "/include/python[0-9.]+$")
        list(APPEND _fixed ${Python3_INCLUDE_DIRS})
        set(_changed TRUE)
      else()
        message(FATAL_ERROR
          "${_target} names the include directory '${_dir}', which does not exist and is not "
          "a Python or NumPy include directory that this build can substitute.")
      endif()
    endforeach()
    if(_changed)
      list(REMOVE_DUPLICATES _fixed)
      set_target_properties(${_target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_fixed}")
      message(STATUS "wheel include fix: ${_target} -> ${_fixed}")
    endif()
  endforeach()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _mjmr_fix_wheel_python_includes)
