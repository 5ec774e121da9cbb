//! The user guide (`docs/guide`, an mdBook) holds together, checked without building it: every page
//! is in `SUMMARY.md`; every relative link of the guide, README.md and ARCHITECTURE.md names a file
//! that exists (the guide's inside the book, which is all the built guide has) and, with
//! `#anchor`, a heading of that page; and the troubleshooting page has a section for each line of
//! `sandcastle doctor`, and none for a line it no longer prints.
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn guide_src() -> PathBuf {
    repository().join("docs/guide/src")
}

/// The lines of `markdown` outside fenced code blocks.
fn prose_lines(markdown: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    markdown.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// `line` without its inline code spans.
fn without_code(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join("")
}

/// The targets of the inline links `[text](target)` in `markdown`'s prose.
fn links(markdown: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in prose_lines(markdown) {
        let line = without_code(line);
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let end = after.find(')').unwrap_or(after.len());
            found.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    found
}

/// The anchors mdBook gives `markdown`'s headings: the text without markup, lower-cased, spaces as
/// `-`, only letters, digits, `-` and `_` kept; a repeated one gets `-1`, `-2`, ….
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in prose_lines(markdown) {
        let Some(text) = line.trim_start_matches('#').strip_prefix(' ') else {
            continue;
        };
        if !line.starts_with('#') {
            continue;
        }
        let id: String = text
            .trim()
            .chars()
            .filter_map(|c| match c {
                c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_ascii_lowercase()),
                c if c.is_whitespace() => Some('-'),
                _ => None,
            })
            .collect();
        let mut unique = id.clone();
        let mut repeat = 0;
        while found.contains(&unique) {
            repeat += 1;
            unique = format!("{id}-{repeat}");
        }
        found.insert(unique);
    }
    found
}

/// `path` with `.` and `..` resolved, without touching the file system.
fn normalized(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every broken relative link of the Markdown file `page`, one line each; `inside` is the folder
/// its links must stay in.
fn broken_links(page: &Path, inside: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(page).unwrap();
    let mut broken = Vec::new();
    for link in links(&text) {
        if link.contains("://") || link.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = link.split_once('#').unwrap_or((&link, ""));
        let target = if file.is_empty() {
            page.to_path_buf()
        } else {
            normalized(&page.parent().unwrap().join(file))
        };
        let name = page.display();
        if !target.starts_with(normalized(inside)) {
            broken.push(format!("{name}: `{link}` leaves {}", inside.display()));
        } else if !target.exists() {
            broken.push(format!("{name}: `{link}`: no such file"));
        } else if !anchor.is_empty() {
            let target_text = std::fs::read_to_string(&target).unwrap_or_default();
            if !anchors(&target_text).contains(anchor) {
                broken.push(format!("{name}: `{link}`: no heading with that anchor"));
            }
        }
    }
    broken
}

fn guide_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(guide_src())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    pages
}

#[test]
fn every_page_of_the_guide_is_in_its_summary() {
    let summary = std::fs::read_to_string(guide_src().join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    let missing: Vec<String> = guide_pages()
        .iter()
        .map(|page| page.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "SUMMARY.md" && !listed.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "pages of docs/guide/src missing from SUMMARY.md (mdBook would not build them): {missing:?}"
    );
}

#[test]
fn every_relative_link_of_the_guide_and_the_landing_pages_resolves() {
    let src = normalized(&guide_src());
    let mut broken = Vec::new();
    for page in guide_pages() {
        broken.extend(broken_links(&normalized(&page), &src));
    }
    let root = normalized(&repository());
    for page in ["README.md", "ARCHITECTURE.md", "docs/design/invariants.md"] {
        broken.extend(broken_links(&root.join(page), &root));
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The names of the lines `sandcastle doctor` prints: the first argument of each `.line(` and
/// `.keep(` call in doctor.rs.
fn doctor_lines() -> BTreeSet<String> {
    let source =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/doctor.rs"))
            .unwrap();
    let mut names = BTreeSet::new();
    for call in [".line(", ".keep("] {
        for (at, _) in source.match_indices(call) {
            let argument = source[at + call.len()..].trim_start();
            if let Some(quoted) = argument.strip_prefix('"') {
                names.insert(quoted[..quoted.find('"').unwrap()].to_string());
            }
        }
    }
    names
}

#[test]
fn troubleshooting_explains_every_line_of_doctor_and_no_other() {
    let page = std::fs::read_to_string(guide_src().join("troubleshooting.md")).unwrap();
    let sections: BTreeSet<String> = prose_lines(&page)
        .filter_map(|line| line.strip_prefix("## `"))
        .filter_map(|rest| rest.strip_suffix('`'))
        .map(str::to_string)
        .collect();
    let lines = doctor_lines();
    assert!(
        lines.len() >= 10,
        "doctor.rs no longer reads as expected: {lines:?}"
    );
    let unexplained: Vec<_> = lines.difference(&sections).collect();
    let stale: Vec<_> = sections.difference(&lines).collect();
    assert!(
        unexplained.is_empty() && stale.is_empty(),
        "docs/guide/src/troubleshooting.md and `sandcastle doctor` differ:\n  \
         lines without a section: {unexplained:?}\n  sections without a line: {stale:?}\n\
         add a `## `name`` section saying what the line checks and what to do, or remove it"
    );
}

#[test]
fn the_checks_read_markdown_as_mdbook_does() {
    let page = "# Asks: `sandcastle ask`\n## A (b)\n## A (b)\n```\n# not a heading\n[x](nope.md)\n```\n\
                See [y](other.md#a-b) and `[z](code.md)`.\n";
    let found: Vec<_> = anchors(page).into_iter().collect();
    assert_eq!(found, ["a-b", "a-b-1", "asks-sandcastle-ask"]);
    assert_eq!(links(page), ["other.md#a-b"]);
}
