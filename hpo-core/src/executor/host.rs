//! The machine's own memory, as the executor's budget when trials run on
//! the CPU: `MemTotal`, or the control group's limit inside a container
//! (where `/proc/meminfo` shows the host's memory, not the container's).

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The memory budget of the machine itself (trials on the CPU): its total
/// memory (`MemTotal` in `/proc/meminfo`, or its control group's limit
/// when that is smaller), capped at `cap` when given.
pub fn host_budget(cap: Option<u64>) -> Result<u64> {
    match (host_total(), cap) {
        (Some(total), Some(cap)) => Ok(total.min(cap)),
        (Some(total), None) => Ok(total),
        (None, Some(cap)) => Ok(cap),
        (None, None) => Err(Error::InvalidConfig(
            "no memory budget for the CPU: the machine's memory is unknown here \
             (no /proc/meminfo); give one (for example 8GiB)"
                .into(),
        )),
    }
}

/// The memory this process may use: the machine's `MemTotal`, or its
/// control group's limit when that is smaller (inside a container,
/// `/proc/meminfo` shows the host's memory, not the container's).
fn host_total() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let total = kib * 1024;
    let limit = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| cgroup_memory_limit(&c, Path::new("/sys/fs/cgroup")));
    Some(limit.map_or(total, |l| l.min(total)))
}

/// The memory limit of this process's control group, from the text of
/// `/proc/self/cgroup` and the cgroup file system mounted at `root`:
/// cgroup v2's `memory.max` (its line `0::/path`), else v1's
/// `memory.limit_in_bytes` (the line naming the `memory` controller).
/// `None` when there is no limit (`max`, or v1's "unlimited" near 2^63) or
/// the files cannot be read. The group's own folder is tried first, then
/// the root (a container with its own cgroup namespace sees itself as `/`).
pub fn cgroup_memory_limit(proc_cgroup: &str, root: &Path) -> Option<u64> {
    let read = |file: PathBuf| -> Option<u64> {
        let text = std::fs::read_to_string(file).ok()?;
        let value = text.trim();
        if value == "max" {
            return None;
        }
        value.parse::<u64>().ok().filter(|&v| v < 1 << 60)
    };
    let under = |base: PathBuf, group: &str, file: &str| {
        let group = group.trim_start_matches('/');
        read(base.join(group).join(file)).or_else(|| read(base.join(file)))
    };
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(group)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            if let Some(limit) = under(root.to_path_buf(), group, "memory.max") {
                return Some(limit);
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            if let Some(limit) = under(root.join("memory"), group, "memory.limit_in_bytes") {
                return Some(limit);
            }
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::executor::GIB;

    #[test]
    fn a_containers_memory_limit_is_read_from_its_cgroup() {
        let dir = std::env::temp_dir().join(format!("hpo-cgroup-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.as_path();
        // cgroup v2: the group's memory.max.
        std::fs::create_dir_all(root.join("job/7")).unwrap();
        std::fs::write(root.join("job/7/memory.max"), "4294967296\n").unwrap();
        assert_eq!(cgroup_memory_limit("0::/job/7\n", root), Some(4 << 30));
        // No limit.
        std::fs::write(root.join("job/7/memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_memory_limit("0::/job/7\n", root), None);
        // A container's own namespace: the group is `/`, the file at the root.
        std::fs::write(root.join("memory.max"), "2147483648").unwrap();
        assert_eq!(cgroup_memory_limit("0::/\n", root), Some(2 << 30));
        // cgroup v1: the memory controller's limit; "unlimited" is 2^63 - 4096.
        std::fs::create_dir_all(root.join("memory/docker/abc")).unwrap();
        std::fs::write(
            root.join("memory/docker/abc/memory.limit_in_bytes"),
            "1073741824",
        )
        .unwrap();
        let v1 = "12:cpu,cpuacct:/docker/abc\n11:memory:/docker/abc\n";
        assert_eq!(cgroup_memory_limit(v1, root), Some(1 << 30));
        std::fs::write(
            root.join("memory/docker/abc/memory.limit_in_bytes"),
            "9223372036854771712",
        )
        .unwrap();
        assert_eq!(cgroup_memory_limit(v1, root), None);
        assert_eq!(cgroup_memory_limit("", root), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_host_budget_is_capped_by_the_given_number() {
        assert_eq!(host_budget(Some(GIB)).unwrap(), GIB);
        assert!(
            host_budget(None).unwrap() > GIB / 4,
            "a machine with memory"
        );
    }
}
