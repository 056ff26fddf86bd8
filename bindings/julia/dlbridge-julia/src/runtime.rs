//! Starting the embedded Julia once per process, and the thread that owns it.

use std::cell::Cell;
use std::ffi::{c_char, c_int, CString};
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Mutex;
use std::thread::{self, ThreadId};

use jlrs::prelude::Value;

use crate::error::{thread_label, Error, Result};
use crate::fork;
use crate::listener;
use crate::package::{self, Package};
use crate::signals::{HostSignals, InJulia};

/// GC stack slots of the embedded runtime (jlrs frames hold every value a call makes).
const STACK_SLOTS: usize = 1024;

/// The Julia half of this crate: conversions at the boundary, on top of DLBridge.jl.
const EMBEDDED_JL: &str = include_str!("embedded.jl");

/// Loads DLBridge.jl (`path`) into `Main`, with `DLBRIDGE_LIB` defaulting to `library`.
const LOAD_PACKAGE: &str = r#"(path, library) -> withenv(() -> Base.include(Main, path),
    "DLBRIDGE_LIB" => get(ENV, "DLBRIDGE_LIB", library))"#;

/// Where the runtime stands in this process.
enum State {
    NotStarted,
    Running {
        owner: ThreadId,
        label: String,
        pid: u32,
    },
    Failed(String),
    Exited,
}

static STATE: Mutex<State> = Mutex::new(State::NotStarted);

thread_local! {
    /// The runtime, on the thread that started it (null elsewhere). It is never dropped: Julia
    /// cannot be restarted in a process, so it lives until the process exits.
    static RUNTIME: Cell<*mut jlrs::Julia> = const { Cell::new(std::ptr::null_mut()) };
}

extern "C" {
    /// libjulia's command-line parser; sets the options `jl_init` reads.
    fn jl_parse_opts(argcp: *mut c_int, argvp: *mut *mut *mut c_char);
    /// Runs Julia's `atexit` hooks and finalizers, as `exit` does.
    fn jl_atexit_hook(status: c_int);
}

/// The embedded Julia of this process, usable on the thread that started it.
///
/// [`Julia::start`] starts it on first use (about 0.2 s, plus loading DLBridge.jl) and hands out
/// further handles on the same thread; the handle is neither `Send` nor `Sync`, and a start from
/// any other thread returns [`Error::WrongThread`], and so does every call in a forked child
/// ([`Error::Forked`]). Julia runs one thread (`--threads=1`): a `JULIA_NUM_THREADS` other
/// than 1 makes the start fail with [`Error::Start`] naming it. Julia's own signal handlers
/// are installed for its start, then every signal's action and the signal mask are put back as
/// the host had them, except SIGSEGV, which Julia's
/// handler takes while Julia code runs (a stack overflow is a `StackOverflowError`) and the
/// host's handler otherwise, and SIGUSR2, which Julia keeps; so Ctrl-C keeps working in the
/// host; Julia's signal-listener thread is parked for good, so it never takes a signal the
/// host should get (Julia's profiler, which it drives, does not run). The host's stdin, stdout
/// and stderr keep their blocking mode (Julia's start would
/// leave pipes non-blocking).
///
/// Which Julia: `DLBRIDGE_JULIA_BINDIR` (the folder of the `julia` binary) and
/// `DLBRIDGE_JULIA_IMAGE` (its `sys.so`), defaulting to the Julia this crate was built against;
/// which DLBridge.jl: `DLBRIDGE_JULIA_PACKAGE` (the package folder), defaulting to the copy of
/// `bindings/julia/DLBridge` compiled into this crate (so a built artefact does not need its
/// checkout); libdlbridge: `DLBRIDGE_LIB`, defaulting to the shared object holding this crate
/// where that object exports libdlbridge's functions too (the Python module does), else to this
/// checkout's `target/release`.
pub struct Julia {
    _not_send: PhantomData<*mut jlrs::Julia>,
}

