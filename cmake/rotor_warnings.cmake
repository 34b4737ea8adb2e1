# -Wall -Wextra on C++ sources of a target (CUDA sources get their own flags).
function(rotor_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
endfunction()
