use super::*;

#[test]
fn pg_config_names_the_directories_and_the_major() {
    let debian = "/usr/lib/postgresql/15/bin\n/usr/lib/postgresql/15/lib\n\
                  /usr/share/postgresql/15\nPostgreSQL 15.10 (Debian 15.10-0+deb12u1)\n";
    let found = parse_pg_config(debian).ok();
    assert_eq!(
        found,
        Some(Installation {
            major: 15,
            bin_dir: "/usr/lib/postgresql/15/bin".into(),
            lib_dir: "/usr/lib/postgresql/15/lib".into(),
            share_dir: "/usr/share/postgresql/15".into(),
        })
    );
    for (version, major) in [("PostgreSQL 18beta1", 18), ("PostgreSQL 17rc1", 17)] {
        let text = format!("/b\n/l\n/s\n{version}\n");
        assert_eq!(parse_pg_config(&text).map(|i| i.major).ok(), Some(major));
    }
    assert!(parse_pg_config("/b\n/l\n").is_err());
    assert!(parse_pg_config("/b\n/l\n/s\nsomething else\n").is_err());
}

#[test]
fn ldd_gives_the_libraries_to_carry_but_the_c_librarys_own() {
    // bookworm's postgres 15, as ldd reads it in trixie's image.
    let out = "\tlinux-vdso.so.1 (0x00007ffc8b5f2000)
\tlibicui18n.so.72 => /lib/x86_64-linux-gnu/libicui18n.so.72 (0x00007f1e2c600000)
\tlibssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x00007f1e2c556000)
\tlibldap-2.5.so.0 => not found
\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f1e2c477000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f1e2c296000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f1e2d21a000)
";
    let carried: Vec<String> = parse_ldd(out).into_keys().collect();
    assert_eq!(carried, ["libicui18n.so.72", "libssl.so.3"]);
}

#[test]
fn only_the_libraries_this_image_lacks_are_given_to_the_old_programs() {
    let root = tempfile::tempdir().expect("a directory");
    let system = tempfile::tempdir().expect("a directory");
    std::fs::create_dir(root.path().join(DEPS)).expect("deps");
    for name in ["libicuuc.so.72", "libssl.so.3", "libldap-2.5.so.0"] {
        std::fs::write(root.path().join(DEPS).join(name), b"").expect("a library");
    }
    std::fs::write(system.path().join("libssl.so.3"), b"").expect("the image's");
    let missing = missing_here(root.path(), &[system.path().to_path_buf()]).ok();
    assert_eq!(
        missing,
        Some(vec![
            "libicuuc.so.72".to_owned(),
            "libldap-2.5.so.0".to_owned()
        ])
    );
}

#[test]
fn a_directory_is_mirrored_under_the_root_at_its_own_path() {
    assert_eq!(
        Installation::under(Path::new("/old"), Path::new("/usr/lib/postgresql/15/bin")),
        PathBuf::from("/old/usr/lib/postgresql/15/bin")
    );
}
