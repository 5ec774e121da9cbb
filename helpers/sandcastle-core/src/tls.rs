//! The certificate authorities sandcastle's HTTPS trusts (the model proxy's upstream, the forge
//! client): the operator's `SSL_CERT_FILE` alone when set, else the system's (`SSL_CERT_DIR`, or the
//! distribution's bundle where OpenSSL looks for it), else Mozilla's roots compiled in. A
//! certificate none of them signed is an error: never a fallback to plain HTTP or to no
//! verification.
use anyhow::{Result, bail};
use std::sync::Arc;
use ureq::tls::{Certificate, RootCerts, TlsConfig};

/// The roots one client trusts.
#[derive(Clone)]
pub struct Roots {
    certs: RootCerts,
    /// Where they came from, for an error that names the fix.
    source: Source,
}

#[derive(Clone, PartialEq)]
enum Source {
    /// `SSL_CERT_FILE`, the path.
    CertFile(String),
    System,
    Mozilla,
}

impl Roots {
    /// From `get`'s `SSL_CERT_FILE` (`.sandcastle/.env`, else the environment): a file that cannot be
    /// read or holds no PEM certificate is an error naming it.
    pub fn load(get: impl Fn(&str) -> Option<String>) -> Result<Roots> {
        if let Some(path) = get("SSL_CERT_FILE") {
            let certs = read_pem(&path)?;
            return Ok(Roots {
                certs: RootCerts::Specific(Arc::new(certs)),
                source: Source::CertFile(path),
            });
        }
        // Errors here are unreadable entries of the system's store; what was read is used.
        let found = rustls_native_certs::load_native_certs();
        if found.certs.is_empty() {
            return Ok(Roots {
                certs: RootCerts::WebPki,
                source: Source::Mozilla,
            });
        }
        let certs = found
            .certs
            .iter()
            .map(|der| Certificate::from_der(der).to_owned())
            .collect();
        Ok(Roots {
            certs: RootCerts::Specific(Arc::new(certs)),
            source: Source::System,
        })
    }

    /// The TLS settings of a client trusting these roots.
    pub fn config(&self) -> TlsConfig {
        TlsConfig::builder().root_certs(self.certs.clone()).build()
    }

    /// Which roots these are, for `doctor`.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::CertFile(path) => format!("SSL_CERT_FILE ({path})"),
            Source::System => "the system's CAs".into(),
            Source::Mozilla => "Mozilla's CAs (the system has none)".into(),
        }
    }

    /// What to do about a certificate these roots do not trust.
    pub fn fix(&self) -> String {
        match &self.source {
            Source::CertFile(path) => format!(
                "SSL_CERT_FILE ({path}) holds no authority that signed it: add that CA's PEM to it"
            ),
            Source::System | Source::Mozilla => {
                "no system CA signed it: set SSL_CERT_FILE to a PEM file with the CA that did"
                    .into()
            }
        }
    }
}

/// The certificates of the PEM file at `path`.
fn read_pem(path: &str) -> Result<Vec<Certificate<'static>>> {
    let bytes = std::fs::read(path).map_err(|e| {
        anyhow::anyhow!(
            "SSL_CERT_FILE {path:?} cannot be read ({e}): point it at a PEM file of CA certificates"
        )
    })?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&bytes) {
        match item {
            Ok(ureq::tls::PemItem::Certificate(cert)) => certs.push(cert),
            Ok(_) => {}
            Err(e) => bail!(
                "SSL_CERT_FILE {path:?} is not valid PEM ({e}): point it at a PEM file of CA certificates"
            ),
        }
    }
    if certs.is_empty() {
        bail!(
            "SSL_CERT_FILE {path:?} holds no certificate: point it at a PEM file of CA certificates"
        );
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_file(path: &str) -> impl Fn(&str) -> Option<String> + '_ {
        move |key| (key == "SSL_CERT_FILE").then(|| path.to_string())
    }

    #[test]
    fn a_cert_file_that_is_missing_or_holds_no_certificate_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        for path in [missing, empty] {
            let path = path.to_str().unwrap();
            let Err(error) = Roots::load(cert_file(path)) else {
                panic!("{path} gives no roots")
            };
            let error = error.to_string();
            assert!(
                error.starts_with("SSL_CERT_FILE") && error.contains(path) && !error.contains('\n'),
                "{error}"
            );
        }
    }
}
