//! `spec.pgHba`: the user's own `pg_hba.conf` rules, checked before they reach a pod. A line the
//! server cannot parse stops the postmaster at start (and leaves the old rules on a reload), so
//! what reaches the file must parse; a line that would weaken Tusk's own rules is refused.
//!
//! They are placed after every rule of Tusk's (see [`super::render_hba`]): a rule cannot let
//! plaintext in, nor change how the superuser or Tusk's roles log in, whatever it names.

use std::net::IpAddr;

/// Methods a network rule may use. `trust` lets anyone in without a password; `password` sends
/// it in clear to the server; `ident` asks the client's host who it is; `peer` is local only;
/// GSSAPI and SSPI have no keytab in the image.
const ALLOWED_METHODS: [&str; 7] = [
    "scram-sha-256",
    "md5",
    "cert",
    "reject",
    "ldap",
    "radius",
    "pam",
];
const REFUSED_METHODS: [&str; 7] = ["trust", "password", "ident", "peer", "gss", "sspi", "bsd"];

/// Why one rule is refused (the caller names which).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HbaRuleError {
    #[error("must be a single line without NUL characters")]
    Lines,
    #[error(
        "must start with host or hostssl (connections without TLS are refused before any rule, \
         and the local socket is Tusk's)"
    )]
    Type,
    #[error("needs a connection type, a database, a user, an address and an authentication method")]
    Fields,
    #[error(
        "{0:?} is not an address: an IP address or CIDR, all, samehost, samenet or a host name"
    )]
    Address(String),
    #[error("{0:?} is not an IP mask")]
    Mask(String),
    #[error("method {0:?} is refused: use one of {allowed}", allowed = ALLOWED_METHODS.join(", "))]
    Method(String),
    #[error("{0:?} is not an option: options are name=value")]
    Option(String),
    #[error("may not include other files")]
    Include,
}

/// Checks one rule. Quoted names with spaces are refused as too many fields would be: rules
/// name roles and databases Tusk or its users created with identifiers.
pub fn check_rule(rule: &str) -> Result<(), HbaRuleError> {
    if rule.contains(['\n', '\r', '\0']) {
        return Err(HbaRuleError::Lines);
    }
    // A comment ends the line for the server's lexer.
    let content = rule.split('#').next().unwrap_or_default();
    let fields: Vec<&str> = content.split_whitespace().collect();
    let Some(kind) = fields.first() else {
        return Err(HbaRuleError::Fields);
    };
    if kind.starts_with("include") {
        return Err(HbaRuleError::Include);
    }
    if !matches!(*kind, "host" | "hostssl") {
        return Err(HbaRuleError::Type);
    }
    let [_, database, user, address, rest @ ..] = fields.as_slice() else {
        return Err(HbaRuleError::Fields);
    };
    if [database, user]
        .iter()
        .any(|f| f.starts_with('@') || f.is_empty())
    {
        // `@file` reads names from a file in the data directory.
        return Err(HbaRuleError::Include);
    }
    check_address(address)?;
    let rest = match rest.first() {
        // An IP address without a prefix is followed by its mask.
        Some(mask) if address.parse::<IpAddr>().is_ok() => {
            mask.parse::<IpAddr>()
                .map_err(|_| HbaRuleError::Mask((*mask).to_owned()))?;
            &rest[1..]
        }
        _ => rest,
    };
    let [method, options @ ..] = rest else {
        return Err(HbaRuleError::Fields);
    };
    if REFUSED_METHODS.contains(method) || !ALLOWED_METHODS.contains(method) {
        return Err(HbaRuleError::Method((*method).to_owned()));
    }
    match options.iter().find(|option| !is_option(option)) {
        Some(option) => Err(HbaRuleError::Option((*option).to_owned())),
        None => Ok(()),
    }
}

fn is_option(option: &str) -> bool {
    option.split_once('=').is_some_and(|(name, value)| {
        !name.is_empty()
            && !value.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn check_address(address: &str) -> Result<(), HbaRuleError> {
    let refused = || HbaRuleError::Address(address.to_owned());
    if matches!(address, "all" | "samehost" | "samenet") {
        return Ok(());
    }
    if let Some((ip, prefix)) = address.split_once('/') {
        let ip: IpAddr = ip.parse().map_err(|_| refused())?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        return match prefix.parse::<u8>() {
            Ok(bits) if bits <= max => Ok(()),
            _ => Err(refused()),
        };
    }
    if address.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    // A host name, or a suffix of one starting with a dot.
    let name = address.strip_prefix('.').unwrap_or(address);
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
    };
    if name.len() <= 253 && name.split('.').all(label) {
        Ok(())
    } else {
        Err(refused())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_a_user_writes_are_accepted() {
        for rule in [
            "hostssl app app 10.0.0.0/8 scram-sha-256",
            "hostssl all  reporting  all  cert",
            "host    app  +readers   192.168.1.0 255.255.255.0 md5",
            "hostssl app  app  .shop.svc.cluster.local scram-sha-256  # the shop",
            "hostssl all  all  fd00::/8 reject",
            "hostssl app  ldapuser  all ldap ldapserver=ldap.example.com ldapprefix=cn=",
            "hostssl app  app  samenet cert clientname=DN",
        ] {
            assert_eq!(check_rule(rule), Ok(()), "{rule}");
        }
    }

    #[test]
    fn rules_that_would_break_the_server_or_weaken_it_are_refused_with_the_reason() {
        let cases = [
            (
                "hostssl all all all trust",
                HbaRuleError::Method("trust".into()),
            ),
            (
                "hostssl all all all password",
                HbaRuleError::Method("password".into()),
            ),
            (
                "hostssl all all all ident",
                HbaRuleError::Method("ident".into()),
            ),
            (
                "hostssl all all all scram",
                HbaRuleError::Method("scram".into()),
            ),
            ("local all all peer", HbaRuleError::Type),
            ("hostnossl all all all reject", HbaRuleError::Type),
            ("include_dir /tmp", HbaRuleError::Include),
            ("hostssl all @/tmp/users all md5", HbaRuleError::Include),
            ("hostssl all all", HbaRuleError::Fields),
            ("hostssl all all 10.0.0.0/8", HbaRuleError::Fields),
            ("", HbaRuleError::Fields),
            (
                "hostssl all all 10.0.0.0/33 md5",
                HbaRuleError::Address("10.0.0.0/33".into()),
            ),
            (
                "hostssl all all 10.0.0.1 md5",
                HbaRuleError::Mask("md5".into()),
            ),
            (
                "hostssl all all bad_host! md5",
                HbaRuleError::Address("bad_host!".into()),
            ),
            (
                "hostssl all all all md5 clientcert",
                HbaRuleError::Option("clientcert".into()),
            ),
            (
                "hostssl all all all md5\nlocal all all trust",
                HbaRuleError::Lines,
            ),
        ];
        for (rule, expected) in cases {
            assert_eq!(check_rule(rule), Err(expected), "{rule:?}");
        }
        assert!(
            HbaRuleError::Method("trust".into())
                .to_string()
                .contains("scram-sha-256, md5, cert")
        );
    }
}
