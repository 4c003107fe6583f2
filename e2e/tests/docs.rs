//! What the documentation shows works as shown: every manifest in the README, the book
//! (`docs/`) and `samples/` is accepted by the API server with Tusk's CRDs (a server-side dry
//! run: schema, CEL rules and admission, nothing stored), and applying the CRDs and `deploy/`
//! again draws no warning. (The first install on a fresh API server, where a warning about the
//! CRDs shows, fails in e2e/local/operator.sh on any warning; the chart's own dry run is in
//! helm.rs, under the same rule; the `kubectl tusk` commands the docs show are parsed by the
//! plugin's tests.)

use std::path::{Path, PathBuf};

use tusk_e2e::apply::{documents, dry_run_yaml};
use tusk_e2e::kubectl::{kubectl, kubectl_without_warnings};
use tusk_e2e::{Context, Ctx, Result, ensure, say, scenario};

/// A manifest of a document: where it is and its YAML.
struct Manifest {
    at: String,
    yaml: String,
}

/// The ```yaml blocks of a Markdown text, except those marked `<!-- fragment -->` on the line
/// before (a part of a manifest, shown to explain one field).
fn yaml_blocks(file: &str, text: &str) -> (Vec<Manifest>, usize) {
    let (mut out, mut fragments) = (vec![], 0);
    let mut lines = text.lines().enumerate().peekable();
    let mut previous = "";
    while let Some((number, line)) = lines.next() {
        let opening = line.trim_start();
        if opening.starts_with("```") && !opening.trim_end().eq("```") {
            let yaml = opening.trim_start_matches('`').trim() == "yaml";
            let fragment = previous.trim() == "<!-- fragment -->";
            let mut body = String::new();
            for (_, line) in lines.by_ref() {
                if line.trim_start().starts_with("```") {
                    break;
                }
                body.push_str(line);
                body.push('\n');
            }
            match (yaml, fragment) {
                (true, false) => out.push(Manifest {
                    at: format!("{file}:{}", number + 1),
                    yaml: body,
                }),
                (true, true) => fragments += 1,
                _ => {}
            }
            previous = "";
            continue;
        }
        if !line.trim().is_empty() {
            previous = line;
        }
    }
    (out, fragments)
}

fn markdown_under(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            markdown_under(&path, files);
        } else if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
}

#[scenario]
async fn every_documented_manifest_is_accepted(ctx: Ctx) -> Result {
    let repo = &ctx.settings.repo;
    let mut markdown = vec![repo.join("README.md")];
    markdown_under(&repo.join("docs"), &mut markdown);
    markdown.sort();
    let (mut manifests, mut fragments) = (vec![], 0);
    for file in &markdown {
        let text = std::fs::read_to_string(file).context(format!("reading {}", file.display()))?;
        let name = file
            .strip_prefix(repo)
            .unwrap_or(file)
            .display()
            .to_string();
        let (found, marked) = yaml_blocks(&name, &text);
        manifests.extend(found);
        fragments += marked;
    }
    for file in ctx.sample_files()? {
        let yaml = std::fs::read_to_string(&file).context(format!("reading {}", file.display()))?;
        let at = file
            .strip_prefix(repo)
            .unwrap_or(&file)
            .display()
            .to_string();
        manifests.push(Manifest { at, yaml });
    }
    ensure!(
        manifests.len() >= 10,
        "only {} manifests found in the README, docs/ and samples/",
        manifests.len()
    );
    let mut objects = 0;
    for manifest in &manifests {
        let accepted = dry_run_yaml(&ctx.client, &ctx.ns, &manifest.yaml)
            .await
            .context(format!("the manifest at {}", manifest.at))?;
        ensure!(
            !accepted.is_empty(),
            "the manifest at {} is empty",
            manifest.at
        );
        objects += accepted.len();
    }
    say(format!(
        "{} manifests ({objects} objects) from {} Markdown files and samples/ accepted by a \
         server-side dry run; {fragments} blocks marked as fragments",
        manifests.len(),
        markdown.len()
    ));
    Ok(())
}

#[scenario]
async fn installing_draws_no_warning(ctx: Ctx) -> Result {
    let repo = &ctx.settings.repo;
    let crd = |file: &str| repo.join("crds").join(file).display().to_string();
    let (postgresqls, backups) = (
        crd("postgresqls.tusk.dev.yaml"),
        crd("backups.tusk.dev.yaml"),
    );
    let dry_run = [
        "apply",
        "--server-side",
        "--dry-run=server",
        "--field-manager=tusk-e2e",
    ];
    let files = ["-f", &postgresqls, "-f", &backups, "-o", "name"];
    let applied = kubectl_without_warnings(&[&dry_run[..], &files].concat()).await?;
    // deploy/ as kustomize renders it, its namespaced objects moved into the scenario's
    // namespace (a dry run cannot create the namespace the others go into).
    let rendered = kubectl(&["kustomize", &repo.join("deploy").display().to_string()]).await?;
    let mut stream = String::new();
    let mut kinds = vec![];
    for mut doc in documents(&rendered)? {
        if doc["kind"] == "Namespace" {
            continue;
        }
        if doc["metadata"]["namespace"].is_string() {
            doc["metadata"]["namespace"] = ctx.ns.clone().into();
        }
        kinds.push(doc["kind"].as_str().unwrap_or_default().to_owned());
        stream.push_str("---\n");
        stream.push_str(&serde_json::to_string(&doc).context("a rendered object")?);
        stream.push('\n');
    }
    let file = std::env::temp_dir().join(format!("{}-deploy.yaml", ctx.ns));
    std::fs::write(&file, stream).context("writing the rendered deploy/")?;
    let path = file.display().to_string();
    let deployed =
        kubectl_without_warnings(&[&dry_run[..], &["-f", &path, "-o", "name"]].concat()).await;
    let _ = std::fs::remove_file(&file);
    let deployed = deployed?;
    ensure!(
        kinds.iter().any(|k| k == "Deployment") && deployed.lines().count() == kinds.len(),
        "deploy/ rendered {kinds:?}, the dry run accepted {deployed}"
    );
    say(format!(
        "crds/ ({} objects) and deploy/ ({} objects) applied (server-side dry run) without a warning",
        applied.lines().count(),
        kinds.len()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_are_left_out_and_counted() {
        let text = "# A\n\n```yaml\nkind: A\n```\n\n<!-- fragment -->\n```yaml\nspec: {}\n```\n\
                    ```console\n$ kubectl get pg\n```\n";
        let (found, fragments) = yaml_blocks("x.md", text);
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].at.as_str(), found[0].yaml.as_str()),
            ("x.md:3", "kind: A\n")
        );
        assert_eq!(fragments, 1);
    }
}
