cmake_minimum_required(VERSION 3.25)
# Tuning entries per call form on 2 ranks: a table whose blocking all_reduce entry names gloo and
# whose asynchronous one names mpi. explain answers per form and says which measurement decided;
# a replay of one blocking and one asynchronous all_reduce runs each on its form's backend (the
# communication log records the backend of every op); `mcr tune --form both --in-flight 4,2` writes
# entries of both forms and samples at both numbers in flight, validates, and plots each form and
# number as series of its own.
# -DMPIEXEC -DMCR -DOUT
include(${CMAKE_CURRENT_LIST_DIR}/../../../cmake/McrMpiexec.cmake)
set(MPI ${MPIEXEC} ${MCR_MPIEXEC_FLAGS} -np 2)
file(MAKE_DIRECTORY ${OUT})
file(WRITE ${OUT}/forms.json [=[
{"format": "mcr-tuning", "version": 1, "entries": [
 {"op": "all_reduce", "form": "sync", "ranges": [{"backend": "gloo"}]},
 {"op": "all_reduce", "form": "async", "ranges": [{"backend": "mpi"}]}]}
]=])

function(explain flag want_backend want_reason)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_TUNING=${OUT}/forms.json
                          ${MPI} ${MCR} explain all_reduce --bytes 64 --json ${flag}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mcr explain ${flag} failed (${rc}):\n${out}\n${err}")
  endif()
  string(JSON backend GET "${out}" backend)
  string(JSON reason GET "${out}" candidates 0 reason)
  string(JSON form GET "${out}" form)
  if(NOT backend STREQUAL want_backend OR NOT reason MATCHES "${want_reason}")
    message(FATAL_ERROR "explain ${flag}: backend ${backend}, reason '${reason}'; expected "
                        "${want_backend} and '${want_reason}'")
  endif()
  message(STATUS "explain ${flag}: ${form} -> ${backend} (${reason})")
endfunction()
explain("" gloo "measured with sync calls")
explain("--async" mpi "measured with async calls")

# Dispatch, not only explain: the log's backend (the event's category) per form.
file(WRITE ${OUT}/trace.json [=[
{"format": "mcr-trace", "version": 1, "ops": [
 {"op": "all_reduce", "count": 16},
 {"op": "all_reduce", "count": 16, "async": true, "wait": true}
]}
]=])
file(REMOVE ${OUT}/log.json)  # a log of an earlier run must not pass for this one
execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_TUNING=${OUT}/forms.json MCR_LOG=trace
                        MCR_TRACE_FILE=${OUT}/log.json
                        ${MPI} ${MCR} replay ${OUT}/trace.json --backend auto --reps 1 --warmup 0
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS ${OUT}/log.json)
  message(FATAL_ERROR "the replay under the per-form table failed (${rc}):\n${out}\n${err}")
endif()
file(READ ${OUT}/log.json log)
string(JSON nev LENGTH "${log}" traceEvents)
math(EXPR last "${nev} - 1")
set(seen_sync 0)
set(seen_async 0)
foreach(i RANGE ${last})
  string(JSON ph GET "${log}" traceEvents ${i} ph)
  string(JSON name GET "${log}" traceEvents ${i} name)
  if(NOT ph STREQUAL "X" OR NOT name STREQUAL "all_reduce")
    continue()
  endif()
  string(JSON backend GET "${log}" traceEvents ${i} cat)
  string(JSON async GET "${log}" traceEvents ${i} args async)
  # The replay's own timing reductions are blocking all_reduces too; they run on the sync entry.
  if(async)
    set(want mpi)
    math(EXPR seen_async "${seen_async} + 1")
  else()
    set(want gloo)
    math(EXPR seen_sync "${seen_sync} + 1")
  endif()
  if(NOT backend STREQUAL want)
    message(FATAL_ERROR "an all_reduce with async=${async} ran on ${backend}, expected ${want}")
  endif()
endforeach()
if(seen_sync EQUAL 0 OR seen_async EQUAL 0)
  message(FATAL_ERROR "the log holds ${seen_sync} blocking and ${seen_async} asynchronous all_reduces; expected both")
