use super::*;

/// What pg_restore writes before each section that must run inside the database: a reconnect.
macro_rules! reconnect {
    () => {
        r#"\unrestrict KEY
\encoding SQL_ASCII
\connect -reuse-previous=on "dbname='we\'ird db'"
\restrict KEY

SET client_encoding = 'LATIN1';
"#
    };
}

/// What pg_restore 15.18 rendered for a database with every kind of entry (abridged preamble;
/// the comment spans lines and holds a fake header and a fake backslash command).
const RENDERED: &str = concat!(
    r#"--
-- PostgreSQL database dump
--

\restrict KEY

SET client_encoding = 'LATIN1';
SET standard_conforming_strings = on;

--
-- Name: we'ird db; Type: DATABASE; Schema: -; Owner: app_owner
--

CREATE DATABASE "we'ird db" WITH TEMPLATE = template0 ENCODING = 'LATIN1' LOCALE_PROVIDER = libc LOCALE = 'C';


ALTER DATABASE "we'ird db" OWNER TO app_owner;

"#,
    reconnect!(),
    r#"
--
-- Name: DATABASE "we'ird db"; Type: COMMENT; Schema: -; Owner: app_owner
--

COMMENT ON DATABASE "we'ird db" IS 'it''s
-- Name: x; Type: ACL; Schema: -; Owner: y
\! echo no';


--
-- Name: we'ird db; Type: DATABASE PROPERTIES; Schema: -; Owner: app_owner
--

ALTER DATABASE "we'ird db" SET work_mem TO '7MB';
ALTER ROLE r IN DATABASE "we'ird db" SET statement_timeout TO '5s';

"#,
    reconnect!(),
    r#"
--
-- Name: DATABASE "we'ird db"; Type: ACL; Schema: -; Owner: app_owner
--

REVOKE CONNECT,TEMPORARY ON DATABASE "we'ird db" FROM PUBLIC;
GRANT CREATE,CONNECT ON DATABASE "we'ird db" TO r;


--
-- PostgreSQL database dump complete
--

\unrestrict KEY
"#
);

