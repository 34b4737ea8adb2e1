# Runs `MPIEXEC MPIEXEC_FLAGS -np NP EXE --fault=MODE` with
# ROTOR_DIST_TIMEOUT=TIMEOUT and checks that the job ends (never hangs) with a
# non-zero status within LIMIT seconds and that stderr matches EXPECT (a
# regular expression). NPFLAG replaces -np (`rotor launch` takes -n).
#   cmake -DMPIEXEC=... -DMPIEXEC_FLAGS="a;b" -DNP=3 -DEXE=... -DMODE=hang
#         -DTIMEOUT=5 -DLIMIT=40 -DEXPECT=regex [-DNPFLAG=-n] -P run_fault.cmake
if(NOT DEFINED NPFLAG)
  set(NPFLAG -np)
endif()
set(ENV{ROTOR_DIST_TIMEOUT} "${TIMEOUT}")
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
string(TIMESTAMP t0 "%s")
execute_process(
  COMMAND ${MPIEXEC} ${MPIEXEC_FLAGS} ${NPFLAG} ${NP} ${EXE} --fault=${MODE}
  TIMEOUT ${LIMIT}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TIMESTAMP t1 "%s")
math(EXPR elapsed "${t1} - ${t0}")
message("exit status: ${rc}; ${elapsed} s\n--- stdout\n${out}\n--- stderr\n${err}")
if(rc MATCHES "timeout" OR elapsed GREATER_EQUAL LIMIT)
  message(FATAL_ERROR "the job hung: still running after ${LIMIT} s")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited 0 although rank 1 ${MODE}ed")
endif()
if(err MATCHES "UNEXPECTED")
  message(FATAL_ERROR "a collective returned although rank 1 ${MODE}ed")
endif()
if(NOT "${err}${out}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "no message matching '${EXPECT}'")
endif()
message("fault test passed: ${MODE} ended the job in ${elapsed} s")
