//! One table of schedules with the CronJob API's verdict (robfig/cron v3 `ParseStandard`, no
//! `TZ`), run through both checks Tusk applies: the CRD's CEL rule at `kubectl apply`, and the
//! operator's exact mirror, which refuses with `InvalidSpec` before any child is created.

use kube::core::cel::validate_cel;
use serde_json::{Value, json};

use crate::clusters::validate::validate_schedule;
use crate::crd::fixtures;

/// The CronJob API accepts it.
const OK: Verdict = Verdict::Accepted;
/// Refused by the CronJob API, and already by CEL.
const CEL: Verdict = Verdict::RefusedByCel;
/// Refused by the CronJob API; beyond a regular expression, so refused by the operator only.
const OPERATOR: Verdict = Verdict::RefusedByOperator;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Verdict {
    Accepted,
    RefusedByCel,
    RefusedByOperator,
}

const SCHEDULES: &[(&str, Verdict)] = &[
    ("0 2 * * *", OK),
    ("*/15 * * * *", OK),
    ("0 3 * * MON-FRI", OK),
    ("0 3 * * mon-Fri", OK),
    ("0 0 1 JAN *", OK),
    ("0 0 1-31 1-12 0-6", OK),
    ("0 0 * * 0", OK),
    ("0 0 * * SUN", OK),
    ("1/5 * * * *", OK),
    ("0-59/5 */2 * * *", OK),
    ("5,10,,15 * * * *", OK),
    ("? * * * *", OK),
    ("+5 05 * * *", OK),
    ("*-3/2 * * * *", OK),
    (" 0\t0 * * * ", OK),
    ("@daily", OK),
    ("@midnight", OK),
    ("@annually", OK),
    ("@hourly", OK),
    ("@every 1h30m", OK),
    ("@every 1.5h", OK),
    ("@every 90s", OK),
    ("@every 0", OK),
    ("0 0 * * 7", CEL),
    ("0 0 * * 1-7", CEL),
    ("0 0 * * -1", CEL),
    ("61 * * * *", CEL),
    ("0 24 * * *", CEL),
    ("* * 32 * *", CEL),
    ("0 0 0 * *", CEL),
    ("0 0 * 13 *", CEL),
    ("0 0 * JANUARY *", CEL),
    ("0 0 * * * *", CEL),
    ("0 0 * *", CEL),
    ("0 0 L * *", CEL),
    ("0 0 * * 5#3", CEL),
    ("0 0 15W * *", CEL),
    ("*/0 * * * *", CEL),
    ("1-2-3 * * * *", CEL),
    ("1/2/3 * * * *", CEL),
    ("0 0 1,2- * *", CEL),
    ("TZ=UTC 0 2 * * *", CEL),
    ("CRON_TZ=Europe/Paris 0 2 * * *", CEL),
    ("@reboot", CEL),
    ("@weekly ", CEL),
    (" @daily", CEL),
    ("@every 1d", CEL),
    ("@every 1 h", CEL),
    ("@every .h", CEL),
    ("every night", CEL),
    ("", CEL),
    ("5-3 * * * *", OPERATOR),
    ("0 0 * * FRI-MON", OPERATOR),
    ("@every 9999999999999h", OPERATOR),
];

fn cel_accepts(schedule: &str) -> bool {
    let spec = json!({"storage": {"size": "1Gi"},
        "backup": {"schedule": schedule, "destination": {"s3": {"bucket": "backups"}}}});
    let pg = fixtures::postgresql("prod", "demo", spec, Value::Null);
    match validate_cel(&pg) {
        Ok(()) => true,
        Err(errors) => {
            let messages: Vec<_> = errors.as_slice().iter().map(|e| &e.message).collect();
            assert!(
                messages.iter().all(|m| m.contains("spec.backup.schedule")),
                "{schedule:?}: {messages:?}"
            );
            false
        }
    }
}

#[test]
fn schedules_are_judged_as_the_cronjob_api_judges_them() {
    for &(schedule, verdict) in SCHEDULES {
        let operator = validate_schedule(schedule);
        assert_eq!(
            operator.is_ok(),
            verdict == OK,
            "operator on {schedule:?}: {operator:?}"
        );
        assert_eq!(cel_accepts(schedule), verdict != CEL, "CEL on {schedule:?}");
    }
}
