# -Wall -Wextra on C++ sources of a target (CUDA sources get their own flags).
# -Wno-restrict: GCC 12 reports false positives on std::string concatenation
# (GCC bug 105329).
function(rotor_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-restrict>)
endfunction()
