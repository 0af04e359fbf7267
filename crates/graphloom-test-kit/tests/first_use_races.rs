//! First-use installs are safe when several test processes reach them at once: eight
//! processes ask for the same new venv together, and every one gets a venv whose `pip` runs
//! (before the lock, one could see `bin/python` before `ensurepip` had run and fail with
//! "No module named pip").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};

#[test]
fn eight_processes_asking_for_the_same_new_venv_all_get_it() {
    let home = std::env::temp_dir().join(format!("graphloom-first-use-home-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&home).unwrap();
    let children: Vec<_> = (0..8)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_first-use-venv"))
                .arg("race-venv")
                .env("HOME", &home)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for (i, out) in outputs.iter().enumerate() {
        assert!(
            out.status.success(),
            "process {i} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let venv = home.join(".cache/graphloom/race-venv");
    let expected = format!("{}\n", venv.join("bin/python").display());
    for out in &outputs {
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    }
    // One venv, made once: its stamp is there and no other process left a stamp of its own.
    let stamps: Vec<_> = std::fs::read_dir(&venv)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".graphloom-ready"))
        .collect();
    assert_eq!(stamps, [".graphloom-ready"]);
    std::fs::remove_dir_all(&home).unwrap();
}
