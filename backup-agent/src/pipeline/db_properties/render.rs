//! Pure text handling for `db_properties`: which TOC entries to ask `pg_restore` for, how its
//! `--create` output splits into the parts the agent applies, and pg_dump's `CREATE DATABASE`
//! options. Works on bytes: the rendered SQL is in the database's encoding (`LATIN1`, …).

use crate::pg::quote_ident;

/// Lines of `pg_restore --list --create` naming the database's ACL and comment. `DATABASE` and
/// `DATABASE PROPERTIES` need not be listed: with `--create`, pg_restore 15 emits them whatever
/// `--use-list` says.
pub fn select_entries(toc: &str) -> String {
    toc.lines()
        .filter(|line| is_database_entry(line))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// `3346; 0 0 ACL - DATABASE "we'ird db" owner`: id; catalog oid, oid, type, schema, name, owner.
fn is_database_entry(line: &str) -> bool {
    let Some((_, rest)) = line.split_once("; ") else {
        return false;
    };
    let mut words = rest.splitn(3, ' ');
    let (Some(_), Some(_), Some(entry)) = (words.next(), words.next(), words.next()) else {
        return false;
    };
    entry.starts_with("ACL - DATABASE ") || entry.starts_with("COMMENT - DATABASE ")
}

/// What `pg_restore --create` rendered for one database, split by TOC entry.
#[derive(Debug, Default, PartialEq)]
pub struct Rendered {
    /// pg_dump's `CREATE DATABASE … WITH TEMPLATE = template0 ENCODING = … LOCALE = …;` line.
    pub create: Option<String>,
    /// A psql script with the `DATABASE PROPERTIES` (`ALTER DATABASE … SET`, `ALTER ROLE … IN
    /// DATABASE … SET`, connection limit, template flag) and the database `ACL`.
    pub settings: Option<Vec<u8>>,
    /// A psql script with the `COMMENT ON DATABASE`.
    pub comment: Option<Vec<u8>>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Part {
    Preamble,
    Create,
    Settings,
    Comment,
    /// `\connect` and the session settings repeated after it (the preamble has them).
    Skip,
}

/// Splits `pg_restore --create --file=-` output. Kept for every script: the first `\restrict`
/// line (psql then refuses any other backslash command the archive might smuggle in) and the
/// preamble (`SET client_encoding = …` etc.). Dropped: `\connect`, `\encoding` (the scripts run
/// in one transaction on one connection) and the `DATABASE` entry (`CREATE DATABASE`, `ALTER
/// DATABASE … OWNER`), whose options are returned as `create`. A line counts as a header or a
/// backslash command only outside quotes, so a multi-line comment cannot fake one.
pub fn split(text: &[u8]) -> Result<Rendered, String> {
    let mut restrict: Option<&[u8]> = None;
    let (mut preamble, mut create, mut settings, mut comment) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut part = Part::Preamble;
    let mut quotes = Quotes::default();
    for line in text.split(|b| *b == b'\n') {
        if !quotes.inside() {
            if line.starts_with(b"\\") {
                if line.starts_with(b"\\restrict ") && restrict.is_none() {
                    restrict = Some(line);
                } else {
                    part = Part::Skip;
                }
                continue;
            }
            if let Some(header) = line.strip_prefix(b"-- Name: ") {
                part = classify(&String::from_utf8_lossy(header))?;
                continue;
            }
        }
        quotes.feed(line);
        let into = match part {
            Part::Preamble => &mut preamble,
            Part::Create => &mut create,
            Part::Settings => &mut settings,
            Part::Comment => &mut comment,
            Part::Skip => continue,
        };
        into.extend_from_slice(line);
        into.push(b'\n');
    }
    if quotes.inside() {
        return Err("pg_restore's output ends inside a quoted string".into());
    }
    let script = |body: Vec<u8>| {
        has_sql(&body).then(|| {
            let mut out = Vec::new();
            if let Some(line) = restrict {
                out.extend_from_slice(line);
                out.push(b'\n');
            }
            out.extend_from_slice(&preamble);
            out.extend_from_slice(&body);
            out
        })
    };
    let create = String::from_utf8_lossy(&create)
        .lines()
        .find(|l| l.starts_with("CREATE DATABASE "))
        .map(str::to_owned);
    Ok(Rendered {
        create,
        settings: script(settings),
        comment: script(comment),
    })
}

/// The part a `-- Name: …; Type: …; Schema: …; Owner: …` header starts.
fn classify(header: &str) -> Result<Part, String> {
    for (at, _) in header.match_indices("; Type: ") {
        let rest = &header[at + "; Type: ".len()..];
        for (kind, part) in [
            ("DATABASE PROPERTIES; ", Part::Settings),
            ("DATABASE; ", Part::Create),
            ("ACL; ", Part::Settings),
            ("COMMENT; ", Part::Comment),
        ] {
            if rest.starts_with(kind) {
                return Ok(part);
            }
        }
    }
    Err(format!("unexpected entry in pg_restore's output: {header}"))
}

fn has_sql(body: &[u8]) -> bool {
    body.split(|b| *b == b'\n').any(|line| {
        let line = line.trim_ascii();
        !line.is_empty() && !line.starts_with(b"--")
    })
}

/// Whether the text so far ends inside a '…' literal or a "…" identifier (doubled quotes
/// close and reopen, which comes out right). pg_dump writes standard-conforming literals.
#[derive(Default)]
struct Quotes(Option<u8>);

impl Quotes {
    fn inside(&self) -> bool {
        self.0.is_some()
    }

    fn feed(&mut self, line: &[u8]) {
        for (i, &c) in line.iter().enumerate() {
            match self.0 {
                None if c == b'\'' || c == b'"' => self.0 = Some(c),
                None if c == b'-' && line.get(i + 1) == Some(&b'-') => return,
                Some(q) if c == q => self.0 = None,
                _ => {}
            }
        }
    }
}

/// One `KEY = value` of pg_dump's `CREATE DATABASE … WITH …`.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateOption {
    pub key: String,
    pub value: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `'…'`, unescaped.
    Literal(String),
    /// `"…"`, unescaped.
    Ident(String),
    /// A bare word: `libc`, `template0`.
    Word(String),
}

impl Value {
    fn text(&self) -> &str {
        match self {
            Value::Literal(s) | Value::Ident(s) | Value::Word(s) => s,
        }
    }
}

/// The options of `CREATE DATABASE <name> WITH K = v …;` as pg_dump writes it.
pub fn parse_create(statement: &str) -> Result<Vec<CreateOption>, String> {
    let bad = |what: &str| format!("cannot read {what} in pg_dump's {statement:?}");
    let rest = statement
        .strip_prefix("CREATE DATABASE ")
        .ok_or_else(|| bad("the start"))?;
    let (_, rest) = token(rest).ok_or_else(|| bad("the name"))?;
    let mut rest = rest
        .trim_start()
        .strip_prefix("WITH")
        .ok_or_else(|| bad("WITH"))?;
    let mut options = Vec::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() || rest.strip_prefix(';').is_some_and(|r| r.trim().is_empty()) {
            return Ok(options);
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_alphabetic() || c == '_'))
            .unwrap_or(rest.len());
        let key = rest[..end].to_ascii_uppercase();
        let after = rest[end..].trim_start().strip_prefix('=');
        let (Some(after), false) = (after, key.is_empty()) else {
            return Err(bad("an option"));
        };
        let (value, after) = token(after.trim_start()).ok_or_else(|| bad(&key))?;
        options.push(CreateOption { key, value });
        rest = after;
    }
}

