//! The gate's warm build cache: one Docker volume per base commit, built once in a container of
//! its own by running `[commands] check` on a checkout of the base branch's tip as the forge has
//! it (never an agent's commit), then only ever mounted read-only. Each gate copies it into a
//! fresh volume of its own (`gate::copy_warm_script`), so a gate's writes reach neither the warm
//! volume nor another gate. When the base moves, the next gate builds a new one and the old one
//! goes; when a warm-up fails, gates build cold, said once per base commit.
use anyhow::Result;
use sandcastle_core::git::short;
use sandcastle_core::progress::Progress;
use sandcastle_core::sandbox;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

/// The run's warm cache: the base commit it was last asked for, and its volume.
#[derive(Default)]
pub struct WarmCache {
    /// Held while a warm-up runs, so gates side by side wait for the one warm-up of their base.
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    current: Option<Warm>,
    /// Volumes of earlier bases that a gate still used when the base moved: removed at the end.
    stale: Vec<String>,
}

/// The warm cache of one base commit.
struct Warm {
    base: String,
    /// `None`: the warm-up failed; gates on this base build cold.
    volume: Option<String>,
}

/// What a warm-up's steps did (the machinery breaking is an `Err`).
pub enum WarmUp {
    /// The volume holds the base's build.
    Built,
    /// This step failed on the base: gates build cold.
    StepFailed(String),
}

impl WarmCache {
    /// The warm volume of `base` (a commit id) in run `run_id`, made first (created, labelled as
    /// the run's, and filled by `warm_up(volume name)`) when it is not the base the cache holds;
    /// `None` when its warm-up failed, said in one line of `progress`. One warm-up runs at a
    /// time; the volume of the base before is removed once its successor is asked for.
    pub fn volume(
        &self,
        run_id: &str,
        project: &Path,
        base: &str,
        progress: &Progress,
        warm_up: impl FnOnce(&str) -> Result<WarmUp>,
    ) -> Option<String> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(warm) = state.current.as_ref().filter(|warm| warm.base == base) {
            return warm.volume.clone();
        }
        if let Some(old) = state.current.take().and_then(|warm| warm.volume) {
            // A gate still copying from it keeps it; then it goes at the end.
            if sandbox::provider().remove_volumes(&[&old]).is_err() {
                state.stale.push(old);
            }
        }
        let name = volume_name(run_id, base);
        let started = Instant::now();
        let warmed = sandbox::provider()
            .create_volume(&name, run_id, project)
            .and_then(|()| warm_up(&name));
        let short = short(base);
        let cold = match warmed {
            Ok(WarmUp::Built) => {
                progress.note(&format!(
                    "gate cache: built from the base branch at {short} in {}s; each gate starts from a copy",
                    started.elapsed().as_secs()
                ));
                None
            }
            Ok(WarmUp::StepFailed(step)) => Some(format!("`{step}` failed on it")),
            Err(error) => Some(format!("{error:#}")),
        };
        let volume = match cold {
            None => Some(name),
            Some(why) => {
                progress.note(&format!(
                    "gate cache: no warm cache from the base branch at {short} ({why}); gates on it build cold"
                ));
                let _ = sandbox::provider().remove_volumes(&[&name]);
                None
            }
        };
        state.current = Some(Warm {
            base: base.to_string(),
            volume: volume.clone(),
        });
        volume
    }

    /// Removes every warm volume of the run, at its end.
    pub fn remove(&self) -> Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut volumes = std::mem::take(&mut state.stale);
        volumes.extend(state.current.take().and_then(|warm| warm.volume));
        let volumes: Vec<&str> = volumes.iter().map(String::as_str).collect();
        sandbox::provider().remove_volumes(&volumes)
    }
}

/// The volume of the warm cache built from `base` in run `run_id`, labelled as the run's (so the
/// cleanup of a run that died removes it too).
fn volume_name(run_id: &str, base: &str) -> String {
    format!("{}-cache", sandbox::container_name(run_id, &warm_key(base)))
}

/// The container key of the warm-up on `base`.
pub fn warm_key(base: &str) -> String {
    format!("warm-{}", short(base))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandcastle_core::secrets::{EnvFile, Redactor};
    use std::process::Command;

    /// The volumes labelled as run `run_id`'s.
    fn volumes_of(run_id: &str) -> Vec<String> {
        let out = Command::new("docker")
            .args(["volume", "ls", "-q", "--filter"])
            .arg(format!("label={}={run_id}", sandbox::RUN_LABEL))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }

    /// Real Docker volumes: one warm-up per base commit, however often it is asked for; the old
    /// base's volume goes when the base moves; a failed warm-up leaves no volume and is not tried
    /// again for that base; the run's end takes the last one.
    #[test]
    fn one_warm_up_per_base_and_the_old_volume_goes_when_the_base_moves() {
        if sandbox::provider().answers().is_err() {
            return;
        }
        let run_id = format!("test-warm-{}", std::process::id());
        let project = tempfile::tempdir().unwrap();
        let progress = Progress::new(Redactor::new(&EnvFile { vars: Vec::new() }));
        let cache = WarmCache::default();
        let (a, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        let mut warm_ups = Vec::new();
        let mut ask = |base: &str, result: fn() -> Result<WarmUp>| {
            cache.volume(&run_id, project.path(), base, &progress, |volume| {
                warm_ups.push(volume.to_string());
                result()
            })
        };

        let first = ask(&a, || Ok(WarmUp::Built)).expect("built");
        assert_eq!(ask(&a, || Ok(WarmUp::Built)), Some(first.clone()));
        assert_eq!(volumes_of(&run_id), std::slice::from_ref(&first));
        let moved = ask(&b, || Ok(WarmUp::Built)).expect("built");
        assert_ne!(moved, first);
        assert_eq!(volumes_of(&run_id), std::slice::from_ref(&moved));
        assert_eq!(
            ask(&c, || Ok(WarmUp::StepFailed("cargo test".into()))),
            None
        );
        assert_eq!(ask(&c, || Ok(WarmUp::Built)), None);
        assert!(volumes_of(&run_id).is_empty(), "{:?}", volumes_of(&run_id));
        let back = ask(&a, || Ok(WarmUp::Built)).expect("built");
        assert_eq!(
            warm_ups,
            [first, moved, volume_name(&run_id, &c), back.clone()]
        );
        assert_eq!(volumes_of(&run_id), [back]);

        cache.remove().unwrap();
        assert!(volumes_of(&run_id).is_empty(), "{:?}", volumes_of(&run_id));
    }
}
