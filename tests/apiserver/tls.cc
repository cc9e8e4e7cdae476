#include "tests/apiserver/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "common/util/error.h"

namespace torus::standin {
namespace {

struct FreeKey {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct FreeCert {
  void operator()(X509* c) const { X509_free(c); }
};
struct FreeBio {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Key = std::unique_ptr<EVP_PKEY, FreeKey>;
using Cert = std::unique_ptr<X509, FreeCert>;
using Bio = std::unique_ptr<BIO, FreeBio>;

[[noreturn]] void fail(const std::string& what) {
  char reason[256] = "unknown error";
  if (unsigned long code = ERR_get_error()) ERR_error_string_n(code, reason, sizeof(reason));
  ERR_clear_error();
  throw SystemError("kube-standin TLS: " + what + ": " + reason);
}

void check(int ok, const std::string& what) {
  if (ok != 1) fail(what);
}

Key p256_key() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) fail("EC P-256 key generation");
  return key;
}

void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) fail(std::string("extension ") + OBJ_nid2sn(nid) + "=" + value);
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  check(added, std::string("adding extension ") + OBJ_nid2sn(nid));
}

struct Subject {
  std::string common_name;
  std::string organization;
};

// An X.509 v3 certificate for `key`, signed by `issuer_key` (self-signed when `issuer` is null).
Cert make_cert(EVP_PKEY* key, const Subject& subject, X509* issuer, EVP_PKEY* issuer_key, long serial,
               const std::vector<std::pair<int, std::string>>& extensions) {
  Cert cert(X509_new());
  if (!cert) fail("X509_new");
  check(X509_set_version(cert.get(), 2), "version");
  check(ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial), "serial");
  // An hour of slack before now: clocks of a test machine's processes agree, but a skewed VM should not matter.
  if (!X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600)) fail("notBefore");
  if (!X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600)) fail("notAfter");
  check(X509_set_pubkey(cert.get(), key), "public key");
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (!subject.organization.empty()) {
    check(X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                     reinterpret_cast<const unsigned char*>(subject.organization.c_str()), -1, -1, 0),
          "subject O");
  }
  check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(subject.common_name.c_str()), -1, -1, 0),
        "subject CN");
  X509* signer = issuer != nullptr ? issuer : cert.get();
  check(X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)), "issuer");
  for (const auto& [nid, value] : extensions) add_extension(cert.get(), signer, nid, value);
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) <= 0) fail("signing " + subject.common_name);
  return cert;
}

// PEM text of a certificate or a private key (PEM_write_bio_X509 / PEM_write_bio_PrivateKey).
template <class Object, class Write>
std::string pem_of(Object* object, Write write, const char* what) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get(), object) != 1) fail(std::string("PEM encoding ") + what);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}
std::string pem_of(X509* cert) { return pem_of(cert, PEM_write_bio_X509, "a certificate"); }
std::string pem_of(EVP_PKEY* key) {
  return pem_of(
      key, [](BIO* b, EVP_PKEY* k) { return PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr); },
      "a key");
}

std::string alt_names(const TlsSubjects& s) {
  std::string names;
  for (const auto& ip : s.server_ips) names += (names.empty() ? "" : ",") + std::string("IP:") + ip;
  for (const auto& dns : s.server_dns) names += (names.empty() ? "" : ",") + std::string("DNS:") + dns;
  return names;
}

}  // namespace

TlsMaterial make_tls_material(const TlsSubjects& subjects) {
  Key ca_key = p256_key();
  Cert ca = make_cert(ca_key.get(), {"kube-standin-ca", ""}, nullptr, ca_key.get(), 1,
                      {{NID_basic_constraints, "critical,CA:TRUE"},
                       {NID_key_usage, "critical,keyCertSign,cRLSign"},
                       {NID_subject_key_identifier, "hash"}});
  Key server_key = p256_key();
  Cert server = make_cert(server_key.get(), {"kube-apiserver", ""}, ca.get(), ca_key.get(), 2,
                          {{NID_basic_constraints, "critical,CA:FALSE"},
                           {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                           {NID_ext_key_usage, "serverAuth"},
                           {NID_authority_key_identifier, "keyid:always"},
                           {NID_subject_alt_name, alt_names(subjects)}});
  Key client_key = p256_key();
  Cert client = make_cert(client_key.get(), {subjects.client_user, "system:masters"}, ca.get(), ca_key.get(), 3,
                          {{NID_basic_constraints, "critical,CA:FALSE"},
                           {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                           {NID_ext_key_usage, "clientAuth"},
                           {NID_authority_key_identifier, "keyid:always"}});
  return {pem_of(ca.get()), pem_of(server.get()), pem_of(server_key.get()), pem_of(client.get()),
          pem_of(client_key.get())};
}

}  // namespace torus::standin
