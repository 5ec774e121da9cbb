//! The Docker Engine API, spoken directly (`bollard`), not through the `docker` CLI: which engine
//! (`DOCKER_HOST`, else the Docker context, as the CLI picks it), one client per process driven by
//! a small runtime of its own, and every call bounded in time, so a hung engine is one clear error
//! naming it. Callers stay blocking.
use anyhow::{Context as _, Result, anyhow, bail};
use bollard::Docker;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// The engine when neither `DOCKER_HOST` nor a context names one.
const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// The engine's address, and what named it (for the fix in an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured {
    pub host: String,
    pub from: String,
}

/// Where the engine is, as the `docker` CLI resolves it: `DOCKER_HOST`; else the context named by
/// `DOCKER_CONTEXT` or by `currentContext` in `$DOCKER_CONFIG/config.json` (`~/.docker`), whose
/// `contexts/meta/<sha256 of its name>/meta.json` holds the endpoint; else the default socket.
pub fn configured(var: &dyn Fn(&str) -> Option<String>, home: Option<&Path>) -> Result<Configured> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    if let Some(host) = set("DOCKER_HOST") {
        return Ok(Configured {
            host,
            from: "DOCKER_HOST".into(),
        });
    }
    let config_dir = match (set("DOCKER_CONFIG"), home) {
        (Some(dir), _) => PathBuf::from(dir),
        (None, Some(home)) => home.join(".docker"),
        (None, None) => return Ok(default_host()),
    };
    let (context, from) = match set("DOCKER_CONTEXT") {
        Some(name) => (name, "DOCKER_CONTEXT".to_string()),
        None => {
            let file = config_dir.join("config.json");
            match current_context(&file)? {
                Some(name) => (name, format!("currentContext in {}", file.display())),
                None => return Ok(default_host()),
            }
        }
    };
    if context == "default" {
        return Ok(default_host());
    }
    let meta = config_dir
        .join("contexts/meta")
        .join(sha256_hex(&context))
        .join("meta.json");
    let text = std::fs::read_to_string(&meta).with_context(|| {
        format!(
            "the Docker context {context:?} ({from}) has no {}: create it with `docker context create`, or choose another",
            meta.display()
        )
    })?;
    let host = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|meta| meta["Endpoints"]["docker"]["Host"].as_str().map(String::from))
        .ok_or_else(|| {
            anyhow!(
                "{}: no Endpoints.docker.Host for the Docker context {context:?}: recreate the context",
                meta.display()
            )
        })?;
    Ok(Configured {
        host,
        from: format!("the Docker context {context:?} ({from})"),
    })
}

fn default_host() -> Configured {
    Configured {
        host: DEFAULT_HOST.into(),
        from: "the default".into(),
    }
}

/// `currentContext` of the CLI's config file, if it has one (no file: none).
fn current_context(file: &Path) -> Result<Option<String>> {
    let text = match std::fs::read_to_string(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        read => read.with_context(|| format!("cannot read {}", file.display()))?,
    };
    let config: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON: fix or remove it", file.display()))?;
    Ok(config["currentContext"]
        .as_str()
        .filter(|name| !name.is_empty())
        .map(String::from))
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How sandcastle reaches the engine: a Unix socket, or TCP to this host's loopback. An engine
/// elsewhere cannot mount the host directory sandboxes reach the model through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    /// `host:port`, on loopback.
    Tcp(String),
}

impl Endpoint {
    pub fn of(configured: &Configured) -> Result<Endpoint> {
        let host = &configured.host;
        if let Some(path) = host.strip_prefix("unix://") {
            return Ok(Endpoint::Unix(PathBuf::from(path)));
        }
        let address = host
            .strip_prefix("tcp://")
            .or_else(|| host.strip_prefix("http://"))
            .map(|rest| rest.split('/').next().unwrap_or_default());
        match address {
            Some(address) if is_loopback(address) => Ok(Endpoint::Tcp(address.to_string())),
            _ => bail!(
                "the Docker engine at {host} ({}) is remote, and cannot mount the socket sandboxes reach the model through: run sandcastle on the engine's host",
                configured.from
            ),
        }
    }
}

/// `localhost:P`, `127.x.y.z:P`, `[::1]:P`.
fn is_loopback(address: &str) -> bool {
    let host = match address.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => return false,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The runtime every engine call runs on: one worker thread, shared by the process.
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: LazyLock<std::io::Result<tokio::runtime::Runtime>> = LazyLock::new(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sandcastle-docker")
            .enable_all()
            .build()
    });
    RUNTIME
        .as_ref()
        .map_err(|e| anyhow!("cannot start the Docker client's runtime: {e}"))
}

/// A client of one engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    docker: Docker,
    /// The client with the API version the engine speaks, agreed on at the first call.
    negotiated: Arc<tokio::sync::OnceCell<Docker>>,
    configured: Arc<Configured>,
    bound: Duration,
}

