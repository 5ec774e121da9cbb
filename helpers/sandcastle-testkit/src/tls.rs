//! An HTTPS server for tests: a certificate authority made in the test, and a TLS front on
//! 127.0.0.1 for a plain HTTP server there (the fake model or forge), so every client that trusts
//! `SSL_CERT_FILE` is tested against a real handshake.
use std::sync::Arc;

/// A certificate authority made for one test, and its PEM.
pub fn test_ca(name: &str) -> (rcgen::CertifiedIssuer<'static, rcgen::KeyPair>, String) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca =
        rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap()).unwrap();
    let pem = ca.pem();
    (ca, pem)
}

/// An HTTPS front on 127.0.0.1 for the plain HTTP server on 127.0.0.1:`port`, with a certificate
/// for `127.0.0.1` that `ca` signed: each connection's request goes to the server whole, its answer
/// back. The front's URL.
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
    let mut request = format!("{}\r\nconnection: close\r\n\r\n", lines.join("\r\n")).into_bytes();
    request.extend_from_slice(&bytes[head_end..]);
    Some(request)
}
