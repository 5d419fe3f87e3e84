//! The world-readable part of a uid-0 command's read set is cached across runs: a `chmod`
//! between two runs of the same runtime must show in the second (real runs, real files).

mod support;

use std::os::unix::fs::PermissionsExt;

use support::{Fixture, MachineLayers, Owner, ran};

#[tokio::test]
async fn a_chmod_between_two_uid0_runs_changes_what_the_second_may_read() {
    let machine = MachineLayers::probe();
    if !machine.can_confine_for(Owner::Root) || !Owner::Root.runs_as_uid0() {
        eprintln!("no uid-0 sandbox here: not checked");
        return;
    }
    let fixture = Fixture::owned_by(Owner::Root);
    // A stand-in for /etc: a public directory with one file, walked like /etc is.
    let etc = fixture.base.path().join("etc-like");
    std::fs::create_dir(&etc).unwrap();
    std::fs::set_permissions(&etc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = etc.join("config");
    std::fs::write(&file, "public\n").unwrap();
    let set_mode = |mode: u32| {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    set_mode(0o644);
    let mut config = fixture.config();
    config.uid0_world_readable_roots.push(etc.clone());
    let runtime = fixture.runtime_with(config);
    let path = file.display().to_string();
    // `cat` of a path outside the workspace is an argument the path check would refuse: read
    // it through the shell instead.
    let read = |call_id: &str| fixture.request(call_id, &["sh", "-c", &format!("cat {path}")]);

    let first = ran(runtime.run(&read("public")).await.unwrap());
    assert_eq!((first.exit_code, first.stdout.as_str()), (Some(0), "public\n"), "{first:?}");

    set_mode(0o600);
    let second = ran(runtime.run(&read("made-private")).await.unwrap());
    assert_eq!(second.exit_code, Some(1), "{second:?}");
    assert!(second.stderr.contains("Permission denied"), "{second:?}");

    set_mode(0o644);
    let third = ran(runtime.run(&read("public-again")).await.unwrap());
    assert_eq!((third.exit_code, third.stdout.as_str()), (Some(0), "public\n"), "{third:?}");
}
