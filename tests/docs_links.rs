//! Every link of the documentation leads somewhere: the book (`docs/src`), the README and the
//! programs' READMEs. A relative link names a file that exists and, with a `#fragment`, a
//! heading (or `<a id>`) of that file; a link to this repository on GitHub names a file that
//! exists. mdBook itself does not check either.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Where the book links to files outside its `src` directory.
const REPOSITORY: &str = "https://github.com/tusk-operator/tusk/blob/main/";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![];
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("book") {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    for readme in ["README.md", "backup-agent/README.md", "instance/README.md"] {
        let path = root().join(readme);
        if path.exists() {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// A heading's id as mdBook (and, for these headings, GitHub) makes it: lowercase letters,
/// digits, `_` and `-` kept, whitespace made `-`, the rest dropped; a repeated id gets `-1`, `-2`.
fn heading_id(text: &str) -> String {
    text.chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a Markdown file and the links it makes.
fn read(path: &Path) -> (BTreeSet<String>, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let (mut anchors, mut links) = (BTreeSet::new(), vec![]);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(&text, Options::all()) {
        match event {
            Event::Start(Tag::Heading { id, .. }) => {
                if let Some(id) = id {
                    anchors.insert(id.to_string());
                }
                heading = Some(String::new());
            }
            Event::End(TagEnd::Heading(_)) => {
                let id = heading_id(&heading.take().unwrap_or_default());
                let n = seen.entry(id.clone()).or_default();
                anchors.insert(if *n == 0 {
                    id.clone()
                } else {
                    format!("{id}-{n}")
                });
                *n += 1;
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                for attribute in ["id=\"", "name=\""] {
                    for (at, _) in html.match_indices(attribute) {
                        let rest = &html[at + attribute.len()..];
                        if let Some(end) = rest.find('"') {
                            anchors.insert(rest[..end].to_owned());
                        }
                    }
                }
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                links.push(dest_url.to_string());
            }
            _ => {}
        }
    }
    (anchors, links)
}

#[test]
fn every_link_of_the_documentation_resolves() {
    let files = markdown_files();
    assert!(
        files.iter().any(|f| f.ends_with("docs/src/SUMMARY.md")),
        "no book: {files:?}"
    );
    let anchors: BTreeMap<PathBuf, BTreeSet<String>> = (files.iter())
        .map(|f| (f.canonicalize().unwrap(), read(f).0))
        .collect();
    let mut broken = vec![];
    for file in &files {
        let here = file.strip_prefix(root()).unwrap().display().to_string();
        for link in read(file).1 {
            if let Some(path) = link.strip_prefix(REPOSITORY) {
                let path = path.split('#').next().unwrap_or_default();
                if !root().join(path).exists() {
                    broken.push(format!("{here}: {link} (no such file in the repository)"));
                }
                continue;
            }
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (target, fragment) = match link.split_once('#') {
                Some((target, fragment)) => (target, Some(fragment)),
                None => (link.as_str(), None),
            };
            let target = if target.is_empty() {
                file.clone()
            } else {
                // mdBook serves `x.md` as `x.html`; either spelling names the same page.
                let named = file.parent().unwrap().join(target);
                let md = named.with_extension("md");
                if named.extension().is_some_and(|e| e == "html") && md.exists() {
                    md
                } else {
                    named
                }
            };
            let Ok(target) = target.canonicalize() else {
                broken.push(format!("{here}: {link} (no such file)"));
                continue;
            };
            if let Some(fragment) = fragment {
                match anchors.get(&target) {
                    Some(a) if a.contains(fragment) => {}
                    Some(_) => broken.push(format!("{here}: {link} (no such heading)")),
                    None => broken.push(format!(
                        "{here}: {link} (a fragment of a non-Markdown file)"
                    )),
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn ids_are_made_as_mdbook_makes_them() {
    assert_eq!(
        heading_id("Point-in-time recovery"),
        "point-in-time-recovery"
    );
    assert_eq!(heading_id("`kubectl tusk` status"), "kubectl-tusk-status");
    assert_eq!(heading_id("What it does (and why)"), "what-it-does-and-why");
}

/// The Rust files of every crate of the workspace, outside `target/`.
fn rust_files() -> Vec<PathBuf> {
    let mut files = vec![];
    let mut dirs = vec![root()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() && name != "target" && !name.to_string_lossy().starts_with('.') {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// Whether rustdoc would compile and run a code block with this kind: an indented block, or a
/// fenced one with no language but Rust and rustdoc's own attributes.
fn is_doctest(kind: &CodeBlockKind) -> bool {
    match kind {
        CodeBlockKind::Indented => true,
        CodeBlockKind::Fenced(info) => info.split([',', ' ']).all(|word| {
            matches!(
                word,
                "" | "rust" | "ignore" | "no_run" | "should_panic" | "compile_fail"
            ) || word.starts_with("edition")
        }),
    }
}

/// Doc tests are off in every crate (`doctest = false`: scripts/workspace-tests.sh runs the
/// test executables, not rustdoc), so an example in a doc comment would never run: none may be
/// written as one. Prose examples are fenced as `text`.
#[test]
fn no_doc_comment_holds_an_example_that_would_never_run() {
    let mut examples = vec![];
    for file in rust_files() {
        let source = std::fs::read_to_string(&file).unwrap();
        // Consecutive doc-comment lines of one kind make one Markdown document.
        let mut blocks: Vec<(usize, String)> = vec![];
        let mut previous: Option<&str> = None;
        for (number, line) in source.lines().enumerate() {
            let trimmed = line.trim_start();
            let marker = ["//!", "///"]
                .into_iter()
                .find(|m| trimmed.starts_with(m) && !trimmed.starts_with("////"));
            if let Some(m) = marker {
                let text = &trimmed[m.len()..];
                if previous != Some(m) {
                    blocks.push((number + 1, String::new()));
                }
                if let Some((_, doc)) = blocks.last_mut() {
                    doc.push_str(text.strip_prefix(' ').unwrap_or(text));
                    doc.push('\n');
                }
            }
            previous = marker;
        }
        for (line, doc) in blocks {
            for event in Parser::new(&doc) {
                if let Event::Start(Tag::CodeBlock(kind)) = event
                    && is_doctest(&kind)
                {
                    let here = file.strip_prefix(root()).unwrap_or(&file).display();
                    examples.push(format!("{here}: the doc comment from line {line}"));
                }
            }
        }
    }
    assert!(
        examples.is_empty(),
        "Rust examples in doc comments, which no test runs (fence them as `text`, or make \
         them a test):\n{}",
        examples.join("\n")
    );
}