impl Julia {
    /// Starts Julia on this thread if the process has not started it yet, then loads
    /// DLBridge.jl into it; returns a handle on the thread that started it.
    ///
    /// # Errors
    /// [`Error::WrongThread`] on any other thread; [`Error::Start`] if Julia or DLBridge.jl
    /// cannot be loaded (a failed start is final: later calls return the same error).
    pub fn start() -> Result<Julia> {
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        let current = thread::current();
        match &*state {
            State::Running { pid, .. } if *pid != std::process::id() => {
                Err(Error::Forked { parent: *pid })
            }
            State::Running { owner, .. } if *owner == current.id() => Ok(Julia::handle()),
            State::Running { label, .. } => Err(Error::WrongThread {
                owner: label.clone(),
                caller: thread_label(current.name(), current.id()),
            }),
            State::Failed(message) => Err(Error::Start(message.clone())),
            State::Exited => Err(Error::Exited),
            State::NotStarted => match start_runtime() {
                Ok(runtime) => {
                    RUNTIME.with(|cell| cell.set(runtime));
                    fork::install();
                    *state = State::Running {
                        owner: current.id(),
                        label: thread_label(current.name(), current.id()),
                        pid: std::process::id(),
                    };
                    Ok(Julia::handle())
                }
                Err(message) => {
                    *state = State::Failed(message.clone());
                    Err(Error::Start(message))
                }
            },
        }
    }

    fn handle() -> Julia {
        Julia {
            _not_send: PhantomData,
        }
    }

    /// Runs `f` with the runtime of this thread (a `Julia` handle exists only on the thread
    /// that started it), unless the process is a forked child or Julia has exited.
    pub(crate) fn with_runtime<T>(&self, f: impl FnOnce(&mut jlrs::Julia) -> T) -> Result<T> {
        match &*STATE.lock().unwrap_or_else(|e| e.into_inner()) {
            State::Running { pid, .. } if *pid != std::process::id() => {
                return Err(Error::Forked { parent: *pid })
            }
            State::Running { .. } => {}
            _ => return Err(Error::Exited),
        }
        let runtime = RUNTIME.with(Cell::get);
        let _running = InJulia::enter();
        // SAFETY: handles are made only on the thread whose RUNTIME holds the leaked, never freed
        // runtime, and they are !Send; `f` cannot reach another handle's `with_runtime` (calls
        // into Julia do not hand control back to Rust code), so this is the only live reference.
        Ok(f(unsafe { &mut *runtime }))
    }

    /// Runs Julia's exit hooks (`atexit` functions, then every pending finalizer, which
    /// flushes and closes open files), as a Julia process does when it exits, if Julia runs on
    /// this thread of this process; returns whether it did. Julia cannot be used afterwards
    /// ([`Error::Exited`]). Meant for the host's own exit: it does nothing where Julia has not
    /// started, in a forked child, on another thread or a second time.
    pub fn run_exit_hooks() -> bool {
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        match &*state {
            State::Running { owner, pid, .. }
                if *pid == std::process::id() && *owner == thread::current().id() => {}
            _ => return false,
        }
        let _running = InJulia::enter();
        // SAFETY: on Julia's thread of the process that started it, with Julia running; the
        // state becomes Exited below, so Julia is never entered again.
        unsafe { jl_atexit_hook(0) };
        *state = State::Exited;
        true
    }
}

/// A path from an environment variable, or the default recorded at build time.
fn configured_path(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from)
}

/// Starts Julia and loads DLBridge.jl and the embedded module; the error text says why not.
fn start_runtime() -> std::result::Result<*mut jlrs::Julia, String> {
    let bindir = configured_path(
        "DLBRIDGE_JULIA_BINDIR",
        env!("DLBRIDGE_JULIA_DEFAULT_BINDIR"),
    );
    let image = configured_path("DLBRIDGE_JULIA_IMAGE", env!("DLBRIDGE_JULIA_DEFAULT_IMAGE"));
    refuse_more_threads(std::env::var_os("JULIA_NUM_THREADS").as_deref())?;
    let package = Package::locate()?;
    let library = package::default_library();
    promote_libjulia();
    set_options();
    let signals = HostSignals::save();
    let stdio = StdioModes::save();
    let threads = listener::thread_ids();
    // SAFETY: jlrs's init runs once per process (STATE is NotStarted and locked); the paths are
    // checked by jlrs before jl_init.
    let runtime = unsafe { jlrs::Julia::init_with_image(STACK_SLOTS, bindir.clone(), image) }
        .map_err(|e| {
            format!(
                "{e} (Julia from {}; set DLBRIDGE_JULIA_BINDIR)",
                bindir.display()
            )
        });
    signals.restore();
    let mut runtime = runtime?;
    stdio.restore();
    if !listener::park_listener(&threads) {
        return Err(
            "cannot find Julia's signal-listener thread to keep it off the host's \
                    signals"
                .into(),
        );
    }
    let source = package.main().to_string_lossy().into_owned();
    let _running = InJulia::enter();
    let loaded = runtime.dynamic_frame(|global, frame| {
        let path = Value::new(frame, source.as_str())?;
        let library = Value::new(frame, library.as_str())?;
        let include = Value::eval_string(frame, LOAD_PACKAGE)?
            .map_err(|_| jlrs::error::JlrsError::Other("cannot compile the loader".into()))?;
        if let Err(exception) = include.call2(frame, path, library)? {
            let message = crate::call::exception_message(global, frame, exception)?;
            return Ok(Err(format!("cannot load {source}: {message}")));
        }
        if let Err(exception) = Value::eval_string(frame, EMBEDDED_JL)? {
            let message = crate::call::exception_message(global, frame, exception)?;
            return Ok(Err(format!("cannot load the embedded module: {message}")));
        }
        Ok(Ok(()))
    });
    match loaded {
        Ok(Ok(())) => Ok(Box::into_raw(Box::new(runtime))),
        Ok(Err(message)) => Err(message),
        Err(e) => Err(e.to_string()),
    }
}

