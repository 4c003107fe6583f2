//! The status screen as text: sections of aligned columns, like `kubectl get`. Pure: a
//! [`Summary`] in, the screen out.

use std::fmt::Write;

use super::summary::{RECENT, Summary};

/// One row of a table: every cell as it displays.
macro_rules! cells {
    ($($cell:expr),+ $(,)?) => {
        vec![$($cell.to_string()),+]
    };
}

/// The whole screen for `summary`.
pub fn render(s: &Summary) -> String {
    let mut out = format!(
        "PostgreSQL {}/{}: {}, {}/{} instances ready, PostgreSQL {}\n",
        s.namespace, s.name, s.phase, s.ready_instances, s.instances, s.version
    );
    if let Some(u) = &s.upgrade {
        let _ = writeln!(
            out,
            "Upgrading from PostgreSQL {} to {}: {} for {}: {}",
            u.from, u.to, u.phase, u.age, u.message
        );
    }
    table(
        &mut out,
        "Conditions",
        &["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"],
        s.conditions
            .iter()
            .map(|c| cells![c.type_, c.status, c.reason, c.age, c.message]),
    );
    table(
        &mut out,
        "Instances",
        &["NAME", "ROLE", "READY", "PHASE", "RESTARTS"],
        s.pods
            .iter()
            .map(|p| cells![p.name, p.role, p.ready, p.phase, p.restarts]),
    );
    table(
        &mut out,
        "Endpoints",
        &["SERVICE", "ADDRESS", "PURPOSE"],
        s.endpoints
            .iter()
            .map(|e| cells![e.service, e.address, e.purpose]),
    );
    if !s.pooler.is_empty() {
        table(
            &mut out,
            "Pooler",
            &["NAME", "MODE", "READY", "PHASE", "RESTARTS"],
            s.pooler
                .iter()
                .map(|p| cells![p.name, p.role, p.ready, p.phase, p.restarts]),
        );
    }
    if !s.declared.is_empty() {
        table(
            &mut out,
            "Roles and databases",
            &["KIND", "NAME", "STATE", "MESSAGE"],
            s.declared.iter().map(|d| {
                let message = d.message.as_deref().unwrap_or_default();
                cells![d.kind, d.name, d.state, message]
            }),
        );
    }
    table(
        &mut out,
        &format!("Backups (newest {RECENT})"),
        &["NAME", "PHASE", "SIZE", "AGE", "VERIFIED", "ERROR"],
        s.backups.iter().map(|b| {
            let size = b
                .size_bytes
                .map_or_else(|| "-".to_owned(), crate::format::size);
            let verified = b.verification.as_deref().unwrap_or("-");
            let error = b.error.as_deref().unwrap_or_default();
            cells![b.name, b.phase, size, b.age, verified, error]
        }),
    );
    out.push('\n');
    out.push_str(&schedule_line(s));
    out.push_str(&verification_line(s));
    table(
        &mut out,
        &format!("Warning events (newest {RECENT})"),
        &["AGE", "OBJECT", "REASON", "COUNT", "MESSAGE"],
        s.warnings
            .iter()
            .map(|w| cells![w.age, w.object, w.reason, w.count, w.message]),
    );
    out
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

/// A section: its title, then the rows under headers, each column as wide as its widest cell;
/// `  (none)` without rows.
fn table(out: &mut String, title: &str, headers: &[&str], rows: impl Iterator<Item = Vec<String>>) {
    let _ = write!(out, "\n{title}\n");
    let rows: Vec<Vec<String>> = rows.collect();
    if rows.is_empty() {
        out.push_str("  (none)\n");
        return;
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
    out.push_str(&line(headers.to_vec()));
    for row in &rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
}