/// A quoted literal, quoted identifier or bare word at the start of `text`, and what follows.
fn token(text: &str) -> Option<(Value, &str)> {
    let quote = text.chars().next()?;
    if quote == '\'' || quote == '"' {
        let mut value = String::new();
        let mut chars = text.char_indices().skip(1).peekable();
        while let Some((i, c)) = chars.next() {
            if c != quote {
                value.push(c);
            } else if chars.peek().is_some_and(|&(_, n)| n == quote) {
                value.push(c);
                chars.next();
            } else {
                let rest = &text[i + 1..];
                return Some(if quote == '\'' {
                    (Value::Literal(value), rest)
                } else {
                    (Value::Ident(value), rest)
                });
            }
        }
        return None;
    }
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (end > 0).then(|| (Value::Word(text[..end].to_owned()), &text[end..]))
}

/// Options that describe the source cluster rather than the database: the agent always uses
/// template0 (the archive holds everything; template1's additions could collide with it) and
/// the target's default tablespace; OID and collation version are binary-upgrade only.
const NOT_CARRIED: &[&str] = &["TEMPLATE", "OID", "TABLESPACE", "COLLATION_VERSION"];

/// ` KEY = value …` for the agent's own `CREATE DATABASE … WITH TEMPLATE = template0`, every
/// value requoted (nothing from the archive reaches the SQL unquoted but a bare word).
pub fn create_clause(options: &[CreateOption]) -> String {
    options
        .iter()
        .filter(|o| !NOT_CARRIED.contains(&o.key.as_str()))
        .map(|o| {
            let value = match &o.value {
                Value::Literal(s) => format!("'{}'", s.replace('\'', "''")),
                Value::Ident(s) => quote_ident(s),
                Value::Word(s) => s.clone(),
            };
            format!(" {} = {value}", o.key)
        })
        .collect()
}

/// Encoding and locale, as `pg_database` reports them, to compare with an existing database.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Locale {
    pub encoding: String,
    pub collate: String,
    pub ctype: String,
}

impl Locale {
    /// From pg_dump's options; `None` without an encoding (then there is nothing to compare).
    pub fn of(options: &[CreateOption]) -> Option<Locale> {
        let mut locale = Locale::default();
        let mut encoding = None;
        for o in options {
            let value = o.value.text().to_owned();
            match o.key.as_str() {
                "ENCODING" => encoding = Some(value),
                "LOCALE" => (locale.collate, locale.ctype) = (value.clone(), value),
                "LC_COLLATE" => locale.collate = value,
                "LC_CTYPE" => locale.ctype = value,
                _ => {}
            }
        }
        locale.encoding = encoding?;
        Some(locale)
    }
}

impl std::fmt::Display for Locale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "encoding {}, LC_COLLATE {:?}, LC_CTYPE {:?}",
            self.encoding, self.collate, self.ctype
        )
    }
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
