//! `first-use-venv NAME`: asks for the empty venv NAME (see `graphloom_test_kit::python`)
//! and checks that its `pip` runs. The test of first-use installs starts several of these
//! at once, as nextest starts several test processes that need the same venv.

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let Some(name) = std::env::args().nth(1) else {
        eprintln!("usage: first-use-venv NAME");
        return ExitCode::from(2);
    };
    let python = graphloom_test_kit::python::venv(&name, &[]);
    match Command::new(&python).args(["-m", "pip", "--version"]).output() {
        Ok(out) if out.status.success() => {
            println!("{}", python.display());
            ExitCode::SUCCESS
        }
        Ok(out) => {
            eprintln!(
                "{} -m pip failed: {}",
                python.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("{} does not run: {e}", python.display());
            ExitCode::FAILURE
        }
    }
}
