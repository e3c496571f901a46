//! How an instance slot's memory is made fresh again after a call, and
//! when the fast way is safe.
//!
//! The pool resets a slot's linear memories and tables when a store drops.
//! With `PAGEMAP_SCAN` (Linux 6.7+) wasmtime asks the kernel which pages the
//! instance wrote and rewrites only those: a small call costs a few KiB of
//! copying instead of the whole resident region. But wasmtime 48 asks only
//! for pages that are *present*: a page the guest wrote that the kernel has
//! since swapped out is neither rewritten nor dropped, and the next instance
//! in that slot reads it back, with the previous call's data in it (or, in a
//! table, its function pointers). So the scan is used only while no swap
//! can take this process's pages; otherwise every slot is reset in full
//! (its resident part rewritten, the rest dropped), which misses nothing.
//!
//! Invariants:
//! - Under `Auto` (the default) the engine scans only when, at start, the
//!   kernel has the scan ([`kernel_scans`]) and no swap area is active or
//!   this process's cgroup forbids swap ([`swap_reaches_us`]); otherwise
//!   it resets in full. `Scan` and `Full` are the operator's to force.
//! - While an `Auto` server scans, the same check runs again at most once a
//!   second, on the way into an instance (never on a timer: an idle server
//!   does not wake). Once swap can reach this process, every new instance
//!   is refused until restart ([`ResetGuard::check`]): a slot reset after
//!   the swap came on may hold stale pages, and no guest may read them.
//! - Residual, whenever the engine scans: a page the kernel is migrating
//!   (compaction) at the moment of the reset is not present either. `Full`
//!   closes that too (docs/security.md).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::config::MemoryReset;

/// How often a scanning server looks again for swap, at most.
const RECHECK: Duration = Duration::from_secs(1);

/// Whether the kernel may swap out this process's anonymous memory, and
/// why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Swap {
    /// No swap area is active.
    None,
    /// Areas are active, but this process's cgroup (or an ancestor) allows
    /// it no swap (`memory.swap.max` 0).
    Forbidden(String),
    /// Swap can take this process's pages: the active areas, or why this
    /// could not be told.
    Reaches(String),
}

/// Whether swap can take this process's pages now.
pub(super) fn swap_reaches_us() -> Swap {
    let swaps = match std::fs::read_to_string("/proc/swaps") {
        Ok(text) => text,
        Err(e) => return Swap::Reaches(format!("/proc/swaps cannot be read ({e})")),
    };
    let areas = active_areas(&swaps);
    if areas.is_empty() {
        return Swap::None;
    }
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    if let Some(group) = unified_cgroup(&cgroup) {
        for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            if let Some(limited) = swap_forbidden(Path::new(root), group) {
                return Swap::Forbidden(limited);
            }
        }
    }
    Swap::Reaches(format!("swap is on ({})", areas.join(", ")))
}

/// The active swap areas `/proc/swaps` lists (its first line is a header).
fn active_areas(swaps: &str) -> Vec<String> {
    swaps
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// This process's cgroup v2 path (`0::/path` in `/proc/self/cgroup`).
fn unified_cgroup(cgroup: &str) -> Option<&str> {
    cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::trim)
}

/// The first cgroup from `group` up to the root (under the cgroup v2 mount
/// `root`) whose `memory.swap.max` is 0, if any: swap never takes a page
/// charged below it.
fn swap_forbidden(root: &Path, group: &str) -> Option<String> {
    let mut path = Some(Path::new(group));
    while let Some(dir) = path {
        let relative = dir.strip_prefix("/").unwrap_or(dir);
        let file = root.join(relative).join("memory.swap.max");
        if let Ok(max) = std::fs::read_to_string(&file)
            && max.trim() == "0"
        {
            return Some(file.display().to_string());
        }
        path = dir.parent();
    }
    None
}