fn sql(script: &Option<Vec<u8>>) -> Vec<String> {
    String::from_utf8_lossy(script.as_deref().unwrap_or_default())
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("--") || l.starts_with("-- Name: x"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn splits_the_rendered_entries() {
    let r = split(RENDERED.as_bytes()).unwrap();
    assert_eq!(
        r.create.as_deref(),
        Some(
            "CREATE DATABASE \"we'ird db\" WITH TEMPLATE = template0 ENCODING = 'LATIN1' \
             LOCALE_PROVIDER = libc LOCALE = 'C';"
        )
    );
    let preamble = [
        "\\restrict KEY",
        "SET client_encoding = 'LATIN1';",
        "SET standard_conforming_strings = on;",
    ];
    let mut settings = preamble.map(String::from).to_vec();
    settings.extend(
        [
            "ALTER DATABASE \"we'ird db\" SET work_mem TO '7MB';",
            "ALTER ROLE r IN DATABASE \"we'ird db\" SET statement_timeout TO '5s';",
            "REVOKE CONNECT,TEMPORARY ON DATABASE \"we'ird db\" FROM PUBLIC;",
            "GRANT CREATE,CONNECT ON DATABASE \"we'ird db\" TO r;",
        ]
        .map(String::from),
    );
    assert_eq!(sql(&r.settings), settings);
    let mut comment = preamble.map(String::from).to_vec();
    comment.extend(
        [
            "COMMENT ON DATABASE \"we'ird db\" IS 'it''s",
            "-- Name: x; Type: ACL; Schema: -; Owner: y",
            "\\! echo no';",
        ]
        .map(String::from),
    );
    assert_eq!(sql(&r.comment), comment);
}

#[test]
fn a_database_without_settings_or_comment_gives_no_scripts() {
    let text = "\\restrict K\nSET client_encoding = 'UTF8';\n--\n-- Name: app; Type: DATABASE; \
                Schema: -; Owner: o\n--\n\nCREATE DATABASE app WITH TEMPLATE = template0 \
                ENCODING = 'UTF8';\n\\unrestrict K\n";
    let r = split(text.as_bytes()).unwrap();
    assert!(r.create.is_some() && r.settings.is_none() && r.comment.is_none());
}

#[test]
fn unexpected_entries_and_open_quotes_are_refused() {
    let other = "-- Name: t; Type: TABLE; Schema: public; Owner: o\nCREATE TABLE t ();\n";
    assert!(split(other.as_bytes()).unwrap_err().contains("Type: TABLE"));
    let open =
        "-- Name: DATABASE x; Type: COMMENT; Schema: -; Owner: o\nCOMMENT ON DATABASE x IS 'a\n";
    assert!(split(open.as_bytes()).is_err());
    // A name holding a fake type: the first real type wins.
    assert_eq!(
        classify("a; Type: TABLE; b; Type: ACL; Schema: -; Owner: o"),
        Ok(Part::Settings)
    );
}

#[test]
fn selects_only_the_database_acl_and_comment() {
    let toc = ";\n; Archive created at …\n;\n3344; 1262 16386 DATABASE - we'ird db app_owner\n\
               3345; 0 0 COMMENT - DATABASE \"we'ird db\" app_owner\n\
               3346; 0 0 ACL - DATABASE \"we'ird db\" app_owner\n\
               3347; 0 0 DATABASE PROPERTIES - we'ird db app_owner\n\
               3348; 0 0 COMMENT - SCHEMA public postgres\n\
               214; 1259 16387 TABLE public t postgres\n\
               215; 0 0 COMMENT public TABLE \"DATABASE x\" postgres\n";
    assert_eq!(
        select_entries(toc),
        "3345; 0 0 COMMENT - DATABASE \"we'ird db\" app_owner\n\
         3346; 0 0 ACL - DATABASE \"we'ird db\" app_owner\n"
    );
}

#[test]
fn create_options_are_parsed_and_requoted() {
    let options = parse_create(
        "CREATE DATABASE \"we'ird \"\"db\" WITH TEMPLATE = template0 ENCODING = 'LATIN1' \
         LOCALE_PROVIDER = libc LC_COLLATE = 'it''s' LC_CTYPE = 'C' TABLESPACE = \"Fast\";",
    )
    .unwrap();
    assert_eq!(options.len(), 6);
    assert_eq!(
        options[3],
        CreateOption {
            key: "LC_COLLATE".into(),
            value: Value::Literal("it's".into())
        }
    );
    assert_eq!(options[5].value, Value::Ident("Fast".into()));
    assert_eq!(
        create_clause(&options),
        " ENCODING = 'LATIN1' LOCALE_PROVIDER = libc LC_COLLATE = 'it''s' LC_CTYPE = 'C'"
    );
    assert_eq!(
        Locale::of(&options),
        Some(Locale {
            encoding: "LATIN1".into(),
            collate: "it's".into(),
            ctype: "C".into()
        })
    );
    let plain =
        parse_create("CREATE DATABASE app WITH TEMPLATE = template0 LOCALE = 'C';").unwrap();
    assert_eq!(Locale::of(&plain), None);
}

#[test]
fn malformed_create_statements_are_refused() {
    for bad in [
        "CREATE TABLE x",
        "CREATE DATABASE \"open",
        "CREATE DATABASE x TEMPLATE = template0;",
        "CREATE DATABASE x WITH ENCODING 'UTF8';",
        "CREATE DATABASE x WITH ENCODING = 'UTF8;",
        "CREATE DATABASE x WITH = 'UTF8';",
        "CREATE DATABASE x WITH ENCODING = ;",
    ] {
        assert!(parse_create(bad).is_err(), "{bad}");
    }
}
