//! Writing a snapshot without stopping the driver (issue 23): the driver forks, and the
//! child, a copy-on-write image of the process taken between two turns (a consistent
//! point), serializes the state straight into `snapshot.bin.tmp` and syncs it, while the
//! driver goes on at once. The driver's pause is the fork itself, a copy of the page tables.
//! Redis's background save works the same way.
//!
//! The child runs only [`fork_write`]'s code, then `_exit`s. The parent's other threads do not
//! exist in it, so a lock one of them held at the fork would never be released there, and an
//! allocator's locks are such locks: the child allocates nothing (postcard writes into a
//! block made before the fork, flushed with `write(2)`). [`ForkSafe`], the binary's global
//! allocator, makes sure of it: an allocation (or free) in the child ends it with status
//! [`ALLOCATED`] instead of risking a deadlock, and the driver then writes snapshots itself,
//! as it does where `fork` fails. The child also dies with the thread that forked it
//! (`PR_SET_PDEATHSIG`), so a killed server leaves no writer behind for a restarted one to
//! meet on the same file.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::CString;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The exit status of a child that tried to allocate.
pub const ALLOCATED: i32 = 70;

/// Set in a snapshot's child only.
static IN_CHILD: AtomicBool = AtomicBool::new(false);

/// A global allocator that refuses to work in a snapshot's child (see the module's doc):
/// `#[global_allocator] static A: ForkSafe<mimalloc::MiMalloc> = ForkSafe(mimalloc::MiMalloc);`
pub struct ForkSafe<A>(pub A);

fn refuse_in_child() {
    if IN_CHILD.load(Relaxed) {
        // SAFETY: ends the process at once, running nothing else.
        unsafe { libc::_exit(ALLOCATED) }
    }
}

// SAFETY: every call is passed on to `A` unchanged, or ends the process.
unsafe impl<A: GlobalAlloc> GlobalAlloc for ForkSafe<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        refuse_in_child();
        unsafe { self.0.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        refuse_in_child();
        unsafe { self.0.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        refuse_in_child();
        unsafe { self.0.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        refuse_in_child();
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

/// Writes into a block made before the fork, flushed with `write(2)`; allocates nothing.
struct FdWriter {
    fd: libc::c_int,
    block: ManuallyDrop<Vec<u8>>,
    /// Stop this long after the first flush (tests: a kill half-way through the file).
    pause_ms: Option<u64>,
}

impl FdWriter {
    fn flush_block(&mut self) -> std::io::Result<()> {
        let mut done = 0;
        while done < self.block.len() {
            let rest = &self.block[done..];
            // SAFETY: `rest` is a live buffer of `rest.len()` bytes.
            let n = unsafe { libc::write(self.fd, rest.as_ptr().cast(), rest.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            } else {
                done += n as usize;
            }
        }
        self.block.clear();
        if let Some(ms) = self.pause_ms.take() {
            let t = libc::timespec {
                tv_sec: (ms / 1000) as libc::time_t,
                tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
            };
            // SAFETY: a plain sleep.
            unsafe { libc::nanosleep(&t, std::ptr::null_mut()) };
        }
        Ok(())
    }
}

impl Write for FdWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.block.capacity() - self.block.len();
        if room == 0 {
            self.flush_block()?;
            return self.write(buf);
        }
        let n = room.min(buf.len());
        self.block.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.flush_block()
    }
}

/// Fork a child that runs `write` on `tmp` (created or truncated) and syncs it; its pid.
/// Wait for it with [`wait`]. `write` must allocate nothing (see the module's doc).
pub fn fork_write<F>(write: F, tmp: &Path, pause_ms: Option<u64>) -> std::io::Result<libc::pid_t>
where
    F: FnOnce(&mut dyn Write) -> Result<(), super::codec::CodecError>,
{
    // Everything the child needs is made here, before the fork.
    let path = CString::new(tmp.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a NUL in the snapshot's path"))?;
    let block = ManuallyDrop::new(Vec::with_capacity(1 << 20));
    // SAFETY: plain system calls; the child runs only `child` and never returns.
    let parent = unsafe { libc::getpid() };
    match unsafe { libc::fork() } {
        -1 => {
            let e = std::io::Error::last_os_error();
            drop(ManuallyDrop::into_inner(block));
            Err(e)
        }
        0 => child(write, &path, block, pause_ms, parent),
        pid => {
            drop(ManuallyDrop::into_inner(block));
            Ok(pid)
        }
    }
}

/// The child's whole life: write, sync, `_exit` (0: done).
fn child<F>(
    write: F,
    path: &CString,
    block: ManuallyDrop<Vec<u8>>,
    pause_ms: Option<u64>,
    parent: libc::pid_t,
) -> !
where
    F: FnOnce(&mut dyn Write) -> Result<(), super::codec::CodecError>,
{
    IN_CHILD.store(true, Relaxed);
    // SAFETY: system calls on values made before the fork; `_exit` runs no destructor.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(1);
        }
        close_inherited();
        let fd = libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
            0o644,
        );
        if fd < 0 {
            libc::_exit(2);
        }
        let mut w = FdWriter {
            fd,
            block,
            pause_ms,
        };
        let code = match write(&mut w) {
            Ok(()) => match w.flush_block() {
                Ok(()) if libc::fsync(fd) == 0 => 0,
                _ => 3,
            },
            Err(_) => 4,
        };
        libc::_exit(code)
    }
}

/// Close every descriptor the child inherited but stdin, stdout and stderr: the server's
/// listening sockets above all. A child outlives a killed server while it syncs (a process
/// in `fsync` dies only when that returns), and with the sockets open it would hold the
/// server's address and socket file, and answer connections, so that a server restarted
/// at once found "another server answers on this socket" and would not start.
fn close_inherited() {
    // SAFETY: closes descriptors only; the child uses none made before the fork.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) == 0 {
            return;
        }
        // Before Linux 5.9: one by one, up to the limit on descriptors.
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(1 << 20) as libc::c_int
        } else {
            4096
        };
        for fd in 3..max {
            libc::close(fd);
        }
    }
}

/// Wait for the child `pid`: `Ok` if it wrote and synced the file, else why not.
pub fn wait(pid: libc::pid_t) -> Result<(), String> {
    let mut status = 0;
    // SAFETY: waits for our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    if r != pid {
        return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
    }
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => Ok(()),
            ALLOCATED => Err("the child tried to allocate".into()),
            n => Err(format!("the child failed (status {n})")),
        }
    } else {
        Err(format!(
            "the child was killed by signal {}",
            libc::WTERMSIG(status)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_writes_what_the_codec_reads_back() {
        let dir = crate::scratch::dir("forked");
        let tmp = dir.join("v.tmp");
        let value: Vec<(u64, String)> = (0..200_000).map(|i| (i, format!("job {i}"))).collect();
        let write = |w: &mut dyn Write| super::super::codec::to_writer(&value, w).map(|_| ());
        let pid = fork_write(write, &tmp, None).unwrap();
        wait(pid).unwrap();
        let bytes = std::fs::read(&tmp).unwrap();
        assert!(
            bytes.len() > 1 << 20,
            "more than one block: {}",
            bytes.len()
        );
        let back: Vec<(u64, String)> = super::super::codec::from_bytes(&bytes).unwrap();
        assert_eq!(back, value);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