/// Whether this kernel answers `PAGEMAP_SCAN` (Linux 6.7+), asked as
/// wasmtime asks before it uses it: an empty range, every category. Where
/// it does not, wasmtime resets every slot in full whatever it was told,
/// and the pool should keep the smaller resident size that suits that.
fn kernel_scans() -> bool {
    use rustix::ioctl::{Updater, opcode};

    /// `struct pm_scan_arg` (linux/fs.h).
    #[repr(C)]
    struct ScanArg {
        size: u64,
        flags: u64,
        start: u64,
        end: u64,
        walk_end: u64,
        vec: u64,
        vec_len: u64,
        max_pages: u64,
        category_inverted: u64,
        category_mask: u64,
        category_anyof_mask: u64,
        return_mask: u64,
    }
    /// `struct page_region`.
    #[repr(C)]
    struct Region {
        start: u64,
        end: u64,
        categories: u64,
    }
    const PAGEMAP_SCAN: rustix::ioctl::Opcode = opcode::read_write::<ScanArg>(b'f', 16);

    let Ok(pagemap) = std::fs::File::open("/proc/self/pagemap") else {
        return false;
    };
    let mut region = Region {
        start: 0,
        end: 0,
        categories: 0,
    };
    let mut arg = ScanArg {
        size: std::mem::size_of::<ScanArg>() as u64,
        flags: 0,
        start: 0,
        end: 0,
        walk_end: 0,
        vec: std::ptr::addr_of_mut!(region) as u64,
        vec_len: 1,
        max_pages: 1,
        category_inverted: 0,
        // The eight categories of Linux 6.7, as wasmtime names them.
        category_mask: 0xff,
        category_anyof_mask: 0,
        return_mask: 0,
    };
    // SAFETY: `arg` is the `pm_scan_arg` this opcode takes, its `vec`
    // points at room for the one region it allows, and the range is empty.
    unsafe { rustix::ioctl::ioctl(&pagemap, Updater::<PAGEMAP_SCAN, ScanArg>::new(&mut arg)) }
        .is_ok()
}

/// The reset the engine was built with, and the check that keeps a
/// scanning server safe when swap comes on after it started.
pub(super) struct ResetGuard {
    /// Whether the engine resets slots with the scan.
    pub(super) scans: bool,
    /// Whether to look for swap again (scanning under `Auto`; `Scan` as
    /// asked is the operator's choice and never refused).
    watch: bool,
    /// Set, never cleared, once swap can reach a watched server.
    refused: AtomicBool,
    started: Instant,
    /// Milliseconds after `started` of the last look for swap.
    last_check_ms: AtomicU64,
}

impl ResetGuard {
    /// Decide how slots are reset under `mode`, and say so in the log.
    pub(super) fn new(mode: MemoryReset) -> ResetGuard {
        if mode != MemoryReset::Full && !kernel_scans() {
            tracing::info!("memory reset: full (this kernel has no PAGEMAP_SCAN, Linux 6.7+)");
            return ResetGuard::fixed(false);
        }
        let scans = match mode {
            MemoryReset::Full => {
                tracing::info!("memory reset: full (server.memory_reset = \"full\")");
                false
            }
            MemoryReset::Scan => {
                tracing::warn!(
                    "memory reset: scan, as server.memory_reset = \"scan\" asks, even if swap \
                     comes on: a page swapped out before its slot's reset would reach the next \
                     instance; `auto` checks for swap"
                );
                true
            }
            MemoryReset::Auto => match swap_reaches_us() {
                Swap::None => {
                    tracing::info!("memory reset: scan (no swap area is active)");
                    true
                }
                Swap::Forbidden(file) => {
                    tracing::info!(%file, "memory reset: scan (this process's cgroup allows no swap)");
                    true
                }
                Swap::Reaches(why) => {
                    tracing::info!(
                        "memory reset: full, because {why}: the scan misses pages the kernel \
                         swapped out, so every slot is rewritten in full (slower calls; a cgroup \
                         with memory.swap.max = 0, e.g. systemd's MemorySwapMax=0, allows the scan)"
                    );
                    false
                }
            },
        };
        ResetGuard {
            watch: scans && mode == MemoryReset::Auto,
            ..ResetGuard::fixed(scans)
        }
    }

    /// A reset that is never looked at again.
    fn fixed(scans: bool) -> ResetGuard {
        ResetGuard {
            scans,
            watch: false,
            refused: AtomicBool::new(false),
            started: Instant::now(),
            last_check_ms: AtomicU64::new(0),
        }
    }

