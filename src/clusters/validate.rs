//! The first step of the pipeline: what the API server's schema and CEL rules cannot check.
//!
//! Everything a CEL rule can express lives on the API types (see `crd/`) and is rejected at
//! `kubectl apply`. What is left is checked here, on plain values, and reported as a False
//! `Ready` condition with reason `InvalidSpec` and a Warning Event.

use croner::parser::{CronParser, Seconds, Year};

use crate::crd::PostgreSQLSpec;

/// A spec the operator cannot realise; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSpec {
    #[error("spec.backup.schedule {schedule:?} is not a valid Kubernetes cron schedule: {reason}")]
    Schedule { schedule: String, reason: String },
}

/// Checks `spec` beyond the CRD schema.
pub fn validate(spec: &PostgreSQLSpec) -> Result<(), InvalidSpec> {
    if let Some(backup) = &spec.backup {
        validate_schedule(&backup.schedule)?;
    }
    Ok(())
}

/// Kubernetes CronJob syntax: five fields or a macro, without the Quartz/croner extensions
/// (`L`, `W`, `#`) that the CronJob controller would refuse.
pub fn validate_schedule(schedule: &str) -> Result<(), InvalidSpec> {
    let invalid = |reason: String| InvalidSpec::Schedule {
        schedule: schedule.to_owned(),
        reason,
    };
    let pattern = match schedule.trim() {
        "@midnight" => "@daily",
        "@annually" => "@yearly",
        other => other,
    };
    if !pattern.starts_with('@') && pattern.split_whitespace().count() != 5 {
        return Err(invalid("it must have exactly five fields".to_owned()));
    }
    if pattern.contains(['L', 'W', '#']) && !pattern.starts_with('@') {
        // Month and weekday names are fine; the extensions are single letters or '#'.
        let uses_extension = pattern.split_whitespace().any(|field| {
            field.contains('#') || field == "L" || field.ends_with('L') || field.ends_with('W')
        });
        if uses_extension {
            return Err(invalid(
                "L, W and # are not supported by Kubernetes".to_owned(),
            ));
        }
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(pattern)
        .map(drop)
        .map_err(|e| invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_schedules_are_accepted() {
        for schedule in [
            "0 2 * * *",
            "*/15 * * * *",
            "0 3 * * MON-FRI",
            "@daily",
            "@midnight",
            "0 0 1 JAN *",
        ] {
            assert_eq!(validate_schedule(schedule), Ok(()), "{schedule}");
        }
    }

    #[test]
    fn non_kubernetes_schedules_are_rejected_with_the_field_named() {
        for schedule in [
            "61 * * * *",
            "0 0 * * * *",
            "0 0 L * *",
            "0 0 * * 5#3",
            "* * 32 * *",
        ] {
            let err = validate_schedule(schedule).unwrap_err().to_string();
            assert!(err.starts_with("spec.backup.schedule"), "{schedule}: {err}");
        }
    }
}
