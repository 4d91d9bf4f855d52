# Warning and sanitizer flags, applied through interface targets so that only our own code gets them.
add_library(mcr_warnings INTERFACE)
target_compile_options(mcr_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                              -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual
                                              $<$<BOOL:${MCR_WERROR}>:-Werror>)
if(MCR_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
