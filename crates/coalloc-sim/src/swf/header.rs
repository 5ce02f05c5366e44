//! The header: the `;` comment lines of a trace, as `Key: value` entries and verbatim.

/// One `; Key: value` header entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderEntry {
    /// The key, as written (`MaxProcs`, `Note`, `Queue`, ...).
    pub key: String,
    /// The value, trimmed. Continuation lines (comment lines indented by two or more
    /// spaces that follow an entry, such as the second URL of `Information` or the filters
    /// under `Note`) are joined to it, each trimmed, with `\n`.
    pub value: String,
}

/// The comment lines of a trace.
///
/// Every comment line is kept twice: verbatim in [`Header::comments`] (so that a copy of a
/// trace can carry its acknowledgement and copyright notices unchanged) and, parsed, in
/// [`Header::entries`]. The five fields the simulator needs are typed; each is the leading
/// whole number of the first entry with that key (`MaxNodes: 338 (batch partition; 512
/// total)` gives 338), or `None` when the key is missing or its value does not start with a
/// number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header {
    /// Every `Key: value` entry in file order; keys may repeat (`Note`, `Queue`,
    /// `Partition`).
    pub entries: Vec<HeaderEntry>,
    /// Every comment line as written, `;` included, without the line end.
    pub comments: Vec<String>,
    /// `MaxJobs`: the number of jobs in the original log.
    pub max_jobs: Option<i64>,
    /// `MaxRecords`: the number of job lines in this file.
    pub max_records: Option<i64>,
    /// `MaxNodes`: the machine's nodes.
    pub max_nodes: Option<i64>,
    /// `MaxProcs`: the machine's processors.
    pub max_procs: Option<i64>,
    /// `UnixStartTime`: the log's time 0 as seconds since the Unix epoch.
    pub unix_start_time: Option<i64>,
}

impl Header {
    /// The value of the first entry named `key` (ASCII case ignored).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.key.eq_ignore_ascii_case(key))
            .map(|e| e.value.as_str())
    }

    /// The values of every entry named `key` (ASCII case ignored), in file order.
    pub fn get_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.key.eq_ignore_ascii_case(key))
            .map(|e| e.value.as_str())
    }

    /// Take one comment line (starting with `;`, without its line end). `open` says whether
    /// the last entry still takes continuation lines; the caller keeps it between calls.
    pub(crate) fn push_comment(&mut self, line: &[u8], open: &mut bool) {
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches(['\r', ' ', '\t']);
        self.comments.push(line.to_owned());
        let body = line.trim_start().strip_prefix(';').unwrap_or(line);
        if let Some((key, value)) = split_entry(body) {
            let value = value.trim().to_owned();
            let typed = match key.to_ascii_lowercase().as_str() {
                "maxjobs" => Some(&mut self.max_jobs),
                "maxrecords" => Some(&mut self.max_records),
                "maxnodes" => Some(&mut self.max_nodes),
                "maxprocs" => Some(&mut self.max_procs),
                "unixstarttime" => Some(&mut self.unix_start_time),
                _ => None,
            };
            if let Some(slot) = typed {
                if slot.is_none() {
                    *slot = leading_int(&value);
                }
            }
            self.entries.push(HeaderEntry {
                key: key.to_owned(),
                value,
            });
            *open = true;
        } else {
            let text = body.trim();
            if text.is_empty() {
                *open = false;
            } else if *open {
                if let Some(last) = self.entries.last_mut() {
                    if !last.value.is_empty() {
                        last.value.push('\n');
                    }
                    last.value.push_str(text);
                }
            }
        }
    }
}

/// `Key: value` when the text after `;` is at most one space or tab, then a key (a letter,
/// then letters, digits or `_`), then `:`.
fn split_entry(body: &str) -> Option<(&str, &str)> {
    let rest = body
        .strip_prefix(' ')
        .or_else(|| body.strip_prefix('\t'))
        .unwrap_or(body);
    let colon = rest.find(':')?;
    let key = &rest[..colon];
    let mut chars = key.chars();
    let first = chars.next()?;
    if first.is_ascii_alphabetic() && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Some((key, &rest[colon + 1..]))
    } else {
        None
    }
}

/// The whole number at the start of `s` (an optional `-`, then digits).
fn leading_int(s: &str) -> Option<i64> {
    let end = s
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(s.len(), |(i, _)| i);
    s[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_continuations_and_typed_fields() {
        let mut h = Header::default();
        let mut open = false;
        for line in [
            "; Version: 2.2",
            "; Information: http://www.pdc.kth.se/",
            ";              http://www.cs.huji.ac.il/labs/parallel/workload/",
            "; MaxNodes: 338 (batch partition; 512 total)",
            "; MaxProcs: lots",
            "; UnixStartTime: 843480031",
            ";",
            ";       stray text after a blank comment line",
            "; Note: THIS IS A CLEANED VERSION OF THE LOG!",
            ";       The filter used to produce it was",
            ";         job<=14 (14 jobs removed)",
            "; Note: second note\r",
        ] {
            h.push_comment(line.as_bytes(), &mut open);
        }
        assert_eq!(h.comments.len(), 12);
        assert_eq!(h.comments[11], "; Note: second note");
        assert_eq!(
            h.get("information"),
            Some("http://www.pdc.kth.se/\nhttp://www.cs.huji.ac.il/labs/parallel/workload/")
        );
        assert_eq!(h.max_nodes, Some(338));
        assert_eq!(h.max_procs, None);
        assert_eq!(h.get("MaxProcs"), Some("lots"));
        assert_eq!(h.unix_start_time, Some(843480031));
        let notes: Vec<_> = h.get_all("Note").collect();
        assert_eq!(
            notes,
            [
                "THIS IS A CLEANED VERSION OF THE LOG!\nThe filter used to produce it was\njob<=14 (14 jobs removed)",
                "second note"
            ]
        );
        assert_eq!(h.entries.len(), 7);
    }

    #[test]
    fn leading_numbers() {
        assert_eq!(leading_int("100"), Some(100));
        assert_eq!(leading_int("-28800"), Some(-28800));
        assert_eq!(leading_int("24515 (170 partitions)"), Some(24515));
        assert_eq!(leading_int(""), None);
        assert_eq!(leading_int("-"), None);
        assert_eq!(leading_int("x1"), None);
    }
}
