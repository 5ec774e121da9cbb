//! Which host paths a sandbox may never see, whatever `[sandbox] mounts` says.
use std::path::{Component, Path, PathBuf};

/// Where Docker keeps its socket; mounting it, or a directory holding it, gives root on the host.
const DOCKER_SOCKET_DIRS: [&str; 2] = ["/run", "/var/run"];

/// The project directory of a config file: the parent of `.sandcastle/`, or the file's own
/// directory when it is not in one.
pub(crate) fn project_of(config: &Path) -> PathBuf {
    let dir = config.parent().unwrap_or(Path::new(""));
    let project = match dir.file_name() {
        Some(name) if name == ".sandcastle" => dir.parent().unwrap_or(Path::new("")),
        _ => dir,
    };
    std::path::absolute(project).unwrap_or_else(|_| project.to_path_buf())
}

/// Why mounting `host` (relative to `project`) into a sandbox is refused, or `None` when it may be
/// mounted: `/`, the Docker socket or a directory Docker keeps it in, and the project's own
/// `.sandcastle/` (secrets and work repositories), inside it or above it. The check is on the
/// path's words; the caller canonicalizes first where links matter.
pub fn mount_refused(project: &Path, host: &Path) -> Option<&'static str> {
    let host = normalize(&project.join(host));
    let sandcastle = normalize(&project.join(".sandcastle"));
    if host == Path::new("/") {
        return Some("mounts the host's whole filesystem");
    }
    if host.file_name().is_some_and(|name| name == "docker.sock")
        || DOCKER_SOCKET_DIRS.iter().any(|dir| host == Path::new(dir))
    {
        return Some("exposes the Docker socket, which is root on the host");
    }
    if host.starts_with(&sandcastle) || sandcastle.starts_with(&host) {
        return Some("exposes the project's .sandcastle/ (its secrets and work repositories)");
    }
    None
}

/// `path` with `.` and `..` resolved by their words (`..` at the root stays at the root).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_the_docker_socket_and_the_projects_secrets_are_refused() {
        let project = Path::new("/work/proj");
        for refused in [
            "/",
            "/srv/..",
            "/var/run/docker.sock",
            "/run/docker.sock",
            "/run",
            "/home/me/.docker/run/docker.sock",
            ".sandcastle",
            "./.sandcastle/repos",
            "/work/proj/.sandcastle/.env",
            ".",
            "/work",
            "src/../../proj",
        ] {
            assert!(
                mount_refused(project, Path::new(refused)).is_some(),
                "{refused}"
            );
        }
        for allowed in [
            "/srv/cache",
            "/nix/store",
            "data",
            "/work/proj/src",
            "/work/other",
        ] {
            assert_eq!(
                mount_refused(project, Path::new(allowed)),
                None,
                "{allowed}"
            );
        }
    }

    #[test]
    fn the_project_is_the_parent_of_dot_sandcastle() {
        assert_eq!(
            project_of(Path::new("/p/.sandcastle/config.toml")),
            Path::new("/p")
        );
        assert_eq!(project_of(Path::new("/p/config.toml")), Path::new("/p"));
    }
}
