//! Folding a worker's repeated stderr lines into the first and a count.
//!
//! A GPU backend that fails can print the same line thousands of times:
//! cubecl 0.10 logs "Task failed: Any { .. }" for every operation queued
//! behind a failed allocation (13,060 lines for one out-of-memory trial on
//! an H200, book: "Surviving OOM"). The coordinator keeps the last lines of
//! a worker's stderr to record why it failed; unfolded, those would be
//! copies of that one line and the cause would be gone. Lines are compared
//! without terminal colours and without a leading timestamp, so a logger's
//! repeated event folds too.

/// Folds runs of equal lines: feed lines in, get back what to print.
#[derive(Debug, Default)]
pub(crate) struct LineFolder {
    last: Option<String>,
    repeats: u64,
}

impl LineFolder {
    /// The lines to emit for `line`: none while it repeats the previous one,
    /// else the count of the finished run (if any) and `line` itself.
    pub(crate) fn push(&mut self, line: String) -> Vec<String> {
        let key = normalise(&line);
        if self.last.as_deref() == Some(key.as_str()) {
            self.repeats += 1;
            return Vec::new();
        }
        let mut out = self.flush();
        self.last = Some(key);
        out.push(line);
        out
    }

    /// The count of the run in progress, if the last line repeated.
    pub(crate) fn flush(&mut self) -> Vec<String> {
        let n = std::mem::take(&mut self.repeats);
        if n == 0 {
            Vec::new()
        } else {
            vec![format!(
                "(the line above repeated {n} more time{})",
                if n == 1 { "" } else { "s" }
            )]
        }
    }
}

/// `line` without ANSI escape sequences and without a leading RFC 3339
/// timestamp (`2026-11-26T05:17:11.069950Z`).
fn normalise(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    let trimmed = plain.trim_start();
    let first = trimmed.split_whitespace().next().unwrap_or("");
    let is_timestamp = first.len() >= 20
        && first.as_bytes().get(4) == Some(&b'-')
        && first.as_bytes().get(10) == Some(&b'T')
        && first.ends_with('Z');
    if is_timestamp {
        trimmed[first.len()..].trim_start().to_owned()
    } else {
        plain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_lines_fold_into_a_count() {
        let mut f = LineFolder::default();
        let mut out = Vec::new();
        out.extend(f.push("thread 'DSD-0-0' panicked: can't allocate buffer".into()));
        for i in 0..13060 {
            out.extend(f.push(format!(
                "\u{1b}[2m2026-11-26T05:17:11.{i:06}Z\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m cubecl: Task failed: Any {{ .. }}"
            )));
        }
        out.extend(f.push("trial 0 failed".into()));
        out.extend(f.flush());
        assert_eq!(out.len(), 4, "{out:?}");
        assert!(out[0].contains("can't allocate"));
        assert!(out[1].contains("Task failed"));
        assert_eq!(out[2], "(the line above repeated 13059 more times)");
        assert_eq!(out[3], "trial 0 failed");
    }

    #[test]
    fn different_lines_pass_and_a_last_run_is_flushed() {
        let mut f = LineFolder::default();
        assert_eq!(f.push("a".into()), vec!["a"]);
        assert_eq!(f.push("b".into()), vec!["b"]);
        assert!(f.push("b".into()).is_empty());
        assert_eq!(f.flush(), vec!["(the line above repeated 1 more time)"]);
        assert!(f.flush().is_empty());
    }
}
