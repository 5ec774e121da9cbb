//! Which engine serves the Docker Engine API, and what keeps an engine from running a sandbox as
//! sandcastle makes it, mostly what a Podman host lacks that Docker has built in. Podman answers
//! `/version` with a component named `Podman Engine`; its refusals are recognised by its own words
//! (its API has no field for them), each said with the fix.
use bollard::models::SystemVersion;

/// The engine behind the socket, as its `/version` answer names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineKind {
    Docker {
        version: String,
    },
    /// Podman through its Docker-compatible API (`podman system service`).
    Podman {
        version: String,
    },
}

impl EngineKind {
    /// The engine a `/version` answer names: Podman's lists a `Podman Engine` component.
    pub fn of(answer: &SystemVersion) -> EngineKind {
        let podman = answer
            .components
            .iter()
            .flatten()
            .find(|component| component.name == "Podman Engine");
        match podman {
            Some(component) => EngineKind::Podman {
                version: component.version.clone(),
            },
            None => EngineKind::Docker {
                version: answer.version.clone().unwrap_or_else(|| "unknown".into()),
            },
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineKind::Docker { version } => write!(f, "Docker {version}"),
            EngineKind::Podman { version } => {
                write!(f, "Podman {version}, through its Docker-compatible API")
            }
        }
    }
}

/// What keeps an engine from running a sandbox as sandcastle makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineLack {
    /// `catatonit`, the init Podman runs as a sandbox's PID 1 (`HostConfig.Init`); Docker brings
    /// its own (`docker-init`).
    Init,
    /// Podman's default ulimits (`nofile`, `nproc`) are above what this host lets a container have,
    /// so no container starts.
    Ulimits,
    /// A rootless Podman's user cannot enter a directory sandcastle mounts: sandcastle runs as
    /// another user, whose run directory (the proxy's socket) is private to it.
    Reach,
    /// The engine took a sandbox's memory and pids limits and dropped them (its inspect says 0):
    /// rootless Podman on cgroups v1, or a kernel without those controllers. The sandbox would
    /// run unbounded, so it is not started.
    Limits,
}

impl std::error::Error for EngineLack {}

impl EngineLack {
    /// The lack an engine's refusal names, if it is one of these.
    pub fn of(message: &str) -> Option<EngineLack> {
        if message.contains("container-init binary not found") {
            Some(EngineLack::Init)
        } else if message.contains("error setting rlimit") {
            Some(EngineLack::Ulimits)
        } else if message.contains("making volume mountpoint")
            && message.contains("permission denied")
        {
            Some(EngineLack::Reach)
        } else {
            None
        }
    }
}

impl std::fmt::Display for EngineLack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineLack::Init => {
                "Podman has no catatonit, the init every sandbox runs under (`--init`): install it \
                 (`apt-get install catatonit`, `dnf install catatonit`), or name one with init_path \
                 under [containers] in containers.conf"
            }
            EngineLack::Ulimits => {
                "Podman's default ulimits are above this host's limits, so no container starts: set \
                 default_ulimits = [\"nofile=1024:1024\", \"nproc=1024:1024\"] under [containers] in \
                 /etc/containers/containers.conf (rootless: ~/.config/containers/containers.conf), \
                 then restart `podman system service`"
            }
            EngineLack::Reach => {
                "the engine cannot enter a directory sandcastle mounts (a rootless Podman runs as its \
                 own user, and sandcastle's run directory is private to sandcastle's): run sandcastle \
                 as the user whose `podman system service` it is"
            }
            EngineLack::Limits => {
                "the engine does not hold containers to their memory and pids limits ([sandbox] \
                 memory, pidsLimit), so a sandbox would run unbounded: rootless Podman needs \
                 cgroups v2 with the memory and pids controllers delegated to your user (systemd's \
                 default); on cgroups v1 use rootful Podman or Docker"
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::SystemVersionComponents;

    /// The refusals as Podman 4.3 words them, measured with Debian's podman: catatonit hidden;
    /// no `default_ulimits` on a host that caps them; sandcastle as root on a user's rootless one.
    #[test]
    fn podmans_refusals_are_named_with_the_fix() {
        let init = "container create: container-init binary not found on the host: stat \
                    /usr/libexec/podman/catatonit: no such file or directory";
        let ulimits = "runc: runc create failed: unable to start container process: error during \
                       container init: error setting rlimits for ready process: error setting \
                       rlimit type 7: operation not permitted: OCI permission denied";
        assert_eq!(EngineLack::of(init), Some(EngineLack::Init));
        assert_eq!(EngineLack::of(ulimits), Some(EngineLack::Ulimits));
        // sandcastle as root, the engine a user's rootless Podman.
        let reach = "make cli opts(): making volume mountpoint for volume \
                     /tmp/sandcastle-0/runs/q9hRGA-20261204T134903Z-29333/proxy-tPdf8X/mounted: mkdir \
                     /tmp/sandcastle-0/runs: permission denied";
        assert_eq!(EngineLack::of(reach), Some(EngineLack::Reach));
        assert_eq!(EngineLack::of("No such image: sandcastle:latest"), None);
        assert!(EngineLack::Init.to_string().contains("install it"));
        assert!(!EngineLack::Ulimits.to_string().contains('\n'));
    }

    #[test]
    fn podman_is_told_by_its_version_answer() {
        let podman = SystemVersion {
            version: Some("4.3.1".into()),
            components: Some(vec![SystemVersionComponents {
                name: "Podman Engine".into(),
                version: "4.3.1".into(),
                details: None,
            }]),
            ..Default::default()
        };
        assert_eq!(
            EngineKind::of(&podman),
            EngineKind::Podman {
                version: "4.3.1".into()
            }
        );
        let docker = SystemVersion {
            version: Some("28.2.2".into()),
            components: Some(vec![SystemVersionComponents {
                name: "Engine".into(),
                version: "28.2.2".into(),
                details: None,
            }]),
            ..Default::default()
        };
        assert_eq!(EngineKind::of(&docker).to_string(), "Docker 28.2.2");
    }
}
