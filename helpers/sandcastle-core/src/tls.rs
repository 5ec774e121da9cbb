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

/// An HTTPS server of a CA made in the test, for the tests of every client that trusts [`Roots`].
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;

    /// A certificate authority made for one test, and its PEM.
    pub fn test_ca(name: &str) -> (rcgen::CertifiedIssuer<'static, rcgen::KeyPair>, String) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
            .unwrap();
        let pem = ca.pem();
        (ca, pem)
    }

    /// An HTTPS front for the plain HTTP server on 127.0.0.1:`port`, itself on 127.0.0.1, with a certificate for `127.0.0.1` that `ca` signed:
    /// each connection's request goes to the server whole, its answer back. The front's URL.
    pub fn https_front(port: u16, ca: &rcgen::CertifiedIssuer<'_, rcgen::KeyPair>) -> String {
        use std::io::{Read, Write};
        let key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, ca)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
            )
            .unwrap();
        let config = Arc::new(config);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let plain = format!("127.0.0.1:{port}");
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (config, plain) = (Arc::clone(&config), plain.clone());
                std::thread::spawn(move || {
                    let connection = rustls::ServerConnection::new(config).unwrap();
                    let mut tls = rustls::StreamOwned::new(connection, client);
                    let Some(request) = one_request(&mut tls) else {
                        return;
                    };
                    let mut server = std::net::TcpStream::connect(plain).unwrap();
                    server.write_all(&request).unwrap();
                    let mut answer = Vec::new();
                    server.read_to_end(&mut answer).unwrap();
                    tls.write_all(&answer).unwrap();
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                });
            }
        });
        url
    }

    /// One HTTP/1.1 request read whole (head and `content-length` body), made to close its
    /// connection after the answer; `None` when the client gave up (a refused handshake).
    fn one_request(stream: &mut impl std::io::Read) -> Option<Vec<u8>> {
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(at) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
            bytes.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&bytes[..head_end]).into_owned();
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .unwrap_or(0);
        while bytes.len() < head_end + length {
            let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
            bytes.extend_from_slice(&chunk[..n]);
        }
        let lines: Vec<&str> = head
            .trim_end()
            .lines()
            .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
            .collect();
        let mut request =
            format!("{}\r\nconnection: close\r\n\r\n", lines.join("\r\n")).into_bytes();
        request.extend_from_slice(&bytes[head_end..]);
        Some(request)
    }
}
