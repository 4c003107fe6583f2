//! No import cycles between the files of any crate: a file may use another only if that one,
//! directly or not, does not use it back. Rooms stay one-way, so a newcomer can read them in
//! order and a change to a leaf cannot ripple back up.
//!
//! A small reader of `use` lines and inline paths (`crate::…`, `super::…`, `self::…`), resolved
//! to the deepest file they reach, is enough: the crates only name their own modules that way.
//! A parent's `mod child;` is containment, not a use; `#[cfg(test)] mod tests { … }` at the end of
//! a file is left out (tests may reach anywhere).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates checked, by their source directory, and their root file.
const CRATES: &[(&str, &str)] = &[
    ("src", "lib.rs"),
    ("instance/src", "lib.rs"),
    ("backup-store/src", "lib.rs"),
    ("backup-agent/src", "lib.rs"),
    ("kubectl-tusk/src", "main.rs"),
    ("testkit/src", "lib.rs"),
    ("e2e/src", "lib.rs"),
];

#[test]
fn no_crate_has_an_import_cycle_between_its_files() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for (dir, root) in CRATES {
        let graph = Graph::read(&workspace.join(dir), root);
        assert!(
            graph.edges.len() > 3,
            "{dir}: only {} files read",
            graph.edges.len()
        );
        found.extend(graph.cycles().into_iter().map(|c| format!("{dir}: {c}")));
    }
    assert!(
        found.is_empty(),
        "import cycles (each file uses the next):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_reader_sees_the_paths_rust_writes() {
    let text = "use super::{a, b::{C, d}};\nuse crate::x::y as z;\nfn f() { crate::w::v(); super::super::q::r(); }\n#[cfg(test)]\nmod tests { use crate::t::u; }";
    let mut paths: Vec<String> = module_paths(text)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "crate::w::v",
            "crate::x::y",
            "super::a",
            "super::b::C",
            "super::b::d",
            "super::super::q::r"
        ]
    );
}

