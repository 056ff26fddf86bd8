//! Removes the named shared-memory segments that dlbridge versions before sealed segments left
//! in /dev/shm and that no live process holds, and says how many (`./just shm-sweep`).

fn main() -> std::process::ExitCode {
    match dlbridge::shm::sweep() {
        Ok(removed) => {
            println!("removed {removed} unheld segment(s) left by earlier dlbridge versions");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("shm-sweep: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