endif()
message(STATUS "log: ${seen_sync} blocking all_reduces on gloo, ${seen_async} asynchronous on mpi")

# tune --form both: entries and samples of both forms, a valid table, the form in the provenance.
execute_process(COMMAND ${MPI} ${MCR} tune --op all_reduce --sizes 4K,64K --form both --in-flight 4,2
                        --reps 1 --budget-ms 1 -q -o ${OUT}/tuned.json --plot
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR err MATCHES "wrong values")
  message(FATAL_ERROR "mcr tune --form both failed (${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${MCR} tune --validate ${OUT}/tuned.json RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the table tune --form both wrote is invalid:\n${out}")
endif()
file(READ ${OUT}/tuned.json doc)
string(JSON provenance_form GET "${doc}" provenance form)
if(NOT provenance_form MATCHES "^sync and async \\(async: i\\* calls, 2 and 4 in flight at once, each size timed at each")
  message(FATAL_ERROR "provenance form is '${provenance_form}'")
endif()
foreach(list entries samples)
  set(sync 0)
  set(async 0)
  string(JSON n LENGTH "${doc}" ${list})
  math(EXPR last "${n} - 1")
  set(depths "")
  foreach(i RANGE ${last})
    string(JSON f GET "${doc}" ${list} ${i} form)
    math(EXPR ${f} "${${f}} + 1")
    if(list STREQUAL "samples" AND f STREQUAL "async")
      string(JSON d GET "${doc}" ${list} ${i} in_flight)
      list(APPEND depths ${d})
    endif()
  endforeach()
  # One entry per form; an asynchronous sample per backend, size and number in flight (2 and 4).
  if(list STREQUAL "entries")
    math(EXPR want "${sync}")
  else()
    math(EXPR want "2 * ${sync}")
    list(REMOVE_DUPLICATES depths)
    list(SORT depths)
    if(NOT depths STREQUAL "2;4")
      message(FATAL_ERROR "the asynchronous samples' numbers in flight are '${depths}', not 2 and 4")
    endif()
  endif()
  if(sync EQUAL 0 OR NOT async EQUAL want)
    message(FATAL_ERROR "tune --form both wrote ${sync} sync and ${async} async ${list}")
  endif()
endforeach()

# The plot's data keeps the forms and numbers in flight apart: a series per backend, form and
# number (written whether or not gnuplot is installed).
file(READ ${OUT}/tuned.all_reduce.dat dat)
foreach(series "# mpi (sync)" "# mpi (async, 2 in flight)" "# mpi (async, 4 in flight)"
               "# gloo (sync)" "# gloo (async, 2 in flight)" "# gloo (async, 4 in flight)")
  string(FIND "${dat}" "${series}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "tuned.all_reduce.dat has no series '${series}':\n${dat}")
  endif()
endforeach()
# The tuned choice is marked at each size on the chosen backend's series of each form and, for
# the asynchronous form, of each number in flight: 2 sizes x (sync + 2 numbers) = 6 points.
string(FIND "${dat}" "# tuned" at)
string(SUBSTRING "${dat}" ${at} -1 tuned_block)
string(REGEX MATCHALL "\n[0-9]+ [0-9.e+-]+" tuned_points "${tuned_block}")
list(LENGTH tuned_points n)
if(NOT n EQUAL 6)
  message(FATAL_ERROR "the plot marks ${n} tuned choices, not 6:\n${tuned_block}")
endif()

# Bad values are refused before any rank waits, naming the flag.
foreach(args "--form;sometimes" "--in-flight;0" "--async;--form;sync")
  execute_process(COMMAND ${MPI} ${MCR} tune --op all_reduce --sizes 4K ${args} -o ${OUT}/bad.json
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  list(GET args 0 flag)
  if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "${flag}")
    message(FATAL_ERROR "tune ${args} was accepted or the error does not name ${flag} (${rc}):\n${out}\n${err}")
  endif()
endforeach()