    /// Whether a new instance may be made now. A server that scans because
    /// no swap reached it looks again at most once a second; once swap can
    /// reach it, it refuses every instance from then on, with the reason.
    pub(super) fn check(&self) -> Result<(), String> {
        if !self.watch {
            return Ok(());
        }
        if !self.refused.load(Ordering::Acquire) {
            let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let last = self.last_check_ms.load(Ordering::Relaxed);
            let due = now.saturating_sub(last) >= RECHECK.as_millis() as u64;
            // One caller looks; the others go on with the last answer.
            if due
                && self
                    .last_check_ms
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                self.look(swap_reaches_us());
            }
        }
        if self.refused.load(Ordering::Acquire) {
            return Err(REFUSAL.to_owned());
        }
        Ok(())
    }

    /// Take in what the latest look for swap found.
    fn look(&self, swap: Swap) {
        if let Swap::Reaches(why) = swap
            && !self.refused.swap(true, Ordering::AcqRel)
        {
            tracing::error!(
                "{why} since this server started, and it resets instance memory with a scan \
                 that misses swapped-out pages: every call is refused from now on; restart \
                 toolcage (it then resets in full)"
            );
        }
    }
}

/// Why a call is refused once swap reached a scanning server.
const REFUSAL: &str = "swap came on after the server started, and a fresh instance could now \
    hold pages of an earlier call; the operator must restart toolcage (or set \
    server.memory_reset = \"full\")";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_kernel_is_asked_as_wasmtime_asks() {
        // The test machines run Linux 6.7 or later; where a kernel says
        // otherwise, wasmtime's own probe (the same call) says so too.
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut numbers = release
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse::<u32>().ok());
        let version = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
        let expected = version >= (6, 7) && Path::new("/proc/self/pagemap").exists();
        assert_eq!(kernel_scans(), expected, "kernel {release}");
    }

    #[test]
    fn swap_areas_are_the_lines_after_the_header() {
        let none = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
        assert!(active_areas(none).is_empty());
        assert!(active_areas("").is_empty());
        let two = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n\
                   /dev/zram0                              partition\t8388604\t\t0\t\t100\n\
                   /var/tmp/swap                           file\t\t262140\t\t0\t\t-2\n";
        assert_eq!(active_areas(two), ["/dev/zram0", "/var/tmp/swap"]);
    }

    #[test]
    fn the_unified_cgroup_is_the_zero_line() {
        let hybrid = "9:name=systemd:/\n4:memory:/a/b\n0::/system.slice/toolcage.service\n";
        assert_eq!(
            unified_cgroup(hybrid),
            Some("/system.slice/toolcage.service")
        );
        assert_eq!(unified_cgroup("4:memory:/a/b\n"), None);
    }

    #[test]
    fn swap_is_forbidden_by_the_group_or_an_ancestor() {
        let root = std::env::temp_dir().join(format!("toolcage-reset-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let leaf = root.join("system.slice/toolcage.service");
        std::fs::create_dir_all(&leaf).expect("test folder");
        std::fs::write(leaf.join("memory.swap.max"), "max\n").expect("test folder");
        assert_eq!(
            swap_forbidden(root.as_path(), "/system.slice/toolcage.service"),
            None
        );
        std::fs::write(root.as_path().join("system.slice/memory.swap.max"), "0\n")
            .expect("test folder");
        let found =
            swap_forbidden(root.as_path(), "/system.slice/toolcage.service").expect("test folder");
        assert!(found.ends_with("system.slice/memory.swap.max"), "{found}");
        std::fs::write(leaf.join("memory.swap.max"), "0\n").expect("test folder");
        let found =
            swap_forbidden(root.as_path(), "/system.slice/toolcage.service").expect("test folder");
        assert!(
            found.ends_with("toolcage.service/memory.swap.max"),
            "{found}"
        );
    }

    fn scanning_guard() -> ResetGuard {
        ResetGuard {
            watch: true,
            ..ResetGuard::fixed(true)
        }
    }

    #[test]
    fn swap_coming_on_refuses_every_instance_after() {
        let guard = scanning_guard();
        guard.look(Swap::None);
        guard.look(Swap::Forbidden("x".into()));
        assert!(guard.check().is_ok());
        guard.look(Swap::Reaches("swap is on (/dev/zram0)".into()));
        let refusal = guard.check().expect_err("refused");
        assert!(refusal.contains("restart toolcage"), "{refusal}");
        // Swap going off again does not undo it: slots reset while it was
        // on may hold stale pages.
        guard.look(Swap::None);
        assert!(guard.check().is_err());
    }

    #[test]
    fn a_full_reset_is_never_refused() {
        let guard = ResetGuard::fixed(false);
        guard.look(Swap::Reaches("swap is on".into()));
        // `look` records it, but a server that does not scan has nothing to
        // fear from swap.
        assert!(guard.check().is_ok());
    }
}
