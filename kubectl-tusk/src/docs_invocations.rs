//! Every `kubectl tusk` command the documentation shows in a code block parses with today's
//! arguments: the README, the book and the samples cannot teach a flag that no longer exists.
//! Usage lines mark optional parts with `[...]`: each is checked with and without them.

use std::path::{Path, PathBuf};

use clap::Parser;

use crate::Cli;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn documents() -> Vec<PathBuf> {
    let mut files = vec![repository().join("README.md")];
    let mut dirs = vec![repository().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files
}

/// The `kubectl tusk …` commands in `text`'s fenced code blocks, without a prompt or a trailing
/// `# comment`.
fn invocations(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = vec![];
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(at) = line.find("kubectl tusk ").filter(|_| fenced) else {
            continue;
        };
        let command = &line[at + "kubectl tusk ".len()..];
        let command = command.split(" #").next().unwrap_or_default();
        out.push(command.trim().to_owned());
    }
    out
}

/// Shell words, with single and double quotes.
fn words(command: &str) -> Vec<String> {
    let (mut out, mut word, mut quote, mut started) = (vec![], String::new(), None, false);
    for c in command.chars() {
        match (quote, c) {
            (None, '\'' | '"') => (quote, started) = (Some(c), true),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if started {
                    out.push(std::mem::take(&mut word));
                }
                started = false;
            }
            (_, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(word);
    }
    out
}

/// The command with its optional `[...]` parts left out, and with them in.
fn variants(command: &str) -> [String; 2] {
    let mut without = String::new();
    let mut depth = 0;
    for c in command.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            c if depth == 0 => without.push(c),
            _ => {}
        }
    }
    [without, command.replace(['[', ']'], "")]
}

#[test]
fn every_kubectl_tusk_command_in_the_documentation_parses() {
    let mut checked = 0;
    let mut refused = vec![];
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for command in invocations(&text) {
            for variant in variants(&command) {
                let args = std::iter::once("kubectl-tusk".to_owned()).chain(words(&variant));
                checked += 1;
                if let Err(e) = Cli::try_parse_from(args) {
                    let first = e.to_string().lines().next().unwrap_or_default().to_owned();
                    refused.push(format!(
                        "{}: kubectl tusk {variant}: {first}",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(
        checked >= 10,
        "only {checked} commands found in the documentation"
    );
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}

#[test]
fn a_usage_line_is_read_with_and_without_its_options() {
    let text = "```console\n$ kubectl tusk psql shop [--replica] [-- -c 'SELECT 1']   # note\n```\n\
                `kubectl tusk psql` in prose is not a command\n";
    let found = invocations(text);
    assert_eq!(found, ["psql shop [--replica] [-- -c 'SELECT 1']"]);
    let [short, long] = variants(&found[0]);
    assert_eq!(words(&short), ["psql", "shop"]);
    assert_eq!(
        words(&long),
        ["psql", "shop", "--replica", "--", "-c", "SELECT 1"]
    );
}