impl Engine {
    /// The engine the environment names (see [`configured`]), each call bounded by `bound`.
    pub fn from_env(bound: Duration) -> Result<Engine> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let configured = configured(&|name| std::env::var(name).ok(), home.as_deref())?;
        Engine::connect(configured, bound)
    }

    /// A client of `configured`'s engine; no call is made yet.
    pub fn connect(configured: Configured, bound: Duration) -> Result<Engine> {
        let seconds = bound.as_secs().max(1);
        let version = bollard::API_DEFAULT_VERSION;
        let _entered = runtime()?.enter();
        let docker = match Endpoint::of(&configured)? {
            Endpoint::Unix(path) => {
                if !path.exists() {
                    bail!(
                        "the Docker engine's socket {} ({}) does not exist: start the engine, or point DOCKER_HOST at its socket",
                        path.display(),
                        configured.from
                    );
                }
                Docker::connect_with_unix(&path.to_string_lossy(), seconds, version)
            }
            Endpoint::Tcp(address) => Docker::connect_with_http(&address, seconds, version),
        }
        .with_context(|| format!("cannot use the Docker engine at {}", configured.host))?;
        Ok(Engine {
            docker,
            negotiated: Default::default(),
            configured: Arc::new(configured),
            bound,
        })
    }

    /// Runs `work` against the engine within the bound; `what` names the call in errors.
    pub fn call<T, F>(&self, what: &str, work: impl FnOnce(Docker) -> F) -> Result<T>
    where
        F: Future<Output = Result<T, bollard::errors::Error>>,
    {
        self.call_within(what, self.bound, work)
    }

    /// [`Engine::call`] with a bound of its own (a transfer may take longer than a call).
    pub fn call_within<T, F>(
        &self,
        what: &str,
        bound: Duration,
        work: impl FnOnce(Docker) -> F,
    ) -> Result<T>
    where
        F: Future<Output = Result<T, bollard::errors::Error>>,
    {
        runtime()?.block_on(self.bounded(what, bound, work))
    }

    /// The future of [`Engine::call_within`], for work already on the runtime.
    pub async fn bounded<T, F>(
        &self,
        what: &str,
        bound: Duration,
        work: impl FnOnce(Docker) -> F,
    ) -> Result<T>
    where
        F: Future<Output = Result<T, bollard::errors::Error>>,
    {
        let run = async {
            let docker = self
                .negotiated
                .get_or_try_init(|| self.docker.clone().negotiate_version())
                .await?;
            work(docker.clone()).await
        };
        match tokio::time::timeout(bound, run).await {
            Ok(Ok(value)) => Ok(value),
            // The client's own bound (the same, in whole seconds) may come first.
            Ok(Err(error)) if !matches!(error, bollard::errors::Error::RequestTimeoutError) => {
                Err(self.failed(what, &error))
            }
            _ => bail!(
                "the Docker engine at {} did not answer `{what}` within {}: it may be hung; restart it",
                self.configured.host,
                humantime::format_duration(bound)
            ),
        }
    }

    /// The engine's own message when it answered with an error; otherwise why it could not be
    /// reached: the root cause (`Connection refused`), not the HTTP client's layers above it.
    fn failed(&self, what: &str, error: &bollard::errors::Error) -> anyhow::Error {
        if let bollard::errors::Error::DockerResponseServerError { message, .. } = error {
            return anyhow!("`{what}` failed: {}", message.trim());
        }
        let mut cause: &dyn std::error::Error = error;
        while let Some(deeper) = cause.source() {
            cause = deeper;
        }
        anyhow!(
            "the Docker engine at {} ({}) does not answer `{what}`: {cause}: start it, or point DOCKER_HOST at a running one",
            self.configured.host,
            self.configured.from,
        )
    }

    /// Where the engine is, for messages.
    pub fn host(&self) -> &str {
        &self.configured.host
    }

    pub(super) fn bound(&self) -> Duration {
        self.bound
    }
}

/// Spawns `task` on the shared runtime.
pub(super) fn spawn<F>(task: F) -> Result<tokio::task::JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(runtime()?.spawn(task))
}

