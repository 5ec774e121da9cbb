//! Git smart HTTP at `/{owner}/{repo}.git/...`, served by `git http-backend` as a CGI program.
//! Fetching is open to everyone; pushing needs basic auth with a user's login and token.
use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};

use tiny_http::{Header, Request, Response, StatusCode};

use crate::auth::{authenticate, credentials};
use crate::git;
use crate::records::{Push, RefUpdate};
use crate::shared::Shared;

/// The `owner/name` of a git smart HTTP path, if `path` is one.
pub fn repo_of(path: &str) -> Option<(&str, &str)> {
    let mut parts = path.trim_start_matches('/').splitn(3, '/');
    let owner = parts.next()?;
    let name = parts.next()?.strip_suffix(".git")?;
    parts.next()?;
    Some((owner, name))
}

pub fn handle(shared: &Shared, mut request: Request, owner: &str, name: &str) {
    let url = request.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let pushing = path.ends_with("/git-receive-pack") || query.contains("service=git-receive-pack");
    let user = match caller(shared, &request, owner, name, pushing) {
        Ok(user) => user,
        Err(refusal) => {
            let _ = request.respond(refusal);
            return;
        }
    };
    let repo_dir = shared.repo_dir(owner, name);
    // Pushes are serialised so that comparing the refs before and after tells what one push did.
    let _push_guard = pushing.then(|| shared.push_lock.lock().unwrap_or_else(|e| e.into_inner()));
    let receiving = pushing && request.method().as_str() == "POST";
    let before = receiving.then(|| git::refs(&repo_dir).unwrap_or_default());

    let child = match http_backend(shared, &request, path, query, user.as_deref()).spawn() {
        Ok(child) => child,
        Err(e) => {
            let _ = request.respond(
                Response::from_string(format!("cannot run git http-backend: {e}\n"))
                    .with_status_code(500),
            );
            return;
        }
    };
    let (output, backend) = Backend::start(child, request.as_reader());
    let mut output = BufReader::new(output);
    let (status, headers) = read_cgi_headers(&mut output);
    // The push is recorded when the CGI's output ends, before the response does, so a client
    // that sees its push succeed also finds it recorded.
    let finish = || {
        if backend.wait(path)
            && let (Some(before), Some(user)) = (before, user)
        {
            record_push(shared, owner, name, user, &before, &repo_dir);
        }
    };
    let body = AtEnd {
        inner: output,
        finish: Some(finish),
    };
    let _ = request.respond(Response::new(StatusCode(status), headers, body, None, None));
}

/// The login of the caller (`None`: anonymous, which may only fetch), or the answer that refuses
/// the request: the repository does not exist, or a push comes without valid credentials.
fn caller(
    shared: &Shared,
    request: &Request,
    owner: &str,
    name: &str,
    pushing: bool,
) -> Result<Option<String>, Response<Cursor<Vec<u8>>>> {
    let user = {
        let state = shared.state();
        if state.repo(owner, name).is_err() {
            return Err(Response::from_string("repository not found\n").with_status_code(404));
        }
        authenticate(&state, &credentials(request))
    };
    match user {
        Ok(Some(user)) => Ok(Some(user)),
        Ok(None) if !pushing => Ok(None),
        Ok(None) | Err(_) => {
            let challenge = Header::from_bytes("WWW-Authenticate", "Basic realm=\"fake-forge\"")
                .expect("static header");
            Err(Response::from_string("authentication required\n")
                .with_status_code(401)
                .with_header(challenge))
        }
    }
}

/// Request headers the CGI reads, each with its variable.
const CGI_HEADERS: [(&str, &str); 4] = [
    ("Content-Type", "CONTENT_TYPE"),
    ("Content-Length", "CONTENT_LENGTH"),
    ("Content-Encoding", "HTTP_CONTENT_ENCODING"),
    ("Git-Protocol", "HTTP_GIT_PROTOCOL"),
];

/// `git http-backend` for `request`, with a clean environment: the CGI variables, the repositories'
/// root, and no system or global git config.
fn http_backend(
    shared: &Shared,
    request: &Request,
    path: &str,
    query: &str,
    user: Option<&str>,
) -> Command {
    let mut command = Command::new("git");
    command
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", &shared.repos_root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("REQUEST_METHOD", request.method().as_str())
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(user) = user {
        command.env("REMOTE_USER", user);
    }
    for (header, variable) in CGI_HEADERS {
        if let Some(h) = request.headers().iter().find(|h| h.field.equiv(header)) {
            command.env(variable, h.value.as_str());
        }
    }
    command
}

