#pragma once
// Throwaway certificates for TLS tests, made with the openssl CLI at test
// time: a CA, a server certificate for localhost and 127.0.0.1, a client
// certificate (mTLS), all EC P-256. Each call makes a fresh, unrelated CA.

#include "kcached_process.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace kcache::testing {

struct TlsFiles {
  std::string ca;          // the CA's certificate: what clients trust
  std::string server_cert; // its server certificate (SAN DNS:localhost, IP:127.0.0.1)
  std::string server_key;
  std::string client_cert; // its client certificate (clientAuth)
  std::string client_key;
};

namespace detail {

inline void openssl(const std::vector<std::string>& args) {
  // Through sh for its 2>&1: openssl's progress lines are not test output.
  std::string line = "openssl";
  for (const std::string& a : args) {
    line += " '" + a + "'";
  }
  std::string out;
  if (run_command({"/bin/sh", "-c", line + " 2>&1"}, out) != 0) {
    throw std::runtime_error("openssl failed: " + line + "\n" + out);
  }
}

} // namespace detail

// Writes `name`-ca.pem, -server.pem/.key, -client.pem/.key into dir.
// `server_names`: the server certificate's subjectAltName.
inline TlsFiles make_tls_files(const std::filesystem::path& dir, const std::string& name,
                               const std::string& server_names = "DNS:localhost,IP:127.0.0.1") {
  const auto file = [&](const std::string& suffix) { return (dir / (name + suffix)).string(); };
  const std::string config = file("-openssl.cnf");
  std::ofstream(config) << "[req]\ndistinguished_name = dn\n[dn]\n"
                           "[ca_ext]\nbasicConstraints = critical,CA:TRUE\n"
                           "keyUsage = critical,keyCertSign,cRLSign\n"
                           "subjectKeyIdentifier = hash\n"
                           "[server_ext]\nbasicConstraints = CA:FALSE\n"
                           "keyUsage = critical,digitalSignature\n"
                           "extendedKeyUsage = serverAuth\n"
                           "subjectAltName = "
                        << server_names
                        << "\n[client_ext]\nbasicConstraints = CA:FALSE\n"
                           "keyUsage = critical,digitalSignature\n"
                           "extendedKeyUsage = clientAuth\n";
  const std::vector<std::string> ec_key = {"-newkey", "ec", "-pkeyopt",
                                           "ec_paramgen_curve:prime256v1", "-nodes"};
  TlsFiles f{file("-ca.pem"), file("-server.pem"), file("-server.key"), file("-client.pem"),
             file("-client.key")};
  std::vector<std::string> ca = {"req", "-x509"};
  ca.insert(ca.end(), ec_key.begin(), ec_key.end());
  ca.insert(ca.end(), {"-keyout", file("-ca.key"), "-out", f.ca, "-days", "2", "-subj",
                       "/CN=" + name + " test CA", "-config", config, "-extensions", "ca_ext"});
  detail::openssl(ca);
  int serial = 1;
  for (auto [leaf, cert, key] : {std::tuple{std::string("server"), f.server_cert, f.server_key},
                                 {std::string("client"), f.client_cert, f.client_key}}) {
    const std::string csr = file("-" + leaf + ".csr");
    std::vector<std::string> req = {"req", "-new"};
    req.insert(req.end(), ec_key.begin(), ec_key.end());
    req.insert(req.end(),
               {"-keyout", key, "-out", csr, "-subj",
                "/CN=" + (leaf == "server" ? std::string("localhost") : name + "-client"),
                "-config", config});
    detail::openssl(req);
    detail::openssl({"x509", "-req", "-in", csr, "-CA", f.ca, "-CAkey", file("-ca.key"),
                     "-set_serial", std::to_string(++serial), "-days", "2", "-out", cert,
                     "-extfile", config, "-extensions", leaf + "_ext"});
  }
  return f;
}

} // namespace kcache::testing
