//! The first step of the pipeline: what the API server's schema and CEL rules cannot check.
//!
//! Everything a CEL rule can express lives on the API types (see `crd/`) and is rejected at
//! `kubectl apply`. What is left is checked here, on plain values, and reported as a False
//! `Ready` condition with reason `InvalidSpec` and a Warning Event.

mod cron;

use crate::crd::PostgreSQLSpec;
use crate::resources::ParameterError;
use crate::resources::hba_rules::{HbaRuleError, check_rule};

/// A spec the operator cannot realise; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSpec {
    #[error("{field} {schedule:?} is not a valid Kubernetes cron schedule: {reason}")]
    Schedule {
        field: &'static str,
        schedule: String,
        reason: String,
    },
    #[error("spec.pgHba[{index}] {reason}")]
    HbaRule { index: usize, reason: HbaRuleError },
    /// Found by the build step, which is pure and runs before anything is applied.
    #[error(transparent)]
    Parameter(#[from] ParameterError),
}

/// Checks `spec` beyond the CRD schema.
pub fn validate(spec: &PostgreSQLSpec) -> Result<(), InvalidSpec> {
    for (index, rule) in spec.pg_hba.iter().enumerate() {
        check_rule(rule).map_err(|reason| InvalidSpec::HbaRule { index, reason })?;
    }
    if let Some(backup) = &spec.backup {
        validate_schedule(&backup.schedule)?;
        if let Some(verify) = &backup.verify {
            check_schedule("spec.backup.verify.schedule", &verify.schedule)?;
        }
    }
    Ok(())
}

/// The CronJob API's own rule (see [`cron`]); CEL checks the grammar and the ranges of single
/// values, this also what a regular expression cannot: `5-3`, `@every` durations.
pub fn validate_schedule(schedule: &str) -> Result<(), InvalidSpec> {
    check_schedule("spec.backup.schedule", schedule)
}

fn check_schedule(field: &'static str, schedule: &str) -> Result<(), InvalidSpec> {
    cron::check(schedule).map_err(|reason| InvalidSpec::Schedule {
        field,
        schedule: schedule.to_owned(),
        reason,
    })
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
            "0 0 * * 7",
            "0 0 * * 5-3",
        ] {
            let err = validate_schedule(schedule).unwrap_err().to_string();
            assert!(err.starts_with("spec.backup.schedule"), "{schedule}: {err}");
        }
    }

    #[test]
    fn a_pg_hba_rule_the_server_could_not_read_is_named_by_its_index() {
        let spec = |rules: serde_json::Value| {
            crate::crd::fixtures::postgresql(
                "ns",
                "demo",
                serde_json::json!({"version": "17", "storage": {"size": "1Gi"}, "pgHba": rules}),
                serde_json::Value::Null,
            )
            .spec
        };
        let good = spec(serde_json::json!(["hostssl app app all cert"]));
        assert_eq!(validate(&good), Ok(()));
        let bad = spec(serde_json::json!([
            "hostssl app app all cert",
            "hostssl app app 10.0.0.0/40 cert"
        ]));
        let err = validate(&bad).unwrap_err().to_string();
        assert!(
            err.starts_with("spec.pgHba[1] \"10.0.0.0/40\" is not an address"),
            "{err}"
        );
    }
}
