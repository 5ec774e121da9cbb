//! The REST API through real HTTP: Forgejo's behaviours and the swagger checks.
mod common;

use common::Api;
use fake_forge::FakeForge;
use serde_json::{Value, json};

const REPO: &str = "/repos/alice/demo";

/// A forge with `alice` (owner) and `bob`, and the repository `alice/demo`.
fn forge() -> (FakeForge, Api, Api) {
    let forge = FakeForge::start();
    let alice = forge.add_user("alice");
    let bob = forge.add_user("bob");
    forge.create_repo("alice", "demo", "main").unwrap();
    let (alice, bob) = (Api::new(forge.url(), &alice), Api::new(forge.url(), &bob));
    (forge, alice, bob)
}

fn numbers(list: &Value) -> Vec<u64> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|i| i["number"].as_u64().unwrap())
        .collect()
}

#[test]
fn tokens_identify_users_and_unknown_tokens_are_rejected() {
    let (forge, alice, _) = forge();
    assert_eq!(alice.get("/version").status, 200);
    let me = alice.get("/user");
    assert_eq!((me.status, me.json["login"].as_str()), (200, Some("alice")));

    let stranger = Api::new(forge.url(), "0123456789abcdef");
    assert_eq!(stranger.get("/user").status, 401);
    assert_eq!(
        stranger.get(REPO).status,
        401,
        "a bad token is refused even where anonymous reads work"
    );
    let anonymous = Api::new(forge.url(), "");
    assert_eq!(anonymous.get("/user").status, 401);
    assert_eq!(anonymous.get(REPO).status, 200);
    let write = anonymous.post(&format!("{REPO}/issues"), json!({"title": "t"}));
    assert_eq!(write.status, 401);
    assert!(forge.issues("alice/demo").is_empty());
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}

#[test]
fn basic_auth_needs_the_token_owners_login() {
    let forge = FakeForge::start();
    let token = forge.add_user("alice");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let status = |login: &str| {
        use base64::Engine;
        let credentials =
            base64::engine::general_purpose::STANDARD.encode(format!("{login}:{token}"));
        let response = agent
            .get(format!("{}/api/v1/user", forge.url()))
            .header("Authorization", format!("Basic {credentials}"))
            .call()
            .unwrap();
        response.status().as_u16()
    };
    assert_eq!(status("alice"), 200);
    assert_eq!(status("mallory"), 401);
}

#[test]
fn repository_reports_its_default_branch_and_clone_url() {
    let (forge, alice, _) = forge();
    let repo = alice.get(REPO);
    assert_eq!(repo.status, 200);
    assert_eq!(repo.json["default_branch"], "main");
    assert_eq!(repo.json["full_name"], "alice/demo");
    assert_eq!(
        repo.json["clone_url"],
        format!("{}/alice/demo.git", forge.url())
    );
    assert_eq!(alice.get("/repos/alice/nope").status, 404);
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}

/// A repository's `permissions` are the caller's, as Forgejo answers them per token.
#[test]
fn repository_permissions_are_the_callers() {
    let (forge, alice, bob) = forge();
    let permissions = |api: &Api| api.get(REPO).json["permissions"].clone();
    let all = json!({"admin": true, "push": true, "pull": true});
    assert_eq!(permissions(&alice), all, "the owner");
    assert_eq!(
        permissions(&bob),
        json!({"admin": false, "push": false, "pull": true})
    );
    forge
        .add_collaborator("alice/demo", "bob", "write")
        .unwrap();
    assert_eq!(
        permissions(&bob),
        json!({"admin": false, "push": true, "pull": true})
    );
    forge
        .add_collaborator("alice/demo", "bob", "admin")
        .unwrap();
    assert_eq!(permissions(&bob), all);
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}

