#!/bin/bash
# The cost of the barrier that ends every Gloo rendezvous (commit e7a380d), measured as the time of
# test GlooRanks.AWorldDroppedAtOnceFailsNoPeersRendezvous: 25 worlds of 2 or 4 ranks (threads of one
# process, own TCP store server each time), each created and dropped at once.
# old2: gloo_test_gloo_backend built at e7a380d with src/comm/backends/gloo/gloo_backend.cpp as at
#       4922784 (no barrier); new2: built at e7a380d. Same build tree, same flags (preset ci).
# Alternated, three rounds of --gtest_repeat=4; results.txt holds "<ranks>r:<ms for 25 worlds>".
# 2 cores, load 0.6-1.7, nothing else running.
for k in 1 2 3; do
  for b in old2 new2; do
    echo "$b $(./$b --gtest_filter='*AWorldDropped*/4ranks:*AWorldDropped*/2ranks' --gtest_repeat=4 2>&1 |
      grep -E '^\[       OK \]' | sed -E 's/.*\/([0-9])ranks.*\(([0-9]+) ms\)/\1r:\2/' | tr '\n' ' ')"
  done
done
