#pragma once
// The server's OpenSSL context, built from [tls] (config.h): certificate chain
// and key, TLS 1.2 or later only, forward-secret AEAD ciphers, and with a
// client CA, client certificates required (mTLS). SIGHUP builds a new one
// from the same files; connections keep the context they were accepted with.

#include <kcache/service/config.h>

#include <tl/expected.hpp>

#include <memory>
#include <string>

namespace boost::asio::ssl {
class context;
} // namespace boost::asio::ssl

namespace kcache::service {

using TlsContext = boost::asio::ssl::context;

// An error names the file that could not be used and OpenSSL's reason.
tl::expected<std::shared_ptr<TlsContext>, std::string>
make_server_tls_context(const TlsConfig& tls);

} // namespace kcache::service