/// A running `git http-backend`, with the threads that drain its output and its errors.
struct Backend {
    child: Child,
    pump: JoinHandle<()>,
    errors: JoinHandle<String>,
}

impl Backend {
    /// Drains the CGI's output while the request body streams in, so neither side can block the
    /// other; the output comes out of the returned reader.
    fn start(mut child: Child, mut body: impl Read) -> (ChannelReader, Backend) {
        let (mut stdin, stdout, mut stderr) = (
            child.stdin.take().expect("piped"),
            child.stdout.take().expect("piped"),
            child.stderr.take().expect("piped"),
        );
        let (sender, receiver) = mpsc::channel();
        let pump = thread::spawn(move || pump(stdout, &sender));
        let errors = thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let _ = io::copy(&mut body, &mut stdin);
        drop(stdin);
        let output = ChannelReader {
            receiver,
            pending: Vec::new(),
            offset: 0,
        };
        (
            output,
            Backend {
                child,
                pump,
                errors,
            },
        )
    }

    /// Waits for the CGI to end; whether it succeeded. A failure is told on stderr with what git
    /// said.
    fn wait(mut self, path: &str) -> bool {
        let _ = self.pump.join();
        let exit = self.child.wait();
        let stderr_text = self.errors.join().unwrap_or_default();
        if !exit.as_ref().is_ok_and(|s| s.success()) {
            eprintln!(
                "fake-forge: git http-backend for {path} failed: {}",
                stderr_text.trim()
            );
        }
        exit.is_ok_and(|s| s.success())
    }
}

/// Records what a push by `user` changed, from the refs `before` it; git probes with an empty
/// request before a large push, which changes nothing and is not recorded.
fn record_push(
    shared: &Shared,
    owner: &str,
    name: &str,
    user: String,
    before: &BTreeMap<String, String>,
    repo_dir: &Path,
) {
    let updates = diff_refs(before, &git::refs(repo_dir).unwrap_or_default());
    if !updates.is_empty() {
        let repo = format!("{owner}/{name}");
        shared.state().pushes.push(Push {
            user,
            repo,
            updates,
        });
    }
}

/// A reader that runs `finish` once, when `inner` ends (or when the response is abandoned).
struct AtEnd<R, F: FnOnce()> {
    inner: R,
    finish: Option<F>,
}

impl<R: Read, F: FnOnce()> Read for AtEnd<R, F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0
            && let Some(finish) = self.finish.take()
        {
            finish();
        }
        Ok(n)
    }
}

impl<R, F: FnOnce()> Drop for AtEnd<R, F> {
    fn drop(&mut self) {
        if let Some(finish) = self.finish.take() {
            finish();
        }
    }
}

fn pump(mut stdout: impl Read, sender: &mpsc::Sender<Vec<u8>>) {
    let mut buffer = [0u8; 64 * 1024];
    loop {
        match stdout.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if sender.send(buffer[..n].to_vec()).is_err() {
                    return;
                }
            }
        }
    }
}

/// Reads the chunks the pump thread forwards; ends when the CGI closes its output.
struct ChannelReader {
    receiver: mpsc::Receiver<Vec<u8>>,
    pending: Vec<u8>,
    offset: usize,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.offset == self.pending.len() {
            match self.receiver.recv() {
                Ok(chunk) => {
                    self.pending = chunk;
                    self.offset = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.pending.len() - self.offset);
        buf[..n].copy_from_slice(&self.pending[self.offset..self.offset + n]);
        self.offset += n;
        Ok(n)
    }
}

/// The CGI `Status:` and the other headers, up to the blank line.
fn read_cgi_headers(output: &mut impl BufRead) -> (u16, Vec<Header>) {
    let mut status = 200;
    let mut headers = Vec::new();
    let mut line = String::new();
    while output.read_line(&mut line).is_ok_and(|n| n > 0) {
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("Status") {
                status = value
                    .split(' ')
                    .next()
                    .and_then(|code| code.parse().ok())
                    .unwrap_or(500);
            } else if let Ok(header) = Header::from_bytes(name.as_bytes(), value.as_bytes()) {
                headers.push(header);
            }
        }
        line.clear();
    }
    (status, headers)
}

fn diff_refs(
    before: &std::collections::BTreeMap<String, String>,
    after: &std::collections::BTreeMap<String, String>,
) -> Vec<RefUpdate> {
    let names: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    names
        .into_iter()
        .filter(|name| before.get(*name) != after.get(*name))
        .map(|name| RefUpdate {
            name: name.clone(),
            old: before.get(name).cloned(),
            new: after.get(name).cloned(),
        })
        .collect()
}
