cmake_minimum_required(VERSION 3.25)
# `mcr shape sweep` hands its plot to gnuplot: a model's name and an output prefix holding quotes
# must reach gnuplot as text, not as commands. A stand-in gnuplot on PATH records its arguments;
# the script's title must be one gnuplot string with the name's quotes doubled, and the script's
# path one argument (a shell command line broke on the prefix's quote and ran nothing).
set(work "${WORK}")
file(REMOVE_RECURSE "${work}")
file(MAKE_DIRECTORY "${work}/bin")
file(WRITE "${work}/bin/gnuplot" "#!/bin/sh\nprintf '%s\\n' \"$#\" \"$1\" > '${work}/args'\n")
file(CHMOD "${work}/bin/gnuplot" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
set(name [=[x'; system "touch @WORK@/ran"; set title 'y]=])
string(CONFIGURE "${name}" name @ONLY)
string(REPLACE "\"" "\\\"" json_name "${name}")
file(WRITE "${work}/model.json"
     "{\"name\": \"${json_name}\", \"h\": 768, \"a\": 12, \"L\": 2, \"v\": 50257, \"s\": 1024}\n")
set(prefix "${work}/o'ut")
execute_process(COMMAND ${CMAKE_COMMAND} -E env "PATH=${work}/bin:$ENV{PATH}" ${MCR} shape sweep
                        --model "${work}/model.json" --vary h --from 768 --to 832 --out "${prefix}"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "Plot written to")
  message(FATAL_ERROR "mcr shape sweep (${rc}): ${out}${err}")
endif()
file(STRINGS "${work}/args" args)
if(NOT args STREQUAL "1;${prefix}.gp")
  message(FATAL_ERROR "gnuplot got the arguments [${args}], expected the one argument [${prefix}.gp]")
endif()
file(STRINGS "${prefix}.gp" script)
string(REPLACE "'" "''" doubled "${name}")
set(title "set title 'mcr shape sweep: ${doubled} on a100-80gb'")
list(FIND script "${title}" at)
if(at LESS 0)
  message(FATAL_ERROR "no line [${title}] in the script:\n${script}")
endif()
string(REPLACE "'" "''" doubled_prefix "${prefix}")
list(FIND script "set output '${doubled_prefix}.png'" at)
if(at LESS 0)
  message(FATAL_ERROR "the script does not quote the output's path:\n${script}")
endif()
# An output prefix starting with '|' is a file here, not a pipe to a shell command: gnuplot reads
# "set output '|...'" as a pipe even when quoted, so the script names it "./|...".
execute_process(COMMAND ${CMAKE_COMMAND} -E env "PATH=${work}/bin:$ENV{PATH}" ${MCR} shape sweep
                        --model "${work}/model.json" --vary h --from 768 --to 832 --out "|pipe"
                WORKING_DIRECTORY "${work}"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mcr shape sweep --out '|pipe' (${rc}): ${out}${err}")
endif()
file(STRINGS "${work}/|pipe.gp" script)
list(FIND script "set output './|pipe.png'" at)
if(at LESS 0)
  message(FATAL_ERROR "an output name starting with '|' is not made a path:\n${script}")
endif()
file(REMOVE_RECURSE "${work}")