#[test]
fn issue_label_filter_keeps_issues_with_all_labels_and_drops_unknown_names() {
    let (forge, alice, _) = forge();
    let mut ids = Vec::new();
    for name in ["ready-for-agent", "epic"] {
        let label = alice.post(
            &format!("{REPO}/labels"),
            json!({"name": name, "color": "#00aabb"}),
        );
        assert_eq!(label.status, 201);
        assert_eq!(label.json["color"], "00aabb");
        ids.push(label.json["id"].as_i64().unwrap());
    }
    let issue = |title: &str, labels: &[i64]| {
        let created = alice.post(
            &format!("{REPO}/issues"),
            json!({"title": title, "body": "b", "labels": labels}),
        );
        assert_eq!(created.status, 201, "{}", created.json);
        created.json["number"].as_u64().unwrap()
    };
    let both = issue("both", &ids);
    let ready = issue("ready only", &ids[..1]);
    let bare = issue("no labels", &[]);

    let list = |query: &str| {
        alice
            .get(&format!("{REPO}/issues?type=issues&{query}"))
            .json
    };
    assert_eq!(numbers(&list("labels=ready-for-agent")), vec![ready, both]);
    assert_eq!(numbers(&list("labels=ready-for-agent,epic")), vec![both]);
    assert_eq!(
        numbers(&list("labels=ready-for-agent,no-such-label")),
        vec![ready, both]
    );
    assert_eq!(
        numbers(&list("labels=no-such-label")),
        vec![bare, ready, both],
        "no known name left: no filter"
    );
    assert_eq!(numbers(&list("state=closed")), Vec::<u64>::new());
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}

#[test]
fn lists_are_paged_by_30_by_default_and_at_most_50_with_total_and_links() {
    let forge = FakeForge::start_with_root_url("http://forge.example.test:3000/");
    let token = forge.add_user("alice");
    forge.create_repo("alice", "demo", "main").unwrap();
    for n in 0..55 {
        forge
            .create_issue("alice/demo", "alice", &format!("issue {n}"), "", &[])
            .unwrap();
    }
    let alice = Api::new(forge.url(), &token);
    let first = alice.get(&format!("{REPO}/issues"));
    assert_eq!(
        (first.json.as_array().unwrap().len(), first.total),
        (30, Some(55))
    );
    let link = first.link.unwrap();
    assert!(
        link.contains(
            "http://forge.example.test:3000/api/v1/repos/alice/demo/issues?page=2>; rel=\"next\""
        ),
        "{link}"
    );

    let capped = alice.get(&format!("{REPO}/issues?limit=100&page=1"));
    assert_eq!(capped.json.as_array().unwrap().len(), 50);
    let rest = alice.get(&format!("{REPO}/issues?limit=50&page=2"));
    assert_eq!(
        (rest.json.as_array().unwrap().len(), rest.total),
        (5, Some(55))
    );
    assert!(rest.link.unwrap().contains("rel=\"prev\""));
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}

#[test]
fn issue_labels_are_added_by_id_or_name_and_removed_by_id_only() {
    let (forge, alice, _) = forge();
    let ready = forge
        .create_label("alice/demo", "ready-for-agent", "#0e8a16")
        .unwrap();
    let review = forge
        .create_label("alice/demo", "in-review", "#fbca04")
        .unwrap();
    let number = forge
        .create_issue("alice/demo", "alice", "t", "", &[])
        .unwrap();
    let labels = format!("{REPO}/issues/{number}/labels");

    let by_id = alice.post(&labels, json!({"labels": [ready]}));
    assert_eq!(by_id.status, 200);
    let by_name = alice.post(&labels, json!({"labels": ["in-review", "no-such-label"]}));
    assert_eq!(by_name.status, 200);
    let names: Vec<&str> = by_name
        .json
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ready-for-agent", "in-review"]);
    assert_eq!(
        alice
            .post(&labels, json!({"labels": [ready, "in-review"]}))
            .status,
        400
    );

    assert_eq!(
        alice.delete(&format!("{labels}/in-review")).status,
        422,
        "a name is not an id"
    );
    assert_eq!(alice.delete(&format!("{labels}/{review}")).status, 204);
    assert_eq!(
        alice.delete(&format!("{labels}/{review}")).status,
        204,
        "removing an absent label is fine"
    );
    assert_eq!(forge.issues("alice/demo")[0].labels, ["ready-for-agent"]);
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}

#[test]
fn comments_are_listed_and_created() {
    let (forge, alice, bob) = forge();
    let number = forge
        .create_issue("alice/demo", "alice", "t", "", &[])
        .unwrap();
    let comments = format!("{REPO}/issues/{number}/comments");
    assert_eq!(bob.post(&comments, json!({"body": "first"})).status, 201);
    assert_eq!(alice.post(&comments, json!({"body": ""})).status, 422);
    let listed = alice.get(&comments).json;
    assert_eq!(listed[0]["body"], "first");
    assert_eq!(listed[0]["user"]["login"], "bob");
    assert_eq!(forge.comments("alice/demo", number).len(), 1);
    assert_eq!(
        alice.get(&format!("{REPO}/issues/{number}")).json["comments"],
        1
    );
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}

