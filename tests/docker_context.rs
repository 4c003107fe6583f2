//! The Dockerfile's build stage runs `cargo build` on the build context: every workspace member's
//! manifest and sources must survive `.dockerignore`, or `docker build` fails before compiling
//! (it did: `e2e` was ignored once it became a member).

use std::path::Path;

/// `.dockerignore` as `(pattern, excludes)` in order; the last matching line decides.
fn rules(text: &str) -> Vec<(String, bool)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.strip_prefix('!') {
            Some(p) => (p.trim_end_matches('/').to_owned(), false),
            None => (l.trim_end_matches('/').to_owned(), true),
        })
        .collect()
}

/// Whether `path` is left out of the context. Handles the plain-path patterns this repository
/// uses (a pattern names a file or a directory and everything below it); `**` patterns are not
/// interpreted and never match here.
fn ignored(rules: &[(String, bool)], path: &str) -> bool {
    let mut out = false;
    for (pattern, excludes) in rules {
        if path == pattern || path.starts_with(&format!("{pattern}/")) {
            out = *excludes;
        }
    }
    out
}

/// The `members = [...]` list of the root manifest (one line, as `cargo fmt`-free TOML has it).
fn workspace_members(manifest: &str) -> Vec<&str> {
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("a members line in Cargo.toml");
    let list = line
        .split_once('[')
        .and_then(|(_, rest)| rest.split_once(']'));
    let (list, _) = list.expect("members = [...] on one line");
    list.split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn every_workspace_member_reaches_the_docker_build() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let rules = rules(&std::fs::read_to_string(root.join(".dockerignore")).unwrap());
    let members = workspace_members(&manifest);
    assert!(members.len() > 1, "members: {members:?}");
    for member in members {
        let dir = if member == "." {
            String::new()
        } else {
            format!("{member}/")
        };
        for needed in ["Cargo.toml", "src"] {
            let path = format!("{dir}{needed}");
            assert!(!ignored(&rules, &path), ".dockerignore leaves out {path}");
        }
    }
}

#[test]
fn the_rules_are_read_as_docker_reads_them() {
    let rules = rules("target\ne2e\n!e2e/Cargo.toml\n# comment\n");
    assert!(ignored(&rules, "target/debug"));
    assert!(ignored(&rules, "e2e/tests/core.rs"));
    assert!(!ignored(&rules, "e2e/Cargo.toml"));
    assert!(!ignored(&rules, "src/lib.rs"));
}