#[test]
fn a_cycle_through_a_nested_module_is_found() {
    let dir = std::env::temp_dir().join(format!("tusk-module-graph-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("room")).expect("a scratch dir");
    let files = [
        ("lib.rs", "pub mod a;\npub mod room;\n"),
        ("a.rs", "use crate::room::b::Thing;\n"),
        ("room/mod.rs", "pub mod b;\npub mod c;\n"),
        ("room/b.rs", "use super::c;\n"),
        ("room/c.rs", "fn f() { crate::a::g(); }\n"),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("a scratch file");
    }
    let cycles = Graph::read(&dir, "lib.rs").cycles();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(cycles, ["a.rs -> room/b.rs -> room/c.rs -> a.rs"]);
}

/// Files of one crate and the files each uses, by path relative to the crate's source dir.
struct Graph {
    edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

impl Graph {
    fn read(src: &Path, root: &str) -> Self {
        let mut edges = BTreeMap::new();
        for file in rust_files(src) {
            let relative = file.strip_prefix(src).expect("under src").to_path_buf();
            let text = std::fs::read_to_string(&file).expect("readable source");
            let module = module_of(&relative, root);
            let uses: BTreeSet<PathBuf> = module_paths(&text)
                .into_iter()
                .filter_map(|path| resolve(src, root, &module, &path))
                .filter(|target| *target != relative)
                .collect();
            edges.insert(relative, uses);
        }
        Self { edges }
    }

    /// Every cycle, as `a.rs -> b.rs -> a.rs`, one per strongly connected set of files.
    fn cycles(&self) -> Vec<String> {
        let mut reported = BTreeSet::new();
        let mut cycles = Vec::new();
        for start in self.edges.keys() {
            if reported.contains(start) {
                continue;
            }
            if let Some(cycle) = self.cycle_through(start) {
                reported.extend(cycle.iter().cloned());
                let names: Vec<String> = cycle.iter().map(|p| p.display().to_string()).collect();
                cycles.push(format!("{} -> {}", names.join(" -> "), names[0]));
            }
        }
        cycles
    }

    /// The shortest path from `start` back to itself (breadth first), if any.
    fn cycle_through(&self, start: &PathBuf) -> Option<Vec<PathBuf>> {
        let mut came_from: BTreeMap<&PathBuf, &PathBuf> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(file) = queue.pop_front() {
            for next in self.edges.get(file).into_iter().flatten() {
                if next == start {
                    let mut path = vec![file.clone()];
                    let mut at = file;
                    while at != start {
                        at = came_from[at];
                        path.push(at.clone());
                    }
                    path.reverse();
                    return Some(path);
                }
                if !came_from.contains_key(next) && self.edges.contains_key(next) {
                    came_from.insert(next, file);
                    queue.push_back(next);
                }
            }
        }
        None
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("readable dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The module path of a file: `clusters/ha/mod.rs` → `[clusters, ha]`.
fn module_of(relative: &Path, root: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    if last != "mod.rs" && last != root {
        parts.push(last.trim_end_matches(".rs").to_owned());
    }
    parts
}

/// The file a path reaches: the deepest module file along it.
fn resolve(src: &Path, root: &str, module: &[String], path: &[String]) -> Option<PathBuf> {
    let mut at: Vec<String> = match path.first()?.as_str() {
        "crate" => Vec::new(),
        "super" | "self" => module.to_vec(),
        _ => return None,
    };
    let mut rest = &path[1..];
    if path[0] == "super" {
        at.pop()?;
    }
    while rest.first().is_some_and(|p| p == "super") {
        at.pop()?;
        rest = &rest[1..];
    }
    let file_of = |module: &[String]| -> Option<PathBuf> {
        if module.is_empty() {
            return Some(PathBuf::from(root));
        }
        let base: PathBuf = module.iter().collect();
        let flat = base.with_extension("rs");
        let nested = base.join("mod.rs");
        [flat, nested].into_iter().find(|f| src.join(f).is_file())
    };
    let mut found = file_of(&at)?;
    for segment in rest {
        at.push(segment.clone());
        match file_of(&at) {
            Some(file) => found = file,
            None => break,
        }
    }
    Some(found)
}

/// Every `crate::`, `super::` and `self::` path in `text`, with `use` trees expanded; the
/// trailing `#[cfg(test)]` module is left out.
fn module_paths(text: &str) -> Vec<Vec<String>> {
    let code = strip_comments(text);
    let code = match code.find("#[cfg(test)]\nmod tests") {
        Some(at) => &code[..at],
        None => &code[..],
    };
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b':';
        if starts_word && code[i..].starts_with("use ") {
            let end = code[i..].find(';').map_or(code.len(), |e| i + e);
            expand_tree(code[i + 4..end].trim(), &[], &mut paths);
            i = end;
            continue;
        }
        if starts_word {
            for head in ["crate::", "super::", "self::"] {
                if code[i..].starts_with(head) {
                    let end = code[i..]
                        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                        .map_or(code.len(), |e| i + e);
                    let path: Vec<String> = code[i..end]
                        .split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect();
                    paths.push(path);
                    i = end;
                    break;
                }
            }
        }
        i += 1;
    }
    paths.retain(|p| {
        matches!(
            p.first().map(String::as_str),
            Some("crate" | "super" | "self")
        )
    });
    paths
}

/// Expands a use tree (`a::{b, c::{d, e}}`) into its paths, each prefixed with `prefix`.
fn expand_tree(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(inner) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        for part in split_top(inner) {
            expand_tree(part, prefix, out);
        }
        return;
    }
    match tree.find("::{") {
        Some(at) if !tree[..at].contains('{') => {
            let mut next = prefix.to_vec();
            next.extend(tree[..at].split("::").map(|s| s.trim().to_owned()));
            expand_tree(&tree[at + 2..], &next, out);
        }
        _ => {
            let head = tree.split(" as ").next().unwrap_or(tree);
            let mut path = prefix.to_vec();
            path.extend(
                head.split("::")
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty() && s != "*" && s != "self"),
            );
            out.push(path);
        }
    }
}

/// `inner` split at its top-level commas.
fn split_top(inner: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut from) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[from..]);
    parts
}

/// `text` without comments (doc comments name modules in prose), string or char literals.
fn strip_comments(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '/' if next == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '/' if next == Some('*') => {
                while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
                continue;
            }
            'r' if next == Some('#') || next == Some('"') => {
                let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
                if chars.get(i + 1 + hashes) == Some(&'"') {
                    let closing: String = std::iter::once('"')
                        .chain(std::iter::repeat_n('#', hashes))
                        .collect();
                    let rest: String = chars[i + 2 + hashes..].iter().collect();
                    let skip = rest
                        .find(&closing)
                        .map_or(rest.len(), |at| at + closing.len());
                    i += 2 + hashes + rest[..skip].chars().count();
                    out.push_str("\"\"");
                    continue;
                }
                out.push(c);
            }
            '"' => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                out.push_str("\"\"");
            }
            '\'' if next == Some('\\') => {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
            }
            '\'' if chars.get(i + 2) == Some(&'\'') => i += 2,
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
