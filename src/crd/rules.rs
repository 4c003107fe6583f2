//! CEL rules too long to write inline: each mirrors the rule that the API of the child receiving
//! the field applies, so a spec that would be refused there is refused at `kubectl apply`.

use backup_store::names::NameRule;
use k8s_openapi::api::core::v1::ResourceRequirements;
use schemars::{JsonSchema, Schema, SchemaGenerator};

/// CEL for one of the agent's name rules (`backup_store::names`): the same pattern and length,
/// so the API server and the agent accept the same strings.
pub fn name(rule: NameRule) -> String {
    format!(
        "size(self) <= {} && {}",
        rule.max_len,
        matches(rule.pattern)
    )
}

/// A DNS-1123 subdomain, the rule for the names of StorageClasses, Secrets and Backups.
pub const DNS_SUBDOMAIN: &str =
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Whitespace as Go's `strings.Fields` (Unicode White_Space) splits a cron schedule on.
const WS: &str = r"[\t\n\x0B\f\r\x{85}\p{Z}]";

/// `self.matches(…)` for the CronJob API's schedule grammar (robfig/cron `ParseStandard`): five
/// fields whose single values are within range, or a macro. What a regular expression cannot
/// check (`5-3`, overflowing `@every` durations) is left to the operator's validation, which
/// mirrors robfig exactly and reports `InvalidSpec` before any child exists.
pub fn schedule() -> String {
    // Go's strconv.Atoi takes a sign and leading zeros; robfig refuses negative numbers.
    let number = |range: &str| format!(r"\+?0*(?:{range})");
    let minute = number("[0-9]|[1-5][0-9]");
    let hour = number("[0-9]|1[0-9]|2[0-3]");
    let dom = number("[1-9]|[12][0-9]|3[01]");
    let month = format!(
        "(?:{}|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))",
        number("[1-9]|1[0-2]")
    );
    let dow = format!("(?:{}|(?i:sun|mon|tue|wed|thu|fri|sat))", number("[0-6]"));
    let step = r"\+?0*[1-9][0-9]{0,17}";
    let field = |value: &str| {
        // robfig ignores whatever follows `*-`, and skips empty list items.
        let item = format!(r"(?:[*?](?:-[^,/{WS_INNER}]*)?|{value}(?:-{value})?)(?:/{step})?");
        format!("(?:,*{item}(?:,+{item})*,*|,+)")
    };
    let duration = r"[-+]?(?:0|(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+)";
    let pattern = format!(
        "^(?:@(?:yearly|annually|monthly|weekly|daily|midnight|hourly)|@every {duration}|\
         {WS}*{}{WS}+{}{WS}+{}{WS}+{}{WS}+{}{WS}*)$",
        field(&minute),
        field(&hour),
        field(&dom),
        field(&month),
        field(&dow),
    );
    matches(&pattern)
}

/// [`WS`] without its brackets, for use inside a negated class.
const WS_INNER: &str = r"\t\n\x0B\f\r\x{85}\p{Z}";

/// `self.matches('<pattern>')`, with the pattern escaped for a CEL string literal.
pub fn matches(pattern: &str) -> String {
    format!("self.matches('{}')", pattern.replace('\\', "\\\\"))
}

/// Resource names a Pod accepts for the PostgreSQL container without further pod-level setup.
const RESOURCE_NAMES: &str = "['cpu', 'memory', 'ephemeral-storage']";

/// CEL over `resources`, the rules the Pod API applies to a container's requirements.
pub fn resources_names() -> String {
    format!(
        "(!has(self.limits) || self.limits.all(k, k in {RESOURCE_NAMES})) && \
         (!has(self.requests) || self.requests.all(k, k in {RESOURCE_NAMES}))"
    )
}

/// Every limit and request is a non-negative quantity (values are int-or-string).
pub fn resources_quantities() -> String {
    let valid = |map: &str| {
        format!(
            "(!has(self.{map}) || self.{map}.all(k, isQuantity(string(self.{map}[k])) && \
             !quantity(string(self.{map}[k])).isLessThan(quantity('0'))))"
        )
    };
    format!("{} && {}", valid("limits"), valid("requests"))
}

/// A request never exceeds the limit of the same resource.
pub const RESOURCES_REQUESTS_WITHIN_LIMITS: &str = "!has(self.limits) || !has(self.requests) || \
    self.requests.all(k, !(k in self.limits) || !isQuantity(string(self.requests[k])) || \
    !isQuantity(string(self.limits[k])) || \
    quantity(string(self.requests[k])).compareTo(quantity(string(self.limits[k]))) <= 0)";

/// Kubernetes' ResourceRequirements schema, bounded so the CEL rules above stay within the API
/// server's cost budget, and without resource claims: the pod declares none, so the Pod API
/// would refuse any.
pub fn bounded_resources(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = ResourceRequirements::json_schema(generator);
    for map in ["limits", "requests"] {
        if let Some(map) = schema.pointer_mut(&format!("/properties/{map}")) {
            map["maxProperties"] = 3.into();
        }
    }
    if let Some(claims) = schema.pointer_mut("/properties/claims") {
        claims["maxItems"] = 0.into();
    }
    schema
}