#[test]
fn pull_requests_share_numbers_with_issues_and_are_never_duplicated() {
    let (forge, alice, _) = forge();
    forge
        .create_label("alice/demo", "ready-for-human", "#1d76db")
        .unwrap();
    let issue = forge
        .create_issue("alice/demo", "alice", "an issue", "", &[])
        .unwrap();
    let head = forge
        .commit_file("alice/demo", "feature", "src.txt", "new\n", "Add src")
        .unwrap();

    let pulls = format!("{REPO}/pulls");
    let open = json!({"head": "feature", "base": "main", "title": "Feature", "body": "Closes #1"});
    let created = alice.post(&pulls, open.clone());
    assert_eq!(created.status, 201, "{}", created.json);
    let number = created.json["number"].as_u64().unwrap();
    assert_eq!(number, issue + 1);
    assert_eq!(created.json["head"]["ref"], "feature");
    assert_eq!(created.json["head"]["sha"], head);
    assert_eq!(alice.post(&pulls, open).status, 409);
    let missing = alice.post(
        &pulls,
        json!({"head": "nope", "base": "main", "title": "x"}),
    );
    assert_eq!(missing.status, 404);

    assert_eq!(
        alice
            .post(
                &format!("{REPO}/issues/{number}/labels"),
                json!({"labels": ["ready-for-human"]})
            )
            .status,
        200
    );
    assert_eq!(
        alice
            .post(
                &format!("{REPO}/issues/{number}/comments"),
                json!({"body": "done"})
            )
            .status,
        201
    );
    let listed = alice.get(&format!("{pulls}?state=open"));
    assert_eq!(numbers(&listed.json), vec![number]);
    assert_eq!(listed.json[0]["labels"][0]["name"], "ready-for-human");
    assert_eq!(
        numbers(&alice.get(&format!("{REPO}/issues?type=pulls")).json),
        vec![number]
    );
    assert_eq!(
        numbers(&alice.get(&format!("{REPO}/issues?type=issues")).json),
        vec![issue]
    );
    assert_eq!(
        alice.get(&format!("{REPO}/issues/{number}")).json["pull_request"]["merged"],
        false
    );
    assert_eq!(
        alice.get(&format!("{pulls}/{issue}")).status,
        404,
        "an issue is no pull request"
    );

    let moved = forge
        .commit_file("alice/demo", "feature", "src.txt", "newer\n", "Change src")
        .unwrap();
    assert_eq!(
        alice.get(&format!("{pulls}/{number}")).json["head"]["sha"],
        moved,
        "head follows the branch"
    );
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}

#[test]
fn reviews_with_inline_comments_and_the_authors_own_verdict_refused() {
    let (forge, alice, bob) = forge();
    forge
        .commit_file("alice/demo", "feature", "src.txt", "new\n", "Add src")
        .unwrap();
    let number = forge
        .create_pull("alice/demo", "alice", "feature", "main", "Feature", &[])
        .unwrap();
    let reviews = format!("{REPO}/pulls/{number}/reviews");

    let own = alice.post(
        &reviews,
        json!({"event": "REQUEST_CHANGES", "body": "mine"}),
    );
    assert_eq!(own.status, 422);
    assert_eq!(
        alice
            .post(&reviews, json!({"event": "APPROVED", "body": "mine"}))
            .status,
        422
    );
    let review = bob.post(
        &reviews,
        json!({
            "event": "REQUEST_CHANGES",
            "body": "Please rename.",
            "comments": [{"path": "src.txt", "new_position": 1, "body": "This name is unclear."}],
        }),
    );
    assert_eq!(review.status, 200, "{}", review.json);
    assert_eq!(review.json["state"], "REQUEST_CHANGES");
    let id = review.json["id"].as_i64().unwrap();

    let listed = alice.get(&reviews).json;
    assert_eq!(
        (
            listed[0]["body"].as_str(),
            listed[0]["user"]["login"].as_str()
        ),
        (Some("Please rename."), Some("bob"))
    );
    let inline = alice.get(&format!("{reviews}/{id}/comments")).json;
    assert_eq!(inline[0]["path"], "src.txt");
    assert_eq!(inline[0]["position"], 1);
    assert_eq!(inline[0]["body"], "This name is unclear.");
    let comments = alice.get(&format!("{REPO}/issues/{number}/comments")).json;
    assert_eq!(comments, json!([]), "review bodies are not issue comments");
    assert_eq!(forge.reviews("alice/demo", number)[0].comments.len(), 1);
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}

