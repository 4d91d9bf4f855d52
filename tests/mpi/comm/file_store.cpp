#include "file_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <fmt/format.h>

#include "mcr/errors.hpp"

namespace mcr::test {
namespace fs = std::filesystem;
namespace {

std::string hex(const std::string& s) {
  std::string out;
  for (unsigned char c : s)
    out += fmt::format("{:02x}", c);
  return out;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2)
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

KeyValueStore::Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return KeyValueStore::Bytes(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  fs::create_directories(dir_);
}

std::string FileStore::path_of(const std::string& key) const {
  return fmt::format("{}/k{}", dir_, hex(key));
}

void FileStore::write(const std::string& key, const Bytes& value) {
  static std::atomic<unsigned> counter{0};
  const std::string tmp = fmt::format("{}/.tmp.{}.{}", dir_, ::getpid(), counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(value.data()),
              static_cast<std::streamsize>(value.size()));
    if (!out) throw BackendError(fmt::format("file store: cannot write {}", tmp));
  }
  fs::rename(tmp, path_of(key));
}

void FileStore::set(const std::string& key, const Bytes& value) {
  write(key, value);
}

KeyValueStore::Bytes FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string path = path_of(key);
  while (!fs::exists(path)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      throw TimeoutError(
          fmt::format("file store: key '{}' was not set within {} ms", key, timeout.count()),
          "store_get", 0, "file_store");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return read_file(path);
}

std::int64_t FileStore::add(const std::string& key, std::int64_t delta) {
  const std::string lock_path = fmt::format("{}/.lock.{}", dir_, hex(key));
  const int fd = ::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw BackendError(fmt::format("file store: cannot open {}", lock_path));
  ::flock(fd, LOCK_EX);
  std::int64_t value = delta;
  try {
    const std::string path = path_of(key);
    if (fs::exists(path)) {
      const Bytes old = read_file(path);
      value += std::stoll(std::string(old.begin(), old.end()));
    }
    const std::string text = std::to_string(value);
    write(key, Bytes(text.begin(), text.end()));
  } catch (...) {
    ::close(fd);  // releases the lock
    throw;
  }
  ::close(fd);
  return value;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  for (const auto& k : keys)
    if (!fs::exists(path_of(k))) return false;
  return true;
}

std::vector<std::string> FileStore::keys() const {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("k")) out.push_back(unhex(name.substr(1)));
  }
  return out;
}

std::string job_store_dir(const std::string& base) {
  std::string job;
  if (const char* ns = std::getenv("PMIX_NAMESPACE"))
    job = ns;
  else if (const char* port = std::getenv("MASTER_PORT"))
    job = fmt::format("port{}", port);
  else
    job = "single";
  for (char& c : job)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return fmt::format("{}/{}", base, job);
}

}  // namespace mcr::test
