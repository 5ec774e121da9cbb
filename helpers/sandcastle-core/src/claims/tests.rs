//! Claims against the Forgejo-compatible server, over HTTP, without Docker.
use super::*;
use fake_forge::FakeForge;
use std::sync::{Arc, Barrier};

const REPO: &str = "bot/demo";

fn forge() -> (FakeForge, String) {
    let forge = FakeForge::start();
    let token = forge.add_user("bot");
    forge.add_user("mallory");
    forge.create_repo("bot", "demo", "main").unwrap();
    (forge, token)
}

/// Three orchestrators (one login, as on a shared bot account) claim the same issue at the same
/// moment, twenty times over: exactly one wins every round, and the losers leave no claim behind.
#[test]
fn exactly_one_of_three_racing_claims_wins_every_round() {
    let (fake, token) = forge();
    let ttl = Duration::from_secs(60);
    for round in 0..20 {
        let number = fake
            .create_issue(REPO, "bot", &format!("round {round}"), "", &[])
            .unwrap();
        let start = Arc::new(Barrier::new(3));
        let racers: Vec<_> = ["host-a", "host-b", "host-c"]
            .into_iter()
            .map(|id| {
                let client = Forge::new(fake.url(), REPO, &token);
                let start = Arc::clone(&start);
                std::thread::spawn(move || {
                    start.wait();
                    match claim(&client, "bot", id, ttl, number).unwrap() {
                        Claimed::Ours(lease) => Some((id, lease)),
                        Claimed::Theirs(_) => None,
                    }
                })
            })
            .collect();
        let winners: Vec<_> = racers
            .into_iter()
            .filter_map(|racer| racer.join().unwrap())
            .collect();
        assert_eq!(winners.len(), 1, "round {round}");
        let client = Forge::new(fake.url(), REPO, &token);
        let claims = live(
            &client.comments(number).unwrap(),
            "bot",
            jiff::Timestamp::now(),
        );
        assert_eq!(
            claims.len(),
            1,
            "round {round}: only the winner's claim stays"
        );
        assert_eq!(claims[0].holder, winners[0].0);
        drop(winners);
        assert!(client.comments(number).unwrap().is_empty(), "released");
    }
    assert!(fake.schema_violations().is_empty());
}

#[test]
fn a_lease_is_renewed_while_held_and_a_lapsed_one_frees_the_work() {
    let (fake, token) = forge();
    let client = Forge::new(fake.url(), REPO, &token);
    let number = fake.create_issue(REPO, "bot", "work", "", &[]).unwrap();
    let ttl = Duration::from_secs(2);
    let Claimed::Ours(lease) = claim(&client, "bot", "host-a", ttl, number).unwrap() else {
        panic!("nobody else holds it");
    };
    // Past its first expiry, the renewed lease still holds against another host.
    std::thread::sleep(Duration::from_secs(3));
    match claim(&client, "bot", "host-b", ttl, number).unwrap() {
        Claimed::Theirs(theirs) => assert_eq!(theirs.holder, "host-a"),
        Claimed::Ours(_) => panic!("the renewed lease was taken"),
    }
    drop(lease);
    assert!(client.comments(number).unwrap().is_empty());

    // A holder that crashed: its claim is left, and lapses.
    let lapsed = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(1);
    client
        .comment(
            number,
            &Post::new("").marked(&format!(
                "{MARKER}{{\"id\":\"host-a\",\"until\":\"{lapsed}\"}}{END}"
            )),
        )
        .unwrap();
    let Claimed::Ours(lease) = claim(&client, "bot", "host-b", ttl, number).unwrap() else {
        panic!("the lapsed claim still held");
    };
    assert_eq!(
        client.comments(number).unwrap().len(),
        1,
        "the lapsed claim was cleared"
    );
    drop(lease);
    assert!(client.comments(number).unwrap().is_empty());
}

/// A restarted orchestrator on the same host has a new default id (`<host>-<pid>`); its crashed
/// predecessor's claim does not hold it back. A stable custom id finds its own claim its own.
#[test]
fn a_dead_predecessor_on_this_host_or_an_earlier_run_of_the_same_id_does_not_block() {
    let (fake, token) = forge();
    let client = Forge::new(fake.url(), REPO, &token);
    let number = fake.create_issue(REPO, "bot", "work", "", &[]).unwrap();
    let ttl = Duration::from_secs(600);
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let predecessor = format!("{}-{}", sandbox::host_name(), gone.id());
    client.comment(number, &body(&predecessor, ttl)).unwrap();
    client.comment(number, &body("builder-7", ttl)).unwrap();
    let comments = client.comments(number).unwrap();
    let holders: Vec<String> = live(&comments, "bot", jiff::Timestamp::now())
        .into_iter()
        .map(|c| c.holder)
        .collect();
    assert_eq!(
        holders,
        ["builder-7"],
        "the dead predecessor's claim is not live"
    );

    // `builder-7` starts again: its earlier claim is its own, and the stale ones are cleared.
    let Claimed::Ours(lease) = claim(&client, "bot", "builder-7", ttl, number).unwrap() else {
        panic!("an earlier run's claim of the same id blocked it");
    };
    assert_eq!(client.comments(number).unwrap().len(), 1);
    drop(lease);
    assert!(client.comments(number).unwrap().is_empty());
}

#[test]
fn only_the_orchestrators_own_login_can_claim() {
    let (fake, token) = forge();
    let number = fake.create_issue(REPO, "bot", "work", "", &[]).unwrap();
    let until = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3600);
    fake.create_comment_as(
        REPO,
        number,
        "mallory",
        &format!("{MARKER}{{\"id\":\"evil\",\"until\":\"{until}\"}}{END}"),
    )
    .unwrap();
    let client = Forge::new(fake.url(), REPO, &token);
    assert!(held_by_other(&client.comments(number).unwrap(), "bot", "host-a").is_none());
    assert!(matches!(
        claim(&client, "bot", "host-a", Duration::from_secs(60), number).unwrap(),
        Claimed::Ours(_)
    ));
}