#[test]
fn requests_outside_the_swagger_are_refused_and_recorded() {
    let (forge, alice, _) = forge();
    let unknown_path = alice.get("/repos/alice/demo/nonsense");
    assert_eq!(unknown_path.status, 500);
    let wrong_field = alice.post(&format!("{REPO}/issues"), json!({"titel": "typo"}));
    assert_eq!(wrong_field.status, 500);
    assert!(
        wrong_field.json["message"]
            .as_str()
            .unwrap()
            .contains("titel"),
        "{}",
        wrong_field.json
    );
    let wrong_query = alice.get(&format!("{REPO}/issues?per_page=50"));
    assert_eq!(wrong_query.status, 500);
    let wrong_type = alice.post(&format!("{REPO}/labels"), json!({"name": "x", "color": 5}));
    assert_eq!(wrong_type.status, 500);

    let violations = forge.schema_violations();
    assert_eq!(violations.len(), 4, "{violations:?}");
    assert!(
        violations[0].contains("not an operation of Forgejo's swagger"),
        "{violations:?}"
    );
    assert!(violations[2].contains("per_page"), "{violations:?}");
    assert!(forge.issues("alice/demo").is_empty() && forge.labels("alice/demo").is_empty());
}

#[test]
fn merged_and_closed_pull_requests_the_commits_list_and_label_timelines() {
    let (forge, alice, bob) = forge();
    forge
        .create_label("alice/demo", "ready-for-agent", "#0e8a16")
        .unwrap();
    let issue = forge
        .create_issue("alice/demo", "bob", "an issue", "", &["ready-for-agent"])
        .unwrap();
    forge
        .commit_file("alice/demo", "one", "one.txt", "1\n", "Add one")
        .unwrap();
    forge
        .commit_file("alice/demo", "two", "two.txt", "2\n", "Add two")
        .unwrap();
    let one = forge
        .create_pull("alice/demo", "alice", "one", "main", "One", &[])
        .unwrap();
    let two = forge
        .create_pull("alice/demo", "alice", "two", "main", "Two", &[])
        .unwrap();

    let merge = forge.merge("alice/demo", one, "bob").unwrap();
    forge.close("alice/demo", two).unwrap();
    assert!(forge.merge("alice/demo", two, "bob").is_err(), "closed");
    let merged = alice.get(&format!("{REPO}/pulls/{one}"));
    assert_eq!(merged.json["merged"], true);
    assert_eq!(merged.json["state"], "closed");
    assert_eq!(merged.json["merge_commit_sha"], merge.as_str());
    assert_eq!(merged.json["merged_by"]["login"], "bob");
    assert!(merged.json["merged_at"].is_string() && merged.json["closed_at"].is_string());
    let closed = alice.get(&format!("{REPO}/pulls/{two}"));
    assert_eq!(closed.json["merged"], false);
    assert_eq!(closed.json["state"], "closed");
    assert!(closed.json["merged_at"].is_null());
    let as_issue = alice.get(&format!("{REPO}/issues/{one}"));
    assert_eq!(as_issue.json["pull_request"]["merged"], true);

    forge
        .commit_file(
            "alice/demo",
            "main",
            "one.txt",
            "",
            &format!("Revert \"One\"\n\nThis reverts commit {merge}.\n"),
        )
        .unwrap();
    let commits = alice.get(&format!("{REPO}/commits?sha=main&limit=2&stat=false"));
    assert_eq!(commits.status, 200, "{}", commits.json);
    assert_eq!(
        commits.total,
        Some(4),
        "initial, one, its merge, the revert"
    );
    let newest = &commits.json[0];
    assert!(
        newest["commit"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("This reverts commit {merge}.")),
        "{newest}"
    );
    assert_eq!(commits.json[1]["sha"], merge.as_str());
    assert_eq!(commits.json[1]["parents"].as_array().unwrap().len(), 2);
    assert_eq!(alice.get(&format!("{REPO}/commits?sha=nope")).status, 404);

    alice.post(
        &format!("{REPO}/issues/{issue}/comments"),
        json!({"body": "on it"}),
    );
    assert_eq!(
        bob.delete(&format!(
            "{REPO}/issues/{issue}/labels/{}",
            forge.labels("alice/demo")[0].id
        ))
        .status,
        204
    );
    let timeline = alice.get(&format!("{REPO}/issues/{issue}/timeline"));
    assert_eq!(timeline.status, 200, "{}", timeline.json);
    let kinds: Vec<(&str, &str)> = timeline
        .json
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), e["body"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [("label", "1"), ("comment", "on it"), ("label", "")]);
    assert_eq!(timeline.json[0]["label"]["name"], "ready-for-agent");
    assert_eq!(timeline.json[0]["user"]["login"], "bob");
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}

