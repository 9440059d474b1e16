//! Artifact ids: made here time-ordered, read back from attributes as
//! untrusted input.
//!
//! An id is the artifact's file name in the store, so an id read from a
//! trial's attributes (written by another process, by Optuna, or by hand)
//! decides which file is opened. [`check`] accepts only plain file names, so
//! the path it is joined to never leaves the store.

use crate::error::{Error, Result};
use rand::Rng;

/// The longest id accepted (Optuna's are 36 characters).
const MAX_LEN: usize = 128;

/// Fails unless `id` is a plain file name: 1 to 128 ASCII letters, digits,
/// `-`, `_` and `.`, not starting with `.` (no `.`, `..` or hidden files,
/// which the store keeps for its temporary files). So no `/`, `\`, NUL,
/// drive prefix or traversal can reach the path it is joined to.
pub(crate) fn check(id: &str) -> Result<()> {
    let bad = |reason: &str| Error::InvalidArtifactId {
        id: id.escape_debug().to_string(),
        reason: reason.to_owned(),
    };
    if id.is_empty() {
        return Err(bad("it is empty"));
    }
    if id.len() > MAX_LEN {
        return Err(bad(&format!("it is longer than {MAX_LEN} bytes")));
    }
    if id.starts_with('.') {
        return Err(bad("it starts with `.`"));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(bad(&format!("it contains `{}`", c.escape_debug())));
    }
    Ok(())
}

/// A new id: a UUID version 7 (RFC 9562: 48 bits of Unix milliseconds, then
/// random bits), so ids sort in upload order. `after` is the trial's latest
/// id: a new one always sorts after it, even within one millisecond or
/// with a clock that stepped back, which is what makes "the latest upload of
/// a name wins" hold.
pub(crate) fn new(after: Option<&str>) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let ms = match after.and_then(millis) {
        Some(last) if last >= now => last + 1,
        _ => now,
    } & 0xFFFF_FFFF_FFFF;
    let mut rng = rand::rng();
    let rand_a: u16 = rng.random::<u16>() & 0x0FFF;
    let rand_b: u64 = rng.random::<u64>() & 0x3FFF_FFFF_FFFF_FFFF;
    let hi = (ms << 16) | 0x7000 | u64::from(rand_a);
    let lo = (0b10 << 62) | rand_b;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xFFFF,
        hi & 0xFFFF,
        lo >> 48,
        lo & 0xFFFF_FFFF_FFFF
    )
}

/// Whether `name` has the shape of the ids hpo and Optuna make (a UUID in
/// lowercase hex, `8-4-4-4-12`): the only files a sweep may take for
/// orphans, so that files someone else put in the folder are left alone.
pub(crate) fn is_uuid(name: &str) -> bool {
    let groups: Vec<&str> = name.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The milliseconds of a version-7 id made by [`new`]; `None` for other ids
/// (Optuna's are version 4, random).
fn millis(id: &str) -> Option<u64> {
    let bytes = id.as_bytes();
    if id.len() != 36 || bytes.get(14) != Some(&b'7') {
        return None;
    }
    let hex: String = id.get(..13)?.chars().filter(|c| *c != '-').collect();
    u64::from_str_radix(&hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_and_odd_names_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            "../study.db",
            "a/../../etc/passwd",
            "/etc/passwd",
            "a/b",
            "a\\b",
            "..\\..\\x",
            "C:x",
            "a\0b",
            ".hidden",
            ".upload-x.tmp",
            "a b",
            "é",
            "a\nb",
            &"x".repeat(129),
        ] {
            let err = check(bad).unwrap_err();
            assert!(
                matches!(err, Error::InvalidArtifactId { .. }),
                "{bad:?}: {err}"
            );
        }
        assert!(check("a\0b").unwrap_err().to_string().contains("\\0"));
    }

    #[test]
    fn plain_names_and_uuids_pass() {
        for good in [
            "0b5e5a4e-3c4f-4b9e-9a51-2f1a9f0c8d7e",
            "model.safetensors",
            "a..b",
            "A_1-2",
            &"x".repeat(128),
        ] {
            check(good).unwrap();
        }
    }

    #[test]
    fn new_ids_are_uuid7_and_sort_after_the_last() {
        let a = new(None);
        check(&a).unwrap();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "7");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
        let mut last = a;
        for _ in 0..1000 {
            let next = new(Some(&last));
            assert!(next > last, "{next} <= {last}");
            last = next;
        }
        // An id from the future (a clock that stepped back) is still passed.
        let future = "ffffffff-fff0-7000-8000-000000000000";
        assert!(new(Some(future)).as_str() > future);
        // Optuna's random (version 4) ids do not steer the clock.
        assert!(millis("0b5e5a4e-3c4f-4b9e-9a51-2f1a9f0c8d7e").is_none());
        assert!(is_uuid(&last) && is_uuid("0b5e5a4e-3c4f-4b9e-9a51-2f1a9f0c8d7e"));
        for not in [
            "README",
            "0B5E5A4E-3C4F-4B9E-9A51-2F1A9F0C8D7E",
            "0b5e5a4e3c4f4b9e9a512f1a9f0c8d7e",
        ] {
            assert!(!is_uuid(not), "{not}");
        }
    }
}