/// Waits for `future` on the shared runtime, from a blocking caller.
pub(super) fn block_on<F: Future>(future: F) -> Result<F::Output> {
    Ok(runtime()?.block_on(future))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    /// A context as `docker context create NAME --docker host=HOST` writes it.
    fn context(home: &Path, name: &str, host: &str) {
        let dir = home.join(".docker/contexts/meta").join(sha256_hex(name));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("meta.json"),
            format!(
                r#"{{"Name":"{name}","Metadata":{{}},"Endpoints":{{"docker":{{"Host":"{host}","SkipTLSVerify":false}}}}}}"#
            ),
        )
        .unwrap();
    }

    fn current(home: &Path, name: &str) {
        std::fs::write(
            home.join(".docker/config.json"),
            format!(r#"{{"auths":{{}},"currentContext":"{name}"}}"#),
        )
        .unwrap();
    }

    #[test]
    fn docker_host_wins_then_the_context_then_the_default() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path();
        assert_eq!(
            configured(&env(&[]), Some(home)).unwrap().host,
            DEFAULT_HOST
        );
        context(home, "colima", "unix:///home/me/.colima/docker.sock");
        current(home, "colima");
        let from_config = configured(&env(&[]), Some(home)).unwrap();
        assert_eq!(from_config.host, "unix:///home/me/.colima/docker.sock");
        assert!(from_config.from.contains("\"colima\""), "{from_config:?}");
        context(home, "podman", "unix:///run/user/1000/podman/podman.sock");
        let named = configured(&env(&[("DOCKER_CONTEXT", "podman")]), Some(home)).unwrap();
        assert_eq!(named.host, "unix:///run/user/1000/podman/podman.sock");
        let vars = [
            ("DOCKER_CONTEXT", "podman"),
            ("DOCKER_HOST", "unix:///tmp/x.sock"),
        ];
        assert_eq!(
            configured(&env(&vars), Some(home)).unwrap(),
            Configured {
                host: "unix:///tmp/x.sock".into(),
                from: "DOCKER_HOST".into()
            }
        );
        current(home, "default");
        assert_eq!(
            configured(&env(&[]), Some(home)).unwrap().host,
            DEFAULT_HOST
        );
    }

    #[test]
    fn a_missing_context_is_one_line_naming_it() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join(".docker")).unwrap();
        current(home.path(), "gone");
        let error = configured(&env(&[]), Some(home.path()))
            .unwrap_err()
            .to_string();
        assert!(error.contains("the Docker context \"gone\""), "{error}");
        assert!(error.contains("docker context create"), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }

    /// The engine must be this host's: it mounts a host directory into every sandbox.
    #[test]
    fn a_context_on_a_remote_tcp_engine_is_refused() {
        let home = tempfile::tempdir().unwrap();
        context(home.path(), "far", "tcp://build-server.example:2376");
        let configured = configured(&env(&[("DOCKER_CONTEXT", "far")]), Some(home.path())).unwrap();
        let error = Endpoint::of(&configured).unwrap_err().to_string();
        assert!(
            error.starts_with("the Docker engine at tcp://build-server.example:2376 (the Docker context \"far\" (DOCKER_CONTEXT)) is remote"),
            "{error}"
        );
        assert!(!error.contains('\n'), "{error}");
        let refused = Engine::connect(configured, Duration::from_secs(1));
        assert!(refused.is_err());
        for host in ["ssh://me@far", "tcp://10.0.0.2:2375", "tcp://localhost"] {
            let remote = Configured {
                host: host.into(),
                from: "DOCKER_HOST".into(),
            };
            assert!(Endpoint::of(&remote).is_err(), "{host}");
        }
        for (host, address) in [
            ("tcp://127.0.0.1:2375", "127.0.0.1:2375"),
            ("tcp://localhost:2375", "localhost:2375"),
            ("tcp://[::1]:2375", "[::1]:2375"),
        ] {
            let local = Configured {
                host: host.into(),
                from: "DOCKER_HOST".into(),
            };
            assert_eq!(Endpoint::of(&local).unwrap(), Endpoint::Tcp(address.into()));
        }
    }

    #[test]
    fn docker_host_naming_a_socket_that_does_not_exist_is_one_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("docker.sock");
        let vars = [("DOCKER_HOST", format!("unix://{}", socket.display()))];
        let vars: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let configured = configured(&env(&vars), None).unwrap();
        let error = Engine::connect(configured, Duration::from_secs(5))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            error,
            format!(
                "the Docker engine's socket {} (DOCKER_HOST) does not exist: start the engine, or point DOCKER_HOST at its socket",
                socket.display()
            )
        );
    }

    /// An engine that takes the connection and never answers: the call ends at the bound, one
    /// error naming the engine.
    #[test]
    fn a_hung_engine_is_a_bounded_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("hung.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let (done, test_over) = std::sync::mpsc::channel::<()>();
        // Takes the request and answers nothing until the test is over.
        let held = std::thread::spawn(move || {
            let (connection, _) = listener.accept().unwrap();
            let _ = test_over.recv();
            drop(connection);
        });
        let host = format!("unix://{}", socket.display());
        let engine = Engine::connect(
            Configured {
                host: host.clone(),
                from: "DOCKER_HOST".into(),
            },
            Duration::from_secs(1),
        )
        .unwrap();
        let error = engine
            .call("version", |docker| async move { docker.version().await })
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            format!(
                "the Docker engine at {host} did not answer `version` within 1s: it may be hung; restart it"
            )
        );
        done.send(()).unwrap();
        held.join().unwrap();
    }
}