#[test]
fn commit_statuses_combine_to_the_worst_latest_state_per_context() {
    let (forge, alice, _) = forge();
    let head = forge
        .commit_file("alice/demo", "feature", "src.txt", "new\n", "Add src")
        .unwrap();
    let combined = |rev: &str| alice.get(&format!("{REPO}/commits/{rev}/status"));
    let none = combined("feature");
    assert_eq!((none.status, none.json["state"].as_str()), (200, Some("")));
    assert_eq!(none.json["total_count"], 0);

    let post = |state: &str, context: &str| {
        let body = json!({"state": state, "context": context, "description": format!("{context} says {state}"), "target_url": "http://ci.example/1"});
        alice.post(&format!("{REPO}/statuses/{head}"), body)
    };
    let created = post("pending", "ci/test");
    assert_eq!(created.status, 201, "{}", created.json);
    assert_eq!(created.json["status"], "pending");
    assert_eq!(created.json["creator"]["login"], "alice");
    assert_eq!(combined("feature").json["state"], "pending");
    post("success", "ci/lint");
    post("failure", "ci/test");
    let failing = combined(&head);
    assert_eq!(failing.json["state"], "failure");
    assert_eq!(failing.json["sha"], head.as_str());
    let contexts: Vec<(&str, &str)> = failing.json["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["context"].as_str().unwrap(),
                s["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(contexts, [("ci/lint", "success"), ("ci/test", "failure")]);
    post("success", "ci/test");
    assert_eq!(combined("feature").json["state"], "success");

    assert_eq!(post("exploded", "ci/test").status, 400);
    let unknown = alice.post(
        &format!("{REPO}/statuses/{}", "0".repeat(40)),
        json!({"state": "success"}),
    );
    assert_eq!(unknown.status, 404);
    assert_eq!(combined("no-such-branch").status, 404);
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}

#[test]
fn a_pull_request_stops_being_mergeable_when_its_base_conflicts_and_merges_with_a_merge_commit() {
    let (forge, alice, _) = forge();
    for branch in ["one", "two"] {
        forge
            .commit_file(
                "alice/demo",
                branch,
                "same.txt",
                &format!("{branch}\n"),
                branch,
            )
            .unwrap();
    }
    let open = |head: &str| {
        alice
            .post(
                &format!("{REPO}/pulls"),
                json!({"head": head, "base": "main", "title": head}),
            )
            .json["number"]
            .as_u64()
            .unwrap()
    };
    let (one, two) = (open("one"), open("two"));
    let pull = |n: u64| alice.get(&format!("{REPO}/pulls/{n}")).json;
    assert_eq!(pull(one)["mergeable"], true);
    assert_eq!(pull(two)["mergeable"], true);
    assert_eq!(alice.get(&format!("{REPO}/pulls/{one}/merge")).status, 404);

    let merged = alice.post(&format!("{REPO}/pulls/{one}/merge"), json!({"Do": "merge"}));
    assert_eq!(merged.status, 200);
    assert_eq!(alice.get(&format!("{REPO}/pulls/{one}/merge")).status, 204);
    let after = pull(one);
    assert_eq!(
        (after["merged"].as_bool(), after["state"].as_str()),
        (Some(true), Some("closed"))
    );
    assert_eq!(after["merged_by"]["login"], "alice");
    let main = forge
        .commit_file("alice/demo", "main", "other.txt", "x\n", "Other")
        .unwrap();
    assert!(main.len() == 40);
    assert_eq!(pull(two)["mergeable"], false, "both changed same.txt");
    let refused = alice.post(&format!("{REPO}/pulls/{two}/merge"), json!({"Do": "merge"}));
    assert_eq!(refused.status, 405);
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}
