//! The status screen as text: sections of aligned columns, like `kubectl get`. Pure: a
//! [`Summary`] in, the screen out.

use std::fmt::Write;

use super::summary::{RECENT, Summary};

/// The whole screen for `summary`.
pub fn render(s: &Summary) -> String {
    let mut out = format!(
        "PostgreSQL {}/{}: {}, {}/{} instances ready, PostgreSQL {}\n",
        s.namespace, s.name, s.phase, s.ready_instances, s.instances, s.version
    );
    section(&mut out, "Conditions");
    out.push_str(&table(
        &["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"],
        s.conditions.iter().map(|c| {
            vec![
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.age.clone(),
                c.message.clone(),
            ]
        }),
    ));
    section(&mut out, "Instances");
    out.push_str(&table(
        &["NAME", "ROLE", "READY", "PHASE", "RESTARTS"],
        s.pods.iter().map(|p| {
            vec![
                p.name.clone(),
                p.role.clone(),
                p.ready.to_string(),
                p.phase.clone(),
                p.restarts.to_string(),
            ]
        }),
    ));
    section(&mut out, "Endpoints");
    out.push_str(&table(
        &["SERVICE", "ADDRESS", "PURPOSE"],
        s.endpoints
            .iter()
            .map(|e| vec![e.service.clone(), e.address.clone(), e.purpose.clone()]),
    ));
    section(&mut out, &format!("Backups (newest {RECENT})"));
    out.push_str(&table(
        &["NAME", "PHASE", "SIZE", "AGE", "VERIFIED", "ERROR"],
        s.backups.iter().map(|b| {
            vec![
                b.name.clone(),
                b.phase.clone(),
                b.size_bytes
                    .map_or_else(|| "-".to_owned(), crate::format::size),
                b.age.clone(),
                b.verification.clone().unwrap_or_else(|| "-".to_owned()),
                b.error.clone().unwrap_or_default(),
            ]
        }),
    ));
    out.push('\n');
    out.push_str(&schedule_line(s));
    out.push_str(&verification_line(s));
    section(&mut out, &format!("Warning events (newest {RECENT})"));
    out.push_str(&table(
        &["AGE", "OBJECT", "REASON", "COUNT", "MESSAGE"],
        s.warnings.iter().map(|w| {
            vec![
                w.age.clone(),
                w.object.clone(),
                w.reason.clone(),
                w.count.to_string(),
                w.message.clone(),
            ]
        }),
    ));
    out
}

fn section(out: &mut String, title: &str) {
    let _ = write!(out, "\n{title}\n");
}

fn schedule_line(s: &Summary) -> String {
    let Some(schedule) = &s.schedule else {
        return "Schedule:     none (no spec.backup)\n".to_owned();
    };
    let next = match (&schedule.next_run, &schedule.next_run_in) {
        _ if schedule.suspended => "suspended".to_owned(),
        (Some(at), Some(within)) => format!("next run {at} ({within})"),
        _ => "next run unknown".to_owned(),
    };
    let last = schedule.last_successful.as_deref().unwrap_or("none yet");
    format!(
        "Schedule:     {} (UTC), {next}; last successful backup: {last}\n",
        schedule.schedule
    )
}

fn verification_line(s: &Summary) -> String {
    let Some(v) = &s.verification else {
        return "Verification: none (no spec.backup.verify and no verified backup)\n".to_owned();
    };
    let proof = match (&v.backup, &v.verified_at) {
        (Some(backup), Some(at)) => format!("last verified backup {backup} at {at}"),
        _ => "no backup verified yet".to_owned(),
    };
    match &v.condition {
        Some(condition) => format!("Verification: {proof}; BackupVerified {condition}\n"),
        None => format!("Verification: {proof}\n"),
    }
}

/// Rows under headers, each column as wide as its widest cell; `  (none)` without rows.
fn table(headers: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let rows: Vec<Vec<String>> = rows.collect();
    if rows.is_empty() {
        return "  (none)\n".to_owned();
    }
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        // Two spaces of indent and between columns, as `kubectl get` prints.
        let mut text = String::new();
        for (cell, width) in cells.iter().zip(&widths) {
            let _ = write!(text, "  {cell:<width$}");
        }
        text.trim_end().to_owned() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in &rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}
