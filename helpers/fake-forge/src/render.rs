//! Forgejo's JSON shapes for the state's objects, with the fields a real server sends.
use serde_json::{Value, json};

use crate::git::LoggedCommit;
use crate::records::{Comment, Label, Review, ReviewComment};
use crate::state::{CommitStatus, LabelEvent, Repo, StoredIssue, User};

/// Renders objects with URLs built from the forge's root URL (Forgejo's `ROOT_URL`).
pub struct Render<'a> {
    /// Ends with `/`.
    pub root: &'a str,
}

/// Branch facts read from the bare repository for a pull request.
pub struct PullGit {
    pub head_sha: String,
    pub base_sha: String,
    pub merge_base: String,
    /// Whether the head merges into the base without conflicts.
    pub mergeable: bool,
}

impl Render<'_> {
    pub fn user(&self, id: i64, login: &str) -> Value {
        json!({
            "id": id,
            "login": login,
            "login_name": "",
            "source_id": 0,
            "full_name": "",
            "email": format!("{login}@noreply.localhost"),
            "avatar_url": format!("{}avatars/{login}", self.root),
            "html_url": format!("{}{login}", self.root),
            "language": "",
            "is_admin": false,
            "last_login": "0001-01-01T00:00:00Z",
            "created": "2024-01-01T00:00:00Z",
            "restricted": false,
            "active": true,
            "prohibit_login": false,
            "location": "",
            "pronouns": "",
            "website": "",
            "description": "",
            "visibility": "public",
            "followers_count": 0,
            "following_count": 0,
            "starred_repos_count": 0,
        })
    }

    /// A user the state may not know (an author whose account was seeded directly).
    pub fn login(&self, users: &[User], login: &str) -> Value {
        let id = users.iter().find(|u| u.login == login).map_or(-1, |u| u.id);
        self.user(id, login)
    }

    /// The repository as `caller` sees it: its `permissions` are the caller's (anonymous: read).
    pub fn repo(&self, users: &[User], repo: &Repo, caller: Option<&str>) -> Value {
        let permission = caller.map_or("read", |login| repo.permission_of(login));
        let admin = matches!(permission, "owner" | "admin");
        let push = admin || permission == "write";
        let full_name = format!("{}/{}", repo.owner, repo.name);
        let open = |pull: bool| {
            repo.issues
                .iter()
                .filter(|i| !i.closed && i.pull.is_some() == pull)
                .count()
        };
        json!({
            "id": repo.id,
            "owner": self.login(users, &repo.owner),
            "name": repo.name,
            "full_name": full_name,
            "description": "",
            "empty": false,
            "private": false,
            "fork": repo.parent.is_some(),
            "template": false,
            "parent": null,
            "mirror": false,
            "size": 0,
            "language": "",
            "languages_url": format!("{}api/v1/repos/{full_name}/languages", self.root),
            "html_url": format!("{}{full_name}", self.root),
            "url": format!("{}api/v1/repos/{full_name}", self.root),
            "link": "",
            "ssh_url": format!("ssh://git@localhost/{full_name}.git"),
            "clone_url": format!("{}{full_name}.git", self.root),
            "original_url": "",
            "website": "",
            "stars_count": 0,
            "forks_count": 0,
            "watchers_count": 0,
            "open_issues_count": open(false),
            "open_pr_counter": open(true),
            "release_counter": 0,
            "default_branch": repo.default_branch,
            "archived": false,
            "created_at": repo.created,
            "updated_at": repo.created,
            "archived_at": "1970-01-01T00:00:00Z",
            "permissions": {"admin": admin, "push": push, "pull": true},
            "has_issues": true,
            "internal_tracker": {
                "enable_time_tracker": false,
                "allow_only_contributors_to_track_time": true,
                "enable_issue_dependencies": true,
            },
            "has_wiki": false,
            "globally_editable_wiki": false,
            "has_pull_requests": true,
            "has_projects": false,
            "has_releases": true,
            "has_packages": false,
            "has_actions": false,
            "ignore_whitespace_conflicts": false,
            "allow_merge_commits": true,
            "allow_rebase": true,
            "allow_rebase_explicit": true,
            "allow_squash_merge": true,
            "allow_fast_forward_only_merge": true,
            "allow_rebase_update": true,
            "default_delete_branch_after_merge": false,
            "default_merge_style": "merge",
            "default_allow_maintainer_edit": false,
            "default_update_style": "merge",
            "avatar_url": "",
            "internal": false,
            "mirror_interval": "",
            "object_format_name": "sha1",
            "mirror_updated": "0001-01-01T00:00:00Z",
            "repo_transfer": null,
            "topics": null,
            "wiki_branch": "main",
        })
    }

    pub fn label(&self, repo: &Repo, label: &Label) -> Value {
        json!({
            "id": label.id,
            "name": label.name,
            "exclusive": false,
            "is_archived": false,
            "color": label.color,
            "description": label.description,
            "url": format!("{}api/v1/repos/{}/{}/labels/{}", self.root, repo.owner, repo.name, label.id),
        })
    }

    fn labels_of(&self, repo: &Repo, issue: &StoredIssue) -> Value {
        issue
            .label_ids
            .iter()
            .filter_map(|id| repo.label(*id))
            .map(|l| self.label(repo, l))
            .collect()
    }

    fn issue_url(&self, repo: &Repo, issue: &StoredIssue) -> String {
        let kind = if issue.pull.is_some() {
            "pulls"
        } else {
            "issues"
        };
        format!(
            "{}{}/{}/{kind}/{}",
            self.root, repo.owner, repo.name, issue.number
        )
    }

    pub fn issue(&self, users: &[User], repo: &Repo, issue: &StoredIssue) -> Value {
        let html_url = self.issue_url(repo, issue);
        json!({
            "id": issue.id,
            "url": format!("{}api/v1/repos/{}/{}/issues/{}", self.root, repo.owner, repo.name, issue.number),
            "html_url": html_url,
            "number": issue.number,
            "user": self.login(users, &issue.author),
            "original_author": "",
            "original_author_id": 0,
            "title": issue.title,
            "body": issue.body,
            "ref": "",
            "assets": [],
            "labels": self.labels_of(repo, issue),
            "milestone": null,
            "assignee": null,
            "assignees": null,
            "state": if issue.closed { "closed" } else { "open" },
            "is_locked": false,
            "comments": repo.comments_on(issue.number).count(),
            "created_at": issue.created,
            "updated_at": issue.updated,
            "closed_at": issue.closed_at,
            "due_date": null,
            "pull_request": issue.pull.as_ref().map(|_| json!({
                "merged": issue.merged.is_some(),
                "merged_at": issue.merged.as_ref().map(|m| &m.at),
                "draft": false,
                "html_url": html_url,
            })),
            "repository": {
                "id": repo.id,
                "name": repo.name,
                "owner": repo.owner,
                "full_name": format!("{}/{}", repo.owner, repo.name),
            },
            "pin_order": 0,
        })
    }

    /// `head_repo` is `repo`, or the fork the head branch lives in.
    pub fn pull(
        &self,
        users: &[User],
        repo: &Repo,
        head_repo: &Repo,
        issue: &StoredIssue,
        git: &PullGit,
    ) -> Value {
        let Some(pull) = &issue.pull else {
            return self.issue(users, repo, issue);
        };
        let html_url = self.issue_url(repo, issue);
        let branch = |name: &str, sha: &str, repo: &Repo| {
            json!({
                "label": name,
                "ref": name,
                "sha": sha,
                "repo_id": repo.id,
                "repo": self.repo(users, repo, None),
            })
        };
        json!({
            "id": issue.id,
            "url": html_url,
            "number": issue.number,
            "user": self.login(users, &issue.author),
            "title": issue.title,
            "body": issue.body,
            "labels": self.labels_of(repo, issue),
            "milestone": null,
            "assignee": null,
            "assignees": null,
            "requested_reviewers": null,
            "requested_reviewers_teams": null,
            "state": if issue.closed { "closed" } else { "open" },
            "draft": false,
            "is_locked": false,
            "comments": repo.comments_on(issue.number).count(),
            "review_comments": repo.reviews_on(issue.number).map(|r| r.comments.len()).sum::<usize>(),
            "html_url": html_url,
            "diff_url": format!("{html_url}.diff"),
            "patch_url": format!("{html_url}.patch"),
            "mergeable": git.mergeable,
            "merged": issue.merged.is_some(),
            "merged_at": issue.merged.as_ref().map(|m| &m.at),
            "merge_commit_sha": issue.merged.as_ref().map(|m| &m.commit),
            "merged_by": issue.merged.as_ref().map(|m| self.login(users, &m.by)),
            "allow_maintainer_edit": false,
            "base": branch(&pull.base, &git.base_sha, repo),
            "head": branch(&pull.head, &git.head_sha, head_repo),
            "merge_base": git.merge_base,
            "due_date": null,
            "created_at": issue.created,
            "updated_at": issue.updated,
            "closed_at": issue.closed_at,
            "pin_order": 0,
            "flow": 0,
        })
    }

    pub fn comment(
        &self,
        users: &[User],
        repo: &Repo,
        issue: &StoredIssue,
        comment: &Comment,
    ) -> Value {
        let (html_url, issue_url, pull_url) = self.entry_links(repo, issue, comment.id);
        json!({
            "id": comment.id,
            "html_url": html_url,
            "pull_request_url": pull_url,
            "issue_url": issue_url,
            "user": self.login(users, &comment.author),
            "original_author": "",
            "original_author_id": 0,
            "body": comment.body,
            "assets": [],
            "created_at": comment.created,
            "updated_at": comment.updated,
        })
    }

    /// A comment's or timeline entry's `html_url`, `issue_url` and `pull_request_url` (empty on an
    /// issue).
    fn entry_links(&self, repo: &Repo, issue: &StoredIssue, id: i64) -> (String, String, String) {
        let page = self.issue_url(repo, issue);
        let issue_url = format!(
            "{}{}/{}/issues/{}",
            self.root, repo.owner, repo.name, issue.number
        );
        let pull_url = issue.pull.as_ref().map_or(String::new(), |_| page.clone());
        (format!("{page}#issuecomment-{id}"), issue_url, pull_url)
    }

    /// A comment as a timeline entry (`type` `comment`).
    pub fn comment_event(
        &self,
        users: &[User],
        repo: &Repo,
        issue: &StoredIssue,
        comment: &Comment,
    ) -> Value {
        let rendered = self.comment(users, repo, issue, comment);
        json!({
            "id": comment.id,
            "type": "comment",
            "body": comment.body,
            "user": rendered["user"],
            "html_url": rendered["html_url"],
            "issue_url": rendered["issue_url"],
            "pull_request_url": rendered["pull_request_url"],
            "created_at": comment.created,
            "updated_at": comment.updated,
        })
    }

    /// A label added (`body` `"1"`) or removed (`body` `""`), as Forgejo's timeline shows it.
    pub fn label_event(
        &self,
        users: &[User],
        repo: &Repo,
        issue: &StoredIssue,
        event: &LabelEvent,
        label: &Label,
    ) -> Value {
        let (html_url, issue_url, pull_url) = self.entry_links(repo, issue, event.id);
        json!({
            "id": event.id,
            "type": "label",
            "body": if event.added { "1" } else { "" },
            "label": self.label(repo, label),
            "user": self.login(users, &event.by),
            "html_url": html_url,
            "issue_url": issue_url,
            "pull_request_url": pull_url,
            "created_at": event.at,
            "updated_at": event.at,
        })
    }

    /// A commit as the commits API lists it (no stats, files or verification asked for).
    pub fn commit(&self, repo: &Repo, commit: &LoggedCommit) -> Value {
        let api = format!("{}api/v1/repos/{}/{}/git", self.root, repo.owner, repo.name);
        let html = format!("{}{}/{}/commit", self.root, repo.owner, repo.name);
        let person = json!({"name": commit.author, "email": commit.email, "date": commit.date});
        json!({
            "url": format!("{api}/commits/{}", commit.sha),
            "sha": commit.sha,
            "created": commit.date,
            "html_url": format!("{html}/{}", commit.sha),
            "commit": {
                "url": format!("{api}/commits/{}", commit.sha),
                "author": person,
                "committer": person,
                "message": commit.message,
                "tree": {"url": format!("{api}/trees/{}", commit.tree), "sha": commit.tree, "created": commit.date},
                "verification": null,
            },
            "author": null,
            "committer": null,
            "parents": commit.parents.iter().map(|p| json!({
                "url": format!("{api}/commits/{p}"),
                "sha": p,
                "created": commit.date,
            })).collect::<Vec<_>>(),
            "files": null,
            "stats": null,
        })
    }

    pub fn review(
        &self,
        users: &[User],
        repo: &Repo,
        issue: &StoredIssue,
        review: &Review,
    ) -> Value {
        let pull_url = self.issue_url(repo, issue);
        json!({
            "id": review.id,
            "user": self.login(users, &review.author),
            "team": null,
            "state": review.state,
            "body": review.body,
            "commit_id": review.commit_id,
            "stale": false,
            "official": matches!(review.state.as_str(), "APPROVED" | "REQUEST_CHANGES"),
            "dismissed": false,
            "comments_count": review.comments.len(),
            "submitted_at": review.submitted,
            "updated_at": review.submitted,
            "html_url": format!("{pull_url}#issuecomment-{}", review.id),
            "pull_request_url": pull_url,
        })
    }

    pub fn review_comment(
        &self,
        users: &[User],
        repo: &Repo,
        issue: &StoredIssue,
        review: &Review,
        comment: &ReviewComment,
    ) -> Value {
        let pull_url = self.issue_url(repo, issue);
        json!({
            "id": comment.id,
            "body": comment.body,
            "user": self.login(users, &comment.author),
            "resolver": null,
            "pull_request_review_id": review.id,
            "created_at": review.submitted,
            "updated_at": review.submitted,
            "path": comment.path,
            "commit_id": review.commit_id,
            "original_commit_id": review.commit_id,
            "diff_hunk": "",
            "position": comment.new_line,
            "original_position": comment.old_line,
            "html_url": format!("{pull_url}#issuecomment-{}", comment.id),
            "pull_request_url": pull_url,
        })
    }

    fn commit_url(&self, repo: &Repo, sha: &str) -> String {
        format!(
            "{}api/v1/repos/{}/{}/commits/{sha}",
            self.root, repo.owner, repo.name
        )
    }

    pub fn status(&self, users: &[User], repo: &Repo, status: &CommitStatus) -> Value {
        json!({
            "id": status.id,
            "status": status.state,
            "target_url": status.target_url,
            "description": status.description,
            "url": format!(
                "{}api/v1/repos/{}/{}/statuses/{}",
                self.root, repo.owner, repo.name, status.sha
            ),
            "context": status.context,
            "creator": self.login(users, &status.creator),
            "created_at": status.created,
            "updated_at": status.created,
        })
    }

    /// Forgejo answers a commit without statuses with an empty combined status (Go's zero values).
    pub fn combined_status(
        &self,
        users: &[User],
        repo: &Repo,
        sha: &str,
        statuses: &[&CommitStatus],
        state: Option<&str>,
    ) -> Value {
        let Some(state) = state else {
            return json!({
                "state": "", "sha": "", "total_count": 0, "statuses": null,
                "repository": null, "commit_url": "", "url": "",
            });
        };
        json!({
            "state": state,
            "sha": sha,
            "total_count": statuses.len(),
            "statuses": statuses.iter().map(|s| self.status(users, repo, s)).collect::<Vec<_>>(),
            "repository": self.repo(users, repo, None),
            "commit_url": self.commit_url(repo, sha),
            "url": format!("{}/status", self.commit_url(repo, sha)),
        })
    }
}
