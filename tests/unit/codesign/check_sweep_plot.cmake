cmake_minimum_required(VERSION 3.25)
# mcr shape sweep's plot: a bad --plot-format is refused before the CSV is written (it overwrote
# the CSV and printed the table first), and a gnuplot that fails makes the run fail (it printed a
# line and exited 0).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/bin)
set(sweep ${MCR} shape sweep --preset gpt3-2.7b --device a100-80gb --vary a --from 8 --to 16 --step 8)

execute_process(COMMAND ${sweep} --plot-format jpg --out ${WORK}/bad
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "--plot-format 'jpg': must be png or svg")
  message(FATAL_ERROR "--plot-format jpg: rc ${rc}\n${out}${err}")
endif()
if(EXISTS ${WORK}/bad.csv)
  message(FATAL_ERROR "--plot-format jpg wrote ${WORK}/bad.csv before it was refused")
endif()

# A gnuplot that fails, first on PATH.
file(WRITE ${WORK}/bin/gnuplot "#!/bin/sh\necho 'gnuplot: failing on purpose' >&2\nexit 1\n")
file(CHMOD ${WORK}/bin/gnuplot PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
execute_process(COMMAND ${CMAKE_COMMAND} -E env "PATH=${WORK}/bin:$ENV{PATH}" ${sweep}
                        --out ${WORK}/failing
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "gnuplot failed on .*failing.gp")
  message(FATAL_ERROR "a failing gnuplot: rc ${rc}\n${out}${err}")
endif()
if(NOT EXISTS ${WORK}/failing.csv)
  message(FATAL_ERROR "the CSV was not written before the plot")
endif()
