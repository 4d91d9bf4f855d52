// A key-value store in a directory shared by the ranks of one test job: an InitOptions::store that
// is not mcr's own, so that the multi-rank tests can form their world through a given store.
#pragma once

#include <string>
#include <vector>

#include "mcr/comm/store.hpp"

namespace mcr::test {

/// One file per key (the key hex-encoded), written to a temporary name and renamed, so that a
/// reader sees a whole value or none; add() holds an flock on the key's lock file. Safe from
/// several threads and processes. get() polls every millisecond.
class FileStore final : public KeyValueStore {
 public:
  explicit FileStore(std::string dir);  ///< creates `dir` (and its parents) if needed

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  std::string description() const override { return "file store"; }

  /// Every key stored so far.
  std::vector<std::string> keys() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string path_of(const std::string& key) const;
  void write(const std::string& key, const Bytes& value);

  std::string dir_;
};

/// The directory of this job's store under `base`: named after what every rank of one launch
/// shares and no other launch does (PMIX_NAMESPACE under mpirun, MASTER_PORT torchrun-style).
std::string job_store_dir(const std::string& base);

}  // namespace mcr::test
