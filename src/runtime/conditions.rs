//! `metav1.Condition` bookkeeping: a condition's `lastTransitionTime` moves only when its status
//! really changes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The new state of one condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update<'a> {
    pub type_: &'a str,
    pub status: bool,
    pub reason: &'a str,
    pub message: String,
}

/// Sets `update` in `conditions`, keeping the previous transition time when the status is
/// unchanged.
pub fn set(conditions: &mut Vec<Condition>, update: Update, generation: Option<i64>, now: &Time) {
    let status = if update.status { "True" } else { "False" };
    let transition = conditions
        .iter()
        .find(|c| c.type_ == update.type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    conditions.retain(|c| c.type_ != update.type_);
    conditions.push(Condition {
        type_: update.type_.to_owned(),
        status: status.to_owned(),
        reason: update.reason.to_owned(),
        message: update.message,
        observed_generation: generation,
        last_transition_time: transition,
    });
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
}

/// Whether `type_` is present and True.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::conditions::READY;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn ready(status: bool, reason: &str) -> Update<'_> {
        Update {
            type_: READY,
            status,
            reason,
            message: reason.to_owned(),
        }
    }

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let mut conditions = vec![];
        set(
            &mut conditions,
            ready(false, "Provisioning"),
            Some(1),
            &at(100),
        );
        set(
            &mut conditions,
            ready(false, "PodsNotReady"),
            Some(2),
            &at(200),
        );
        assert_eq!(conditions[0].last_transition_time, at(100));
        assert_eq!(conditions[0].reason, "PodsNotReady");
        assert_eq!(conditions[0].observed_generation, Some(2));
        set(&mut conditions, ready(true, "Ready"), Some(2), &at(300));
        assert_eq!(conditions[0].last_transition_time, at(300));
        assert!(is_true(&conditions, READY));
        set(&mut conditions, ready(true, "Ready"), Some(2), &at(400));
        assert_eq!(conditions[0].last_transition_time, at(300));
        assert_eq!(conditions.len(), 1);
    }
}
