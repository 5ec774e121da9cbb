//! Leases on the forge, so that several orchestrators (on several hosts) share one repository
//! without doubling work. The forge is the only coordination point.
//!
//! To claim an issue or pull request, an orchestrator posts a claim comment carrying its id and an
//! expiry, reads the comments again, and goes on only if its claim is the earliest live one in the
//! forge's comment order; otherwise it deletes its claim. Why this is correct under concurrent claims:
//! each claimant reads after its own post, so it sees its claim and every claim posted before it;
//! comment ids give every reader the same order; so at most one claimant finds itself first. The
//! holder renews its lease while it works and deletes the comment when done; a crashed holder's
//! lease expires (`[cluster] leaseTtl`). Only comments by the orchestrator's own login count, so
//! nobody else can forge or block a claim.
use crate::forge::{Comment, Forge};
use crate::forge_text::Post;
use crate::sandbox;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

const MARKER: &str = "<!-- sandcastle:claim ";
const END: &str = " -->";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Mark {
    id: String,
    until: jiff::Timestamp,
}

/// A claim that has not expired.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveClaim {
    pub comment: i64,
    pub holder: String,
    pub until: jiff::Timestamp,
}

/// Who may work on an issue or pull request.
pub enum Claimed {
    /// This orchestrator: the lease holds until it is dropped.
    Ours(Box<Lease>),
    /// Another orchestrator holds it.
    Theirs(LiveClaim),
}

/// Every claim among `comments`, live or lapsed, earliest first; only `login`'s comments count.
fn all(comments: &[Comment], login: &str) -> Vec<LiveClaim> {
    let mut claims: Vec<LiveClaim> = comments
        .iter()
        .filter(|c| c.author == login)
        .filter_map(|c| {
            let start = c.body.find(MARKER)? + MARKER.len();
            let end = start + c.body[start..].find(END)?;
            let mark: Mark = serde_json::from_str(&c.body[start..end]).ok()?;
            Some(LiveClaim {
                comment: c.id,
                holder: mark.id,
                until: mark.until,
            })
        })
        .collect();
    claims.sort_by_key(|c| c.comment);
    claims
}

/// The live claims among `comments`, earliest first; only `login`'s comments count. A claim of an
/// orchestrator of this host whose process is gone (a default id, `<host>-<pid>`) is not live: a
/// restarted orchestrator does not wait out its own crashed predecessor's lease.
pub fn live(comments: &[Comment], login: &str, now: jiff::Timestamp) -> Vec<LiveClaim> {
    let mut claims = all(comments, login);
    claims.retain(|c| c.until > now && !gone_here(&c.holder));
    claims
}

fn gone_here(holder: &str) -> bool {
    holder
        .strip_prefix(&format!("{}-", sandbox::host_name()))
        .is_some_and(|pid| pid != std::process::id().to_string() && sandbox::run_is_dead(holder))
}

/// The live claim among `comments` of an orchestrator other than `id`, if any.
pub fn held_by_other(comments: &[Comment], login: &str, id: &str) -> Option<LiveClaim> {
    live(comments, login, jiff::Timestamp::now())
        .into_iter()
        .find(|c| c.holder != id)
}

/// Claims `number` for the orchestrator `id` for `ttl`, renewed while the lease is held.
pub fn claim(forge: &Forge, login: &str, id: &str, ttl: Duration, number: u64) -> Result<Claimed> {
    if let Some(theirs) = held_by_other(&forge.comments(number)?, login, id) {
        return Ok(Claimed::Theirs(theirs));
    }
    let comment = forge.comment(number, &body(id, ttl))?;
    let comments = forge.comments(number)?;
    let now = jiff::Timestamp::now();
    let live_now = live(&comments, login, now);
    // The earliest live claim is ours, or one of an earlier run under the same id.
    match live_now.first().cloned() {
        Some(first) if first.comment == comment || first.holder == id => {
            // Lapsed claims, and older ones of this id, go, so they do not linger on the forge.
            for stale in all(&comments, login)
                .iter()
                .filter(|c| c.comment != comment && (!live_now.contains(c) || c.holder == id))
            {
                forge.delete_comment(stale.comment)?;
            }
            Ok(Claimed::Ours(Box::new(Lease::hold(
                forge.clone(),
                comment,
                id.to_string(),
                ttl,
            ))))
        }
        first => {
            forge.delete_comment(comment)?;
            match first {
                Some(theirs) => Ok(Claimed::Theirs(theirs)),
                // Our own claim is not there to read: the forge lost it; nothing is held.
                None => {
                    anyhow::bail!("the claim on #{number} did not appear on the forge; try again")
                }
            }
        }
    }
}

fn body(id: &str, ttl: Duration) -> Post {
    let until = jiff::Timestamp::now() + jiff::SignedDuration::try_from(ttl).unwrap_or_default();
    let mark = serde_json::to_string(&Mark {
        id: id.to_string(),
        until,
    })
    .expect("a mark serialises");
    Post::new(&format!(
        "sandcastle `{id}` is working on this (lease until {until}; renewed while it works).\n"
    ))
    .marked(&format!("{MARKER}{mark}{END}"))
}

/// A claim held: renewed every third of its time to live on a thread of its own (so long agent
/// turns keep it), and deleted when dropped: when the work publishes, gives up, waits for a person,
/// or fails.
pub struct Lease {
    forge: Forge,
    comment: i64,
    stop: Option<mpsc::Sender<()>>,
    renewer: Option<JoinHandle<()>>,
}

impl Lease {
    /// The claim comment this lease holds.
    pub fn comment(&self) -> i64 {
        self.comment
    }

    fn hold(forge: Forge, comment: i64, id: String, ttl: Duration) -> Lease {
        let (stop, stopped) = mpsc::channel::<()>();
        let renewing = forge.clone();
        let renewer = std::thread::spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(ttl / 3) {
                // A failed renewal is tried again at the next tick; the lease runs out only if
                // the forge stays away for the rest of it.
                let _ = renewing.edit_comment(comment, &body(&id, ttl));
            }
        });
        Lease {
            forge,
            comment,
            stop: Some(stop),
            renewer: Some(renewer),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(renewer) = self.renewer.take() {
            let _ = renewer.join();
        }
        let _ = self.forge.delete_comment(self.comment);
    }
}

#[cfg(test)]
mod tests;