/// Refuses a start that `JULIA_NUM_THREADS` (`threads`) asks to run on more than one thread:
/// with more threads Julia's GC stops them through SIGSEGV safepoints that need Julia's own
/// signal handling on every thread, which the host keeps (a crash, not an error). Unset or 1 is
/// accepted.
fn refuse_more_threads(threads: Option<&std::ffi::OsStr>) -> std::result::Result<(), String> {
    let Some(threads) = threads else {
        return Ok(());
    };
    let text = threads.to_string_lossy();
    if text.trim().is_empty() || text.trim().parse::<i64>() == Ok(1) {
        return Ok(());
    }
    Err(format!(
        "JULIA_NUM_THREADS={text:?} asks for more than one Julia thread, but embedded Julia runs \
         one thread only (its GC would stop further threads through signals the host keeps); \
         unset JULIA_NUM_THREADS or set it to 1 before Julia starts"
    ))
}

/// Makes libjulia's symbols global. A host that loaded this crate with `RTLD_LOCAL` (Python
/// loads extension modules so) would otherwise leave them invisible to the code Julia compiles
/// and loads (`could not load symbol "jl_n_threads"`).
fn promote_libjulia() {
    // SAFETY: RTLD_NOLOAD only changes the flags of an already-loaded library (libjulia is a
    // link-time dependency of this crate); the handle is kept, as the library stays loaded anyway.
    unsafe {
        libc::dlopen(
            c"libjulia.so.1".as_ptr(),
            libc::RTLD_NOW | libc::RTLD_GLOBAL | libc::RTLD_NOLOAD,
        );
    }
}

/// Julia's options: one thread (Julia's GC needs all its threads to run Julia's own signal
/// handlers, which the host keeps), and Julia's signal handlers installed, for SIGSEGV.
fn set_options() {
    let args: Vec<CString> = ["julia", "--handle-signals=yes", "--threads=1"]
        .iter()
        .map(|a| CString::new(*a).expect("no NUL in a constant"))
        .collect();
    // Julia may keep pointers into argv: the strings and the array live until the process exits.
    let mut argv: Vec<*mut c_char> = args.into_iter().map(CString::into_raw).collect();
    let mut argc = argv.len() as c_int;
    let mut argv_ptr = argv.as_mut_ptr();
    std::mem::forget(argv);
    // SAFETY: argc/argv describe valid, NUL-terminated, leaked strings; called before jl_init.
    unsafe { jl_parse_opts(&mut argc, &mut argv_ptr) };
}

/// The file status flags of the host's stdin, stdout and stderr. Julia's start opens them as
/// libuv streams, which makes pipes non-blocking: a host that then reads or writes them (a
/// Python `for line in sys.stdin`, a large `print`) would see `EAGAIN` as an early end of
/// input or an error. The host's modes are put back once Julia has started.
struct StdioModes([c_int; 3]);

impl StdioModes {
    fn save() -> StdioModes {
        // SAFETY: F_GETFL only reads the flags of a descriptor (-1 for a closed one).
        StdioModes([0, 1, 2].map(|fd| unsafe { libc::fcntl(fd, libc::F_GETFL) }))
    }

    fn restore(&self) {
        for (fd, &flags) in (0..).zip(&self.0) {
            if flags == -1 {
                continue;
            }
            // SAFETY: F_GETFL/F_SETFL on the host's own descriptors; only O_NONBLOCK is put back.
            unsafe {
                let now = libc::fcntl(fd, libc::F_GETFL);
                if now != -1 && (now ^ flags) & libc::O_NONBLOCK != 0 {
                    libc::fcntl(
                        fd,
                        libc::F_SETFL,
                        (now & !libc::O_NONBLOCK) | (flags & libc::O_NONBLOCK),
                    );
                }
            }
        }
    }
}
