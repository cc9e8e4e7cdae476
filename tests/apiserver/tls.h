#pragma once
// TLS for the stand-in, as a real apiserver serves it: a throwaway certificate authority, a server certificate for
// the stand-in's address, and a client certificate the CA signed (the apiserver's x509 authenticator maps its
// CN to the user and its O to the groups). Generated in memory with OpenSSL; PEM text throughout.
#include <string>
#include <vector>

namespace torus::standin {

struct TlsMaterial {
  std::string ca_cert_pem;
  std::string server_cert_pem;
  std::string server_key_pem;
  std::string client_cert_pem;  // CN=client_user, O=system:masters
  std::string client_key_pem;
};

struct TlsSubjects {
  std::vector<std::string> server_ips{"127.0.0.1"};
  std::vector<std::string> server_dns{"localhost"};
  std::string client_user = "standin-admin";
};

// A fresh CA (P-256, one day) and the two certificates it signs. Throws SystemError with OpenSSL's reason.
TlsMaterial make_tls_material(const TlsSubjects& subjects = {});

}  // namespace torus::standin
