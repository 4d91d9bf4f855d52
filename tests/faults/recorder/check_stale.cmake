# A flight directory kept from the last job: a process removes its own old records (its
# flight-rank<N>.json and later dumps) when it places its records, and no other rank's. Before,
# they stayed, and `mcr doctor` merged them with the new job's. -DMCR -DDIR -DFIXTURE
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
foreach(name flight-rank0.json flight-rank0.later-3.json flight-rank1.json flight-rank10.json)
  file(COPY_FILE ${FIXTURE} ${DIR}/${name})
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E env MCR_FLIGHT_DIR=${DIR} ${MCR} info
                OUTPUT_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mcr info failed (${rc})")
endif()
foreach(name flight-rank0.json flight-rank0.later-3.json)
  if(EXISTS ${DIR}/${name})
    message(FATAL_ERROR "${name}, the last job's record of this rank, is still in ${DIR}")
  endif()
endforeach()
foreach(name flight-rank1.json flight-rank10.json)
  if(NOT EXISTS ${DIR}/${name})
    message(FATAL_ERROR "${name}, another rank's record, was removed")
  endif()
endforeach()
