//! What the web config (`config::web`) turns into at start: a rustls acceptor
//! (certificate, key, optional client CA and verification, TLS versions) and a
//! basic-auth check against bcrypt hashes.
//!
//! bcrypt is slow by design (tens of ms at cost 10), so a successful check is
//! remembered (user and password, at most [`AUTH_CACHE`] pairs) as
//! exporter-toolkit does; Prometheus scrapes with the same credentials every
//! time. An unknown user still costs one bcrypt run, so timing does not tell
//! which users exist.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use foldhash::{HashSet, HashSetExt};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::config::web::{ClientAuth, TlsServerConfig, TlsVersion};

const AUTH_CACHE: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("cannot read {what} {path}: {source}")]
    Pem {
        what: &'static str,
        path: String,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{what} {path} holds no certificate")]
    Empty { what: &'static str, path: String },
    #[error("TLS setup: {0}")]
    Tls(#[from] rustls::Error),
    #[error("client CA {path}: {source}")]
    ClientCa {
        path: String,
        source: rustls::server::VerifierBuilderError,
    },
}

fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, WebError> {
    let pem = |source| WebError::Pem {
        what,
        path: path.display().to_string(),
        source,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem)?;
    if certs.is_empty() {
        return Err(WebError::Empty {
            what,
            path: path.display().to_string(),
        });
    }
    Ok(certs)
}

pub fn acceptor(tls: &TlsServerConfig) -> Result<TlsAcceptor, WebError> {
    let certs = certificates("certificate", &tls.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&tls.key_file).map_err(|source| WebError::Pem {
        what: "key",
        path: tls.key_file.display().to_string(),
        source,
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match (tls.min_version, tls.max_version) {
        (TlsVersion::Tls13, _) => &[&rustls::version::TLS13],
        (TlsVersion::Tls12, TlsVersion::Tls12) => &[&rustls::version::TLS12],
        (TlsVersion::Tls12, TlsVersion::Tls13) => {
            &[&rustls::version::TLS12, &rustls::version::TLS13]
        }
    };
    let builder =
        ServerConfig::builder_with_provider(provider.clone()).with_protocol_versions(versions)?;
    let builder = match (&tls.client_ca_file, tls.client_auth) {
        (Some(ca), ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates("client CA", ca)? {
                roots.add(cert)?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if tls.client_auth == ClientAuth::VerifyIfGiven {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier.build().map_err(|source| WebError::ClientCa {
                path: ca.display().to_string(),
                source,
            })?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Basic auth against bcrypt hashes.
#[derive(Debug)]
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    /// A hash to verify against for unknown users (same cost as the real ones).
    decoy: String,
    verified: Mutex<HashSet<(String, String)>>,
}

impl BasicAuth {
    pub fn new(users: BTreeMap<String, String>) -> Option<BasicAuth> {
        let cost = users
            .values()
            .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
            .map(|p| p.get_cost())
            .max()?;
        let decoy = bcrypt::hash("saltsight-decoy", cost).ok()?;
        Some(BasicAuth {
            users,
            decoy,
            verified: Mutex::new(HashSet::new()),
        })
    }

    /// Whether an `Authorization` header value admits the request.
    pub fn admits(&self, header: Option<&str>) -> bool {
        let Some((user, password)) = header.and_then(parse_basic) else {
            return false;
        };
        let key = (user, password);
        if self.verified.lock().is_ok_and(|cache| cache.contains(&key)) {
            return true;
        }
        let (user, password) = &key;
        let ok = match self.users.get(user) {
            Some(hash) => bcrypt::verify(password, hash).unwrap_or(false),
            None => {
                let _ = bcrypt::verify(password, &self.decoy);
                false
            }
        };
        if ok {
            if let Ok(mut cache) = self.verified.lock() {
                if cache.len() >= AUTH_CACHE {
                    cache.clear();
                }
                cache.insert(key);
            }
        }
        ok
    }
}

fn parse_basic(header: &str) -> Option<(String, String)> {
    let (scheme, encoded) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_admits_the_right_password_only() {
        let users = BTreeMap::from([("prom".to_owned(), bcrypt::hash("s3cret", 4).unwrap())]);
        let auth = BasicAuth::new(users).unwrap();
        let header = |creds: &str| format!("Basic {}", STANDARD.encode(creds.as_bytes()));
        assert!(auth.admits(Some(&header("prom:s3cret"))));
        // Cached now, and still right.
        assert!(auth.admits(Some(&header("prom:s3cret"))));
        assert!(!auth.admits(Some(&header("prom:wrong"))));
        assert!(!auth.admits(Some(&header("nobody:s3cret"))));
        assert!(!auth.admits(Some("Bearer abc")));
        assert!(!auth.admits(Some("Basic !!!")));
        // Strict as before: padding required ("prom:s3cret" is 11 bytes).
        let unpadded = header("prom:s3cret").trim_end_matches('=').to_owned();
        assert!(!auth.admits(Some(&unpadded)));
        assert!(!auth.admits(None));
        assert!(BasicAuth::new(BTreeMap::new()).is_none());
    }
}
