// The decision of an agreed group exchange (core/store_wait.hpp) as it travels through the store:
// every value comes back in order, and anything that is not exactly such a decision is refused
// instead of being taken for the members' values.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/store_wait.hpp"
#include "mcr/errors.hpp"

namespace {

using mcr::detail::Bytes;
using mcr::detail::decode_agreed_go;
using mcr::detail::encode_agreed_go;

Bytes bytes_of(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

TEST(AgreedExchange, DecisionCarriesEveryValueInOrder) {
  // Empty and binary values too: a member's value may be a zero-length key or raw integers.
  const std::vector<Bytes> values{bytes_of("color=3"), Bytes{}, Bytes{0, 255, 0, 7},
                                  Bytes(1000, 42)};
  const Bytes go = encode_agreed_go(values);
  ASSERT_FALSE(go.empty());
  EXPECT_EQ(go.front(), 'G');
  EXPECT_EQ(decode_agreed_go(go, values.size(), "t"), values);
}

TEST(AgreedExchange, NoMembersNoValues) {
  EXPECT_TRUE(decode_agreed_go(encode_agreed_go({}), 0, "t").empty());
  EXPECT_THROW(decode_agreed_go(Bytes{'S'}, 0, "t"), mcr::MismatchError);
}

TEST(AgreedExchange, MalformedDecisionsAreRefused) {
  const std::vector<Bytes> values{bytes_of("a"), bytes_of("bc")};
  const Bytes go = encode_agreed_go(values);
  // Another member count than the caller's.
  EXPECT_THROW(decode_agreed_go(go, 3, "t"), mcr::MismatchError);
  EXPECT_THROW(decode_agreed_go(go, 1, "t"), mcr::MismatchError);
  // Cut anywhere.
  for (std::size_t n = 0; n < go.size(); ++n) {
    const Bytes cut(go.begin(), go.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(decode_agreed_go(cut, values.size(), "t"), mcr::MismatchError) << "cut at " << n;
  }
  // A byte left over.
  Bytes longer = go;
  longer.push_back(0);
  EXPECT_THROW(decode_agreed_go(longer, values.size(), "t"), mcr::MismatchError);
  // A decision to stop is not one to go on.
  Bytes stop = go;
  stop.front() = 'S';
  EXPECT_THROW(decode_agreed_go(stop, values.size(), "t"), mcr::MismatchError);
}

TEST(AgreedExchange, RefusalNamesTheExchange) {
  try {
    decode_agreed_go(Bytes{'G'}, 2, "mcr/member_group/abc/0");
    FAIL() << "a truncated decision was accepted";
  } catch (const mcr::MismatchError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("mcr/member_group/abc/0"), std::string::npos) << what;
    EXPECT_NE(what.find("1 bytes for 2 members"), std::string::npos) << what;
  }
}

}  // namespace
