//! Second processes for the shared-memory tests: a test that needs one runs its own test binary
//! again with only a helper test selected and an environment variable set. Without that variable
//! the helper returns at once, so a plain run of the suite passes it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// The command that runs this test binary's test `helper` alone, with `var` set to `value`.
pub fn helper_command(helper: &str, var: &str, value: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", helper, "--nocapture", "--test-threads=1", "-q"])
        .env(var, value);
    command
}

/// A helper process, killed when dropped (also when the test fails).
pub struct Helper(pub Child);

impl Helper {
    /// Starts `helper` (see [`helper_command`]) and waits for the first line it prints that
    /// starts with `prefix`; returns the process and the rest of that line.
    pub fn spawn_printing(helper: &str, var: &str, value: &str, prefix: &str) -> (Helper, String) {
        Helper::spawn_printing_with(helper_command(helper, var, value), prefix)
    }

    /// Starts `command` (a [`helper_command`], perhaps with more set) and waits for the first
    /// line it prints that starts with `prefix`; returns the process and the rest of that line.
    pub fn spawn_printing_with(mut command: Command, prefix: &str) -> (Helper, String) {
        let helper = format!("{command:?}");
        let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let process = Helper(child);
        let line = stdout
            .lines()
            .find_map(|line| Some(line.ok()?.strip_prefix(prefix)?.to_owned()))
            .unwrap_or_else(|| panic!("{helper} printed no line starting with {prefix:?}"));
        (process, line)
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
